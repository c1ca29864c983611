package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// catalogOf is the server's GET /tools.
func catalogOf(t *testing.T, h *harness) tools.Catalog {
	t.Helper()
	r := h.do(http.MethodGet, "/tools", "")
	require.Equal(t, 200, r.Status, r.Raw)
	var cat tools.Catalog
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &cat))
	return cat
}

// loadView fetches /openapi.json (with extra request headers) and checks
// it is a valid OpenAPI 3.0 document, as kin-openapi's loader and
// validator see it.
func loadView(t *testing.T, h *harness, headers ...string) (*openapi3.T, map[string]any) {
	t.Helper()
	status, hdr, body := h.raw(http.MethodGet, "/openapi.json", "", headers...)
	require.Equal(t, 200, status, body)
	require.Equal(t, "application/json", hdr.Get("Content-Type"))
	doc, err := openapi3.NewLoader().LoadFromData([]byte(body))
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.0."), doc.OpenAPI)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &raw))
	return doc, raw
}

// TestToolView: GET /openapi.json is a valid OpenAPI 3.0 document holding
// exactly the available tools, each POST /model/<tool> with the catalog's
// texts and schema, no header (or any other) parameters, the bearer scheme
// when a token is set, and a servers URL from --public-url or the Host.
func TestToolView(t *testing.T) {
	h := start(t, options{token: "tok", publicURL: "https://tools.example.com/toolfs"})
	cat := catalogOf(t, h)
	doc, raw := loadView(t, h)

	// Exactly the catalog's tools, in its order.
	var names []string
	for _, tl := range cat.Tools {
		names = append(names, tl.Name)
	}
	want := []string{"read", "write", "edit"}
	if h.srv.Searcher.Available() {
		want = append(want, "glob", "grep")
	}
	want = append(want, "move", "delete", "mkdir")
	require.Equal(t, want, names)
	assert.Equal(t, len(names), doc.Paths.Len())
	var order []string
	for _, m := range regexp.MustCompile(`"(/model/[a-z]+)":\{"post"`).FindAllStringSubmatch(h.do(http.MethodGet, "/openapi.json", "").Raw, -1) {
		order = append(order, m[1])
	}
	var wantOrder []string
	for _, n := range names {
		wantOrder = append(wantOrder, "/model/"+n)
	}
	assert.Equal(t, wantOrder, order, "paths in catalog order")

	for _, tl := range cat.Tools {
		item := doc.Paths.Value("/model/" + tl.Name)
		require.NotNil(t, item, tl.Name)
		assert.Len(t, item.Operations(), 1, "only POST")
		op := item.Post
		require.NotNil(t, op, tl.Name)
		assert.Equal(t, tl.Name, op.OperationID)
		assert.Equal(t, tl.Description, op.Summary)
		assert.Equal(t, tl.Description+"\n\n"+tl.Guidance, op.Description)
		assert.Empty(t, op.Parameters, "no header parameters: importers would make them model arguments")
		assert.Empty(t, item.Parameters)
		rawOp := raw["paths"].(map[string]any)["/model/"+tl.Name].(map[string]any)["post"].(map[string]any)
		assert.NotContains(t, rawOp, "parameters")
		schema, err := json.Marshal(rawOp["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
		require.NoError(t, err)
		assert.JSONEq(t, string(tl.Parameters), string(schema), "the body schema is the catalog's parameters")
		assert.Equal(t, true, rawOp["requestBody"].(map[string]any)["required"])
		ok := op.Responses.Value("200")
		require.NotNil(t, ok)
		assert.NotNil(t, ok.Value.Content.Get("text/plain"))
	}
	assert.Equal(t, "https://tools.example.com/toolfs", doc.Servers[0].URL)
	assert.Equal(t, openapi3.SecurityRequirements{{"bearerAuth": {}}}, doc.Security)
	assert.Equal(t, "http", doc.Components.SecuritySchemes["bearerAuth"].Value.Type)
	assert.Equal(t, "bearer", doc.Components.SecuritySchemes["bearerAuth"].Value.Scheme)

	// LibreChat's import rule: servers[0].url present, paths non-empty.
	// Open WebUI's: an operationId on every operation (only those become
	// tools), the document at <url>/openapi.json.
	require.NotEmpty(t, doc.Servers)
	assert.NotEmpty(t, doc.Servers[0].URL)
	assert.NotZero(t, doc.Paths.Len())
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			assert.NotEmpty(t, op.OperationID, "%s %s", method, path)
		}
	}

	// Without --public-url: the request's scheme and Host; a forwarded
	// host or scheme is not trusted. Without a token: no security.
	open := start(t, options{})
	doc, raw = loadView(t, open, "Host", "toolfs.internal:9000", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https")
	assert.Equal(t, "http://toolfs.internal:9000", doc.Servers[0].URL)
	assert.Empty(t, doc.Security)
	assert.NotContains(t, raw, "security")
	assert.NotContains(t, raw, "components")
	doc, _ = loadView(t, open)
	assert.Equal(t, open.srv.URL, doc.Servers[0].URL)

	// Without ripgrep, glob and grep are not offered.
	noRg := start(t, options{noRg: true})
	doc, _ = loadView(t, noRg)
	assert.Equal(t, 6, doc.Paths.Len())
	assert.Nil(t, doc.Paths.Value("/model/glob"))
	assert.Nil(t, doc.Paths.Value("/model/grep"))
}

// TestFullContractAsJSON: /openapi-full.json is /openapi.yaml, as JSON.
func TestFullContractAsJSON(t *testing.T) {
	h := start(t, options{})
	r := h.do(http.MethodGet, "/openapi-full.json", "")
	require.Equal(t, 200, r.Status)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	fromJSON, err := openapi3.NewLoader().LoadFromData([]byte(r.Raw))
	require.NoError(t, err)
	require.NoError(t, fromJSON.Validate(context.Background()))
	fromYAML, err := openapi3.NewLoader().LoadFromData(api.SpecYAML)
	require.NoError(t, err)
	a, _ := json.Marshal(fromJSON)
	b, _ := json.Marshal(fromYAML)
	assert.JSONEq(t, string(b), string(a))
	for _, p := range []string{"/tools/read", "/model/read", "/openapi.json", "/openapi.yaml", "/metrics"} {
		assert.NotNil(t, fromJSON.Paths.Value(p), p)
	}
}

// modelCall posts body to path and returns the status, content type and
// body text.
func (h *harness) raw(method, path, body string, headers ...string) (int, http.Header, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	require.NoError(h.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header[http.CanonicalHeaderKey(headers[i])] = []string{headers[i+1]}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// TestModelAnswersEqualREST: POST /model/<tool> answers exactly the REST
// output, as text/plain, with the REST status, for a success and each kind
// of failure. Each scenario runs twice over the same files, once through
// /tools and once through /model, on fresh servers (the policy's state
// included).
func TestModelAnswersEqualREST(t *testing.T) {
	root := t.TempDir()
	setup := func() {
		require.NoError(t, os.RemoveAll(root))
		require.NoError(t, os.MkdirAll(root+"/dir", 0o755))
		for name, content := range map[string]string{
			"a.txt": "alpha\nbeta\nbeta\n", "b.txt": "one\n", "src/c.go": "package c\n// needle\n",
			"bin.dat": "a\x00b", "late.txt": "ok\n\xff\n",
		} {
			require.NoError(t, os.MkdirAll(root+"/"+dirOf(name), 0o755))
			require.NoError(t, os.WriteFile(root+"/"+name, []byte(content), 0o644))
		}
	}
	type step struct {
		name, tool, body string
		headers          []string
	}
	big := `{"file_path":"x","content":"` + strings.Repeat("x", 5000) + `"}`
	steps := []step{
		{"read", "read", `{"file_path":"a.txt"}`, nil},
		{"read window", "read", `{"file_path":"a.txt","offset":2,"limit":1}`, nil},
		{"read null options", "read", `{"file_path":"a.txt","offset":null,"limit":null}`, nil},
		{"write create", "write", `{"file_path":"new.txt","content":"n\n"}`, nil},
		{"write update", "write", `{"file_path":"new.txt","content":"m\n"}`, nil},
		{"edit", "edit", `{"file_path":"a.txt","old_string":"alpha","new_string":"A"}`, nil},
		{"edit replace all", "edit", `{"file_path":"a.txt","old_string":"beta","new_string":"B","replace_all":true}`, nil},
		{"glob", "glob", `{"pattern":"*.go"}`, nil},
		{"grep", "grep", `{"pattern":"needle"}`, nil},
		{"400 argument", "read", `{"file_path":""}`, nil},
		{"400 limit", "read", `{"file_path":"a.txt","limit":99999}`, nil},
		{"400 bad json", "write", `{"file_path":`, nil},
		{"400 empty body", "edit", ` `, nil},
		{"400 content type", "read", `{"file_path":"a.txt"}`, []string{"Content-Type", "text/plain"}},
		{"400 no session", "write", `{"file_path":"z.txt","content":"z"}`, []string{"X-Session-ID", ""}},
		{"400 malformed session", "read", `{"file_path":"a.txt"}`, []string{"X-Session-ID", "bad id"}},
		{"400 malformed cwd", "read", `{"file_path":"a.txt"}`, []string{"X-Session-Cwd", "missing"}},
		{"400 pattern", "grep", `{"pattern":"("}`, nil},
		{"401", "read", `{"file_path":"a.txt"}`, []string{"Authorization", "Bearer wrong"}},
		{"403 sandbox", "read", `{"file_path":"../x"}`, nil},
		{"404 file", "read", `{"file_path":"nope.txt"}`, nil},
		{"404 offset", "read", `{"file_path":"b.txt","offset":9}`, nil},
		{"409 not observed write", "write", `{"file_path":"b.txt","content":"x"}`, nil},
		{"409 not observed edit", "edit", `{"file_path":"b.txt","old_string":"one","new_string":"1"}`, nil},
		{"409 stale", "edit", `{"file_path":"a.txt","old_string":"A","new_string":"a"}`, []string{"X-Test-Touch", "a.txt"}},
		{"413", "write", big, nil},
		{"422 binary", "read", `{"file_path":"bin.dat"}`, nil},
		{"422 late invalid UTF-8", "read", `{"file_path":"late.txt"}`, nil},
		{"422 not regular", "read", `{"file_path":"dir"}`, nil},
		{"read again", "read", `{"file_path":"a.txt"}`, nil},
		{"422 edit miss", "edit", `{"file_path":"a.txt","old_string":"gamma","new_string":"G"}`, nil},
		{"422 ambiguous", "edit", `{"file_path":"a.txt","old_string":"dup","new_string":"b"}`, nil},
	}
	run := func(prefix string) []string {
		setup()
		h := start(t, options{token: "tok", maxBody: 4096, root: root})
		var out []string
		for _, s := range steps {
			headers := append([]string{"X-Session-ID", "s"}, s.headers...)
			for i := 0; i+1 < len(headers); i += 2 {
				if headers[i] == "X-Test-Touch" { // someone else changes the file
					require.NoError(t, os.WriteFile(root+"/"+headers[i+1], []byte("dup\ndup\n"), 0o644))
					headers[i] = "X-Unused"
				}
			}
			status, hdr, body := h.raw(http.MethodPost, prefix+s.tool, s.body, headers...)
			if prefix == "/tools/" && strings.Contains(hdr.Get("Content-Type"), "json") {
				var v struct {
					Output string `json:"output"`
				}
				require.NoError(t, json.Unmarshal([]byte(body), &v), s.name)
				body = v.Output
			} else if prefix == "/model/" {
				require.Equal(t, "text/plain; charset=utf-8", hdr.Get("Content-Type"), s.name)
			}
			out = append(out, fmt.Sprintf("%s: %d %s", s.name, status, body))
		}
		return out
	}
	rest, model := run("/tools/"), run("/model/")
	require.Len(t, model, len(rest))
	for i := range rest {
		assert.Equal(t, rest[i], model[i])
	}
	// Spot checks that the scenario did what its names say.
	assert.Contains(t, rest[0], "read: 200 <path>"+root+"/a.txt</path>")
	assert.Equal(t, "409 stale: 409 Error: cannot edit \""+root+"/a.txt\": file changed since it was read — re-read the file, then retry", rest[24])
	assert.Equal(t, "401: 401 Error: missing or wrong bearer token", rest[18])
	assert.Equal(t, "413: 413 Error: request body is larger than the 4096-byte limit", rest[25])
	// (The extended profile may append hint lines to these two.)
	assert.True(t, strings.HasPrefix(rest[30], "422 edit miss: 422 Error: old_string was not found in \""+root+"/a.txt\""), rest[30])
	assert.True(t, strings.HasPrefix(rest[31], "422 ambiguous: 422 Error: old_string matched 2 times in \""+root+"/a.txt\"; provide a more specific old_string or set replace_all to true"), rest[31])
	if _, err := os.Stat("/usr/bin/rg"); err == nil {
		assert.Equal(t, "glob: 200 src/c.go", rest[7])
	}
}

func dirOf(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return "."
}

// TestModelTextEverywhere: every answer under /model/ is text, also the
// routes and methods that do not exist, and a panic-free 405.
func TestModelTextEverywhere(t *testing.T) {
	h := start(t, options{})
	cases := []struct {
		method, path string
		status       int
		text         string
	}{
		{"POST", "/model/nope", 404, "Error: no such endpoint: POST /model/nope"},
		{"GET", "/model/read", 405, "Error: method GET is not allowed on /model/read"},
	}
	for _, c := range cases {
		status, hdr, body := h.raw(c.method, c.path, "")
		assert.Equal(t, c.status, status, c.path)
		assert.Equal(t, "text/plain; charset=utf-8", hdr.Get("Content-Type"), c.path)
		assert.Equal(t, c.text, body, c.path)
	}
	// The same routes under /tools/ keep their problem bodies.
	status, hdr, _ := h.raw("POST", "/tools/nope", "")
	assert.Equal(t, 404, status)
	assert.Equal(t, "application/problem+json", hdr.Get("Content-Type"))
}

// TestModelCallsCountedAsREST: a /model call is the same executor call as
// REST: it counts in toolfs_tool_calls_total{transport="rest"}.
func TestModelCallsCountedAsREST(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "a\n")
	series := regexp.MustCompile(`(?m)^toolfs_tool_calls_total\{code="ok",tool="read",transport="rest"\} (\d+)$`)
	count := func() string {
		m := series.FindStringSubmatch(h.do(http.MethodGet, "/metrics", "").Raw)
		if m == nil {
			return "0"
		}
		return m[1]
	}
	require.Equal(t, "0", count())
	status, _, _ := h.raw("POST", "/model/read", `{"file_path":"a.txt"}`)
	require.Equal(t, 200, status)
	assert.Equal(t, "1", count())

	// A call refused for its size counts under its tool, as on /tools.
	status, _, body := h.raw("POST", "/model/write", `{"file_path":"b.txt","content":"`+strings.Repeat("x", 2<<20)+`"}`)
	require.Equal(t, 413, status, body)
	assert.Regexp(t, `(?m)^toolfs_tool_calls_total\{code="BODY_TOO_LARGE",tool="write",transport="rest"\} 1$`, h.do(http.MethodGet, "/metrics", "").Raw)
}

// TestModelSessionFromAlias: with --session-headers X-OpenWebUI-Chat-Id, a
// frontend that sends only its chat id (and an empty X-Session-ID, as an
// unexpanded template) creates a file and edits it through /model.
func TestModelSessionFromAlias(t *testing.T) {
	h := start(t, options{sessions: tools.Sessions{Aliases: []string{"X-OpenWebUI-Chat-Id"}}})
	chat := []string{"X-OpenWebUI-Chat-Id", "9f0c2a4e-1b7d-4c55-a0d2-3b1e9c7f6a11", "X-Session-ID", ""}
	status, _, body := h.raw("POST", "/model/write", `{"file_path":"notes.md","content":"# Notes\ntodo\n"}`, chat...)
	require.Equal(t, 200, status, body)
	assert.Equal(t, "<path>"+h.path("notes.md")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>", body)
	status, _, body = h.raw("POST", "/model/edit", `{"file_path":"notes.md","old_string":"todo","new_string":"done","replace_all":null}`, chat...)
	require.Equal(t, 200, status, body)
	assert.Equal(t, "The file "+h.path("notes.md")+" has been updated successfully.", body)
	assert.Equal(t, "# Notes\ndone\n", h.contents("notes.md"))

	// Another chat has read nothing.
	status, _, body = h.raw("POST", "/model/edit", `{"file_path":"notes.md","old_string":"done","new_string":"x"}`, "X-OpenWebUI-Chat-Id", "other-chat")
	assert.Equal(t, 409, status)
	assert.Equal(t, `Error: edit requires reading "`+h.path("notes.md")+`" first — read the file, then retry`, body)
	// No session at all: the message says how to send one.
	status, _, body = h.raw("POST", "/model/edit", `{"file_path":"notes.md","old_string":"done","new_string":"x"}`, "X-OpenWebUI-Chat-Id", "")
	assert.Equal(t, 400, status)
	assert.Equal(t, "Error: write and edit need a session while the read-before-write policy is on: "+
		"send the X-Session-ID header (1-128 characters of A-Za-z0-9._:-) and read the file in that session first; "+
		"operators can name a frontend's own id header with --session-headers or set --default-session", body)
}

// TestEmptyTemplatedHeaders: a frontend that expands missing template
// values to empty strings (X-Session-ID, X-Session-Cwd, an alias) breaks
// no route: every one answers as without the headers.
func TestEmptyTemplatedHeaders(t *testing.T) {
	h := start(t, options{token: "tok", sessions: tools.Sessions{Aliases: []string{"X-OpenWebUI-Chat-Id"}}})
	h.file("a.txt", "a\n")
	empty := []string{"X-Session-ID", "", "X-Session-Cwd", "", "X-OpenWebUI-Chat-Id", ""}
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/openapi.json", "", 200},
		{"GET", "/openapi.yaml", "", 200},
		{"GET", "/openapi-full.json", "", 200},
		{"GET", "/tools", "", 200},
		{"GET", "/tools?format=openai", "", 200},
		{"GET", "/tools?format=anthropic", "", 200},
		{"GET", "/tools?format=mcp", "", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/metrics", "", 200},
		{"DELETE", "/sessions/s", "", 204},
		{"POST", "/tools/read", `{"file_path":"a.txt"}`, 200},
		{"POST", "/model/read", `{"file_path":"a.txt"}`, 200},
		{"POST", "/tools/glob", `{"pattern":"*.txt"}`, 200},
		{"POST", "/model/grep", `{"pattern":"a"}`, 200},
	}
	for _, c := range cases {
		if strings.Contains(c.path, "glob") || strings.Contains(c.path, "grep") {
			if !h.srv.Searcher.Available() {
				continue
			}
		}
		status, _, body := h.raw(c.method, c.path, c.body, empty...)
		assert.Equal(t, c.status, status, "%s %s: %s", c.method, c.path, body)
	}
}

// TestCatalogFormats: GET /tools?format= gives the catalog in each
// ecosystem's shape, descriptions without the guidance; no format (or an
// empty one) is the catalog itself; any other value is a 400 naming the
// formats.
func TestCatalogFormats(t *testing.T) {
	h := start(t, options{})
	cat := catalogOf(t, h)

	// Golden: the read tool, whose schema no profile changes.
	readSchema := `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to read, resolved by the filesystem backend."},"offset":{"type":"number","description":"1-based first line to return. Defaults to 1."},"limit":{"type":"number","description":"Maximum number of lines to return. Defaults to 2000."}},"required":["file_path"]}`
	first := func(body string) string {
		var v []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		require.Len(t, v, len(cat.Tools))
		return string(v[0])
	}
	r := h.get("/tools?format=openai")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, `{"type":"function","function":{"name":"read","description":"Read a UTF-8 text file and return line-numbered content.","parameters":`+readSchema+`}}`, first(r.Raw))
	var openai []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &openai))
	for i, tl := range cat.Tools {
		assert.Equal(t, "function", openai[i].Type)
		assert.Equal(t, tl.Name, openai[i].Function.Name)
		assert.Equal(t, tl.Description, openai[i].Function.Description)
		assert.Equal(t, string(tl.Parameters), string(openai[i].Function.Parameters))
	}
	assertKeys(t, r.Raw, `[{"type","function":{"name","description","parameters"}}]`)

	r = h.get("/tools?format=anthropic")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, `{"name":"read","description":"Read a UTF-8 text file and return line-numbered content.","input_schema":`+readSchema+`}`, first(r.Raw))
	var anthropic []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &anthropic))
	for i, tl := range cat.Tools {
		assert.Equal(t, tl.Name, anthropic[i].Name)
		assert.Equal(t, tl.Description, anthropic[i].Description)
		assert.Equal(t, string(tl.Parameters), string(anthropic[i].InputSchema))
	}
	assertKeys(t, r.Raw, `[{"name","description","input_schema"}]`)

	r = h.get("/tools?format=mcp")
	require.Equal(t, 200, r.Status, r.Raw)
	var mcp struct {
		Tools []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &mcp))
	require.Len(t, mcp.Tools, len(cat.Tools))
	assert.Equal(t, `{"name":"read","description":"Read a UTF-8 text file and return line-numbered content.","inputSchema":`+readSchema+`,"annotations":{"readOnlyHint":true,"openWorldHint":false}}`, string(mcp.Tools[0]))
	for i, tl := range cat.Tools {
		var got struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Annotations json.RawMessage `json:"annotations"`
		}
		require.NoError(t, json.Unmarshal(mcp.Tools[i], &got))
		assert.Equal(t, tl.Name, got.Name)
		assert.Equal(t, tl.Description, got.Description)
		assert.Equal(t, string(tl.Parameters), string(got.InputSchema))
		wantAnn := map[string]string{
			"read": `{"readOnlyHint":true,"openWorldHint":false}`, "glob": `{"readOnlyHint":true,"openWorldHint":false}`, "grep": `{"readOnlyHint":true,"openWorldHint":false}`,
			"write": `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`, "edit": `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
			"move": `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`, "delete": `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
			"mkdir": `{"readOnlyHint":false,"destructiveHint":false,"openWorldHint":false}`,
		}[tl.Name]
		assert.Equal(t, wantAnn, string(got.Annotations), tl.Name)
	}
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &top))
	assert.Len(t, top, 1, "only tools")
	assertKeys(t, "["+strings.Join(rawStrings(mcp.Tools), ",")+"]", `[{"name","description","inputSchema","annotations"}]`)

	plain := h.do(http.MethodGet, "/tools", "")
	assert.Equal(t, plain.Raw, h.do(http.MethodGet, "/tools?format=", "").Raw)

	for _, q := range []string{"format=xml", "format=OpenAI", "format=openai&format=mcp"} {
		r = h.do(http.MethodGet, "/tools?"+q, "")
		assert.Equal(t, 400, r.Status, q)
		assert.Equal(t, "INVALID_ARGUMENT", r.Code, q)
	}
	r = h.do(http.MethodGet, "/tools?format=xml", "")
	assert.Equal(t, `Error: unknown catalog format "xml": use format=openai, format=anthropic or format=mcp, or no format for the catalog itself`, r.Output)
	r = h.do(http.MethodGet, "/tools?format=openai&format=mcp", "")
	assert.Equal(t, "Error: give format at most once: format=openai, format=anthropic or format=mcp", r.Output)
}

// assertKeys checks the member names of every element of a JSON array,
// in order, against a compact description such as
// [{"name","description"}] (nested objects in braces after a colon).
func assertKeys(t *testing.T, body, want string) {
	t.Helper()
	var v []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	for _, el := range v {
		assert.Equal(t, want, "["+keysOf(t, el)+"]")
	}
}

func keysOf(t *testing.T, obj json.RawMessage) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(obj)))
	var b strings.Builder
	var walk func()
	walk = func() {
		tok, err := dec.Token() // '{'
		require.NoError(t, err)
		require.Equal(t, json.Delim('{'), tok)
		b.WriteByte('{')
		for i := 0; dec.More(); i++ {
			k, err := dec.Token()
			require.NoError(t, err)
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q", k)
			var val json.RawMessage
			require.NoError(t, dec.Decode(&val))
			if len(val) > 0 && val[0] == '{' && k == "function" {
				b.WriteByte(':')
				inner := json.NewDecoder(strings.NewReader(string(val)))
				saved := dec
				dec = inner
				walk()
				dec = saved
			}
		}
		_, err = dec.Token() // '}'
		require.NoError(t, err)
		b.WriteByte('}')
	}
	walk()
	return b.String()
}

// get is a GET whose body is not decoded (an array is no reply).
func (h *harness) get(path string) reply {
	h.t.Helper()
	status, hdr, body := h.raw(http.MethodGet, path, "")
	return reply{Status: status, Header: hdr, Raw: body}
}

// TestModelCORSWithAlias: a browser frontend (an Open WebUI user tool
// server) may call /model/* and /openapi.json cross-origin, sending a
// --session-headers alias.
func TestModelCORSWithAlias(t *testing.T) {
	h := start(t, options{token: "t", origins: []string{"https://openwebui.example"}, sessions: tools.Sessions{Aliases: []string{"X-OpenWebUI-Chat-Id"}}})
	for _, c := range []struct{ method, path, headers string }{
		{"POST", "/model/edit", "authorization, content-type, x-openwebui-chat-id"},
		{"GET", "/openapi.json", "authorization"},
	} {
		req, _ := http.NewRequest(http.MethodOptions, h.srv.URL+c.path, nil)
		req.Header.Set("Origin", "https://openwebui.example")
		req.Header.Set("Access-Control-Request-Method", c.method)
		req.Header.Set("Access-Control-Request-Headers", c.headers)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Less(t, resp.StatusCode, 300, c.path)
		assert.Equal(t, "https://openwebui.example", resp.Header.Get("Access-Control-Allow-Origin"), c.path)
		assert.Equal(t, c.headers, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), c.path)
	}
}

func rawStrings(v []json.RawMessage) []string {
	out := make([]string, len(v))
	for i, r := range v {
		out[i] = string(r)
	}
	return out
}

// TestToolViewFollowsProfile: the view's schemas are the catalog's for the
// server's profile: the extended profile's edit advertises edits and
// dry_run, the original's does not, and both views stay valid OpenAPI 3.0.
func TestToolViewFollowsProfile(t *testing.T) {
	for _, p := range []struct {
		profile    render.Profile
		advertises bool
	}{{render.ProfileExtended, true}, {render.ProfileOriginal, false}} {
		h := start(t, options{profile: p.profile})
		doc, _ := loadView(t, h)
		props := doc.Paths.Value("/model/edit").Post.RequestBody.Value.Content.Get("application/json").Schema.Value.Properties
		_, edits := props["edits"]
		_, dry := props["dry_run"]
		assert.Equal(t, p.advertises, edits, p.profile)
		assert.Equal(t, p.advertises, dry, p.profile)
		for _, tl := range catalogOf(t, h).Tools {
			schema, err := json.Marshal(doc.Paths.Value("/model/" + tl.Name).Post.RequestBody.Value.Content.Get("application/json").Schema.Value)
			require.NoError(t, err)
			assert.JSONEq(t, string(tl.Parameters), string(schema), "%s %s", p.profile, tl.Name)
		}
	}
}

// TestSessionHeaderSentTwice: a session header sent more than once (an
// empty template value beside a real one, as some frontends produce, or the
// lines a proxy joins with a comma) stands for its one non-empty value on
// /tools and /model and on the routes that only bind it; two different
// values are a 400 INVALID_SESSION that says so
// (docs/decisions.md, "A session header sent twice").
func TestSessionHeaderSentTwice(t *testing.T) {
	h := start(t, options{sessions: tools.Sessions{Aliases: []string{"X-Chat"}}})
	h.file("sub/a.txt", "one\n")
	send := func(method, path, body string, header http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header = header
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	// The session reads the file under one header form and edits it under
	// another: the edit passes the policy only if both resolved to "abc".
	forms := []http.Header{
		{"X-Session-Id": {"", "abc"}},
		{"X-Session-Id": {"abc", ""}},
		{"X-Session-Id": {"abc", "abc"}},
		{"X-Session-Id": {", abc"}},
		{"X-Session-Id": {"abc, abc"}},
		{"X-Session-Id": {"", ""}, "X-Chat": {"", "abc"}},
		{"X-Session-Id": {"abc"}, "X-Session-Cwd": {"", "sub"}},
		{"X-Session-Id": {"abc"}, "X-Session-Cwd": {"sub", "sub"}},
	}
	text := "one\n"
	for i, form := range forms {
		path := "sub/a.txt"
		if _, ok := form["X-Session-Cwd"]; ok {
			path = "a.txt"
		}
		for _, prefix := range []string{"/tools/", "/model/"} {
			status, body := send("POST", prefix+"read", `{"file_path":"`+path+`"}`, form.Clone())
			require.Equal(t, 200, status, "%v: %s", form, body)
			next := fmt.Sprintf("%d%s\n", i, prefix)
			status, body = send("POST", prefix+"edit", `{"file_path":"`+path+`","old_string":`+strconv.Quote(text)+`,"new_string":`+strconv.Quote(next)+`}`, form.Clone())
			require.Equal(t, 200, status, "%v: %s", form, body)
			text = next
		}
	}
	assert.Equal(t, text, h.contents("sub/a.txt"))
	for _, route := range []struct{ method, path string }{{"DELETE", "/sessions/abc"}, {"GET", "/approvals"}, {"GET", "/tools"}} {
		status, body := send(route.method, route.path, "", http.Header{"X-Session-Id": {"", "abc"}, "X-Session-Cwd": {"", "sub"}})
		assert.Less(t, status, 300, "%s %s: %s", route.method, route.path, body)
	}

	// Two different values name no session: refused, naming the problem,
	// on every tool route and whatever the tool.
	conflicts := []struct {
		header http.Header
		output string
	}{
		{http.Header{"X-Session-Id": {"abc", "xyz"}}, "Error: X-Session-ID was sent more than once with different values: send one session id (an empty value counts as absent)"},
		{http.Header{"X-Session-Id": {"abc, xyz"}}, "Error: X-Session-ID was sent more than once with different values: send one session id (an empty value counts as absent)"},
		{http.Header{"X-Chat": {"abc", "", "xyz"}}, "Error: X-Chat was sent more than once with different values: send one session id (an empty value counts as absent)"},
		{http.Header{"X-Session-Id": {"abc"}, "X-Session-Cwd": {"sub", "."}}, "Error: X-Session-Cwd was sent more than once with different values: send one folder (an empty value counts as absent)"},
	}
	for _, c := range conflicts {
		status, body := send("POST", "/model/read", `{"file_path":"sub/a.txt"}`, c.header.Clone())
		assert.Equal(t, 400, status)
		assert.Equal(t, c.output, body)
		status, body = send("POST", "/tools/write", `{"file_path":"sub/a.txt","content":"x"}`, c.header.Clone())
		assert.Equal(t, 400, status)
		var p struct{ Code, Output string }
		require.NoError(t, json.Unmarshal([]byte(body), &p), body)
		assert.Equal(t, "INVALID_SESSION", p.Code)
		assert.Equal(t, c.output, p.Output)
	}
	assert.Equal(t, text, h.contents("sub/a.txt"))
}
