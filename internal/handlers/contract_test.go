package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/render"
)

// contract is api/openapi.yaml with a router over its paths.
type contract struct {
	spec   *openapi3.T
	router routers.Router
}

func loadContract(t *testing.T) contract {
	t.Helper()
	spec, err := openapi3.NewLoader().LoadFromData(api.SpecYAML)
	require.NoError(t, err)
	require.NoError(t, spec.Validate(context.Background()))
	spec.Servers = nil
	router, err := gorillamux.NewRouter(spec)
	require.NoError(t, err)
	return contract{spec: spec, router: router}
}

// check validates one real answer against the operation it answers (status,
// content type, headers, body schema); an answer of no operation (an unknown
// route) must still be a Problem.
func (c contract) check(t *testing.T, name string, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), name)
		var v any
		require.NoError(t, json.Unmarshal(body, &v), name)
		assert.NoError(t, c.spec.Components.Schemas["Problem"].Value.VisitJSON(v), name)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	// A YAML body would be decoded as the document it is, not as the string
	// the schema says: its type is what is checked.
	in.Options.ExcludeResponseBody = resp.Header.Get("Content-Type") == "application/yaml"
	assert.NoError(t, openapi3filter.ValidateResponse(context.Background(), in), "%s: %d %s", name, resp.StatusCode, body)
}

// TestAnswersMatchTheContract sends every kind of REST answer through the
// real server and validates it against api/openapi.yaml: each tool's
// success, the streamed read, the catalog (with and without ripgrep),
// health, session deletion, and a problem of every status.
func TestAnswersMatchTheContract(t *testing.T) {
	c := loadContract(t)
	h := start(t, options{token: "tok", maxBody: 4096, checkpoints: true})
	noRg := start(t, options{noRg: true})
	h.file("a.txt", "alpha\nbeta\nbeta\n")
	h.file("src/b.go", "package b\n// needle\n")
	h.file("bin.dat", "a\x00b")
	big := `{"file_path":"x","content":"` + strings.Repeat("x", 5000) + `"}`

	type call struct {
		name, method, path, body string
		headers                  []string
		status                   int
		srv                      *harness
	}
	calls := []call{
		{"read", "POST", "/tools/read", `{"file_path":"a.txt"}`, nil, 200, h},
		{"read streamed", "POST", "/tools/read", `{"file_path":"a.txt","limit":1}`, []string{"Accept", "text/plain"}, 200, h},
		{"write create", "POST", "/tools/write", `{"file_path":"new.txt","content":"n\n"}`, nil, 200, h},
		{"write update", "POST", "/tools/write", `{"file_path":"new.txt","content":"m\n"}`, nil, 200, h},
		{"edit", "POST", "/tools/edit", `{"file_path":"a.txt","old_string":"alpha","new_string":"A"}`, nil, 200, h},
		{"edit tolerant", "POST", "/tools/edit", `{"file_path":"a.txt","old_string":"beta ","new_string":"beta","replace_all":true}`, nil, 200, h},
		{"edit tolerant batch", "POST", "/tools/edit", `{"file_path":"a.txt","edits":[{"old_string":"1: A","new_string":"1: alpha"}]}`, nil, 200, h},
		{"read anchored", "POST", "/tools/read?dialect=anchors", `{"file_path":"a.txt"}`, nil, 200, h},
		{"edit_lines", "POST", "/tools/edit_lines", `{"file_path":"a.txt","edits":[{"op":"insert_after","at":"1#` + render.TagString("alpha") + `","text":"a2"}]}`, nil, 200, h},
		{"edit_lines dry run", "POST", "/tools/edit_lines", `{"file_path":"a.txt","edits":[{"op":"replace","start":"1#` + render.TagString("alpha") + `","text":""}],"dry_run":true}`, nil, 200, h},
		{"model edit_lines", "POST", "/model/edit_lines", `{"file_path":"a.txt","edits":[{"op":"replace","start":"2#` + render.TagString("a2") + `","text":"a3"}]}`, nil, 200, h},
		{"apply_patch", "POST", "/tools/apply_patch", `{"input":"*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha \n+A2\n*** Add File: p.txt\n+p\n*** End Patch"}`, nil, 200, h},
		{"apply_patch operations", "POST", "/tools/apply_patch", `{"operations":[{"type":"update_file","path":"p.txt","diff":"@@\n-p\n+q\n"},{"type":"create_file","path":"q.txt","diff":"+q\n"}]}`, nil, 200, h},
		{"apply_patch dry run", "POST", "/tools/apply_patch", `{"dry_run":true,"input":"*** Begin Patch\n*** Delete File: q.txt\n*** End Patch"}`, nil, 200, h},
		{"model apply_patch", "POST", "/model/apply_patch", `{"input":"*** Begin Patch\n*** Delete File: q.txt\n*** End Patch"}`, nil, 200, h},
		{"glob", "POST", "/tools/glob", `{"pattern":"*.go"}`, nil, 200, h},
		{"grep", "POST", "/tools/grep", `{"pattern":"needle"}`, nil, 200, h},
		{"grep no match", "POST", "/tools/grep", `{"pattern":"absent-text"}`, nil, 200, h},
		{"catalog", "GET", "/tools", "", nil, 200, h},
		{"catalog without rg", "GET", "/tools", "", nil, 200, noRg},
		{"healthz", "GET", "/healthz", "", nil, 200, h},
		{"readyz", "GET", "/readyz", "", nil, 200, h},
		{"delete session", "DELETE", "/sessions/gone", "", nil, 204, h},
		{"metrics", "GET", "/metrics", "", nil, 200, h},
		{"openapi", "GET", "/openapi.yaml", "", nil, 200, h},
		{"openapi full json", "GET", "/openapi-full.json", "", nil, 200, h},
		{"tool view", "GET", "/openapi.json", "", nil, 200, h},
		{"catalog openai", "GET", "/tools?format=openai", "", nil, 200, h},
		{"catalog anthropic", "GET", "/tools?format=anthropic", "", nil, 200, h},
		{"catalog mcp", "GET", "/tools?format=mcp", "", nil, 200, h},
		{"catalog empty format", "GET", "/tools?format=", "", nil, 200, h},
		{"catalog anchors", "GET", "/tools?dialect=anchors", "", nil, 200, h},
		{"catalog all mcp", "GET", "/tools?dialect=all&format=mcp", "", nil, 200, h},
		{"tool view anchors", "GET", "/openapi.json?dialect=anchors", "", nil, 200, h},
		{"400 dialect", "GET", "/tools?dialect=hashline", "", nil, 400, h},
		{"400 edit_lines overlap", "POST", "/tools/edit_lines", `{"file_path":"a.txt","edits":[{"op":"replace","start":"1#AB","text":""},{"op":"insert_after","at":"1#AB","text":"x"}]}`, nil, 400, h},
		{"422 stale anchor", "POST", "/tools/edit_lines", `{"file_path":"a.txt","edits":[{"op":"replace","start":"3#KT","text":""}]}`, nil, 422, h},
		{"model read", "POST", "/model/read", `{"file_path":"a.txt"}`, nil, 200, h},
		{"model write", "POST", "/model/write", `{"file_path":"new2.txt","content":"n\n"}`, nil, 200, h},
		{"model glob", "POST", "/model/glob", `{"pattern":"*.go"}`, nil, 200, h},
		{"model 404", "POST", "/model/read", `{"file_path":"nope.txt"}`, nil, 404, h},
		{"model 401", "POST", "/model/edit", `{"file_path":"a.txt"}`, []string{"Authorization", "Bearer wrong"}, 401, h},
		{"model 413", "POST", "/model/write", big, nil, 413, h},
		{"model 500 search failed", "POST", "/model/grep", `{"pattern":"x"}`, nil, 500, noRg},
		{"400 catalog format", "GET", "/tools?format=xml", "", nil, 400, h},

		{"400 argument", "POST", "/tools/read", `{"file_path":""}`, nil, 400, h},
		{"400 body", "POST", "/tools/read", `{"file_path":`, nil, 400, h},
		{"400 content type", "POST", "/tools/read", `{"file_path":"a.txt"}`, []string{"Content-Type", "text/plain"}, 400, h},
		{"400 session", "POST", "/tools/read", `{"file_path":"a.txt"}`, []string{"X-Session-ID", "bad id"}, 400, h},
		{"400 session path", "DELETE", "/sessions/bad%20id", "", nil, 400, h},
		{"400 pattern", "POST", "/tools/grep", `{"pattern":"("}`, nil, 400, h},
		{"401", "GET", "/tools", "", []string{"Authorization", "Bearer wrong"}, 401, h},
		{"403 sandbox", "POST", "/tools/read", `{"file_path":"../x"}`, nil, 403, h},
		{"404 file", "POST", "/tools/read", `{"file_path":"nope.txt"}`, nil, 404, h},
		{"404 offset", "POST", "/tools/read", `{"file_path":"a.txt","offset":99}`, nil, 404, h},
		{"404 route", "GET", "/nope", "", nil, 404, h},
		{"405", "GET", "/tools/read", "", nil, 405, h},
		{"409 not observed", "POST", "/tools/write", `{"file_path":"a.txt","content":"x"}`, []string{"X-Session-ID", "other"}, 409, h},
		{"413", "POST", "/tools/write", big, nil, 413, h},
		{"422 binary", "POST", "/tools/read", `{"file_path":"bin.dat"}`, nil, 422, h},
		{"422 edit miss", "POST", "/tools/edit", `{"file_path":"a.txt","old_string":"gamma","new_string":"G"}`, nil, 422, h},
		{"422 ambiguous", "POST", "/tools/edit", `{"file_path":"a.txt","old_string":"beta","new_string":"B"}`, nil, 422, h},
		{"400 invalid patch", "POST", "/tools/apply_patch", `{"input":"*** Begin Patch\n*** End Patch"}`, nil, 400, h},
		{"422 patch miss", "POST", "/tools/apply_patch", `{"input":"*** Begin Patch\n*** Update File: a.txt\n@@\n-bet\n*** End Patch"}`, nil, 422, h},
		{"422 patch ambiguous", "POST", "/tools/apply_patch", `{"input":"*** Begin Patch\n*** Update File: a.txt\n@@\n-beta\n*** End Patch"}`, nil, 422, h},
		{"500 search failed", "POST", "/tools/glob", `{"pattern":"*"}`, nil, 500, noRg},
	}
	for _, cl := range calls {
		req, err := http.NewRequest(cl.method, cl.srv.srv.URL+cl.path, strings.NewReader(cl.body))
		require.NoError(t, err)
		if cl.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("X-Session-ID", "s")
		for i := 0; i+1 < len(cl.headers); i += 2 {
			req.Header.Set(cl.headers[i], cl.headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, cl.status, resp.StatusCode, "%s: %s", cl.name, body)
		if cl.name == "read streamed" {
			assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
			assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
		}
		req.Body = io.NopCloser(bytes.NewReader(nil))
		c.check(t, cl.name, req, resp, body)
	}
	if _, err := os.Stat("/usr/bin/rg"); err != nil {
		t.Log("rg missing: the glob and grep successes were not checked")
	}
}
