package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/mcp"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// versions are the protocol revisions the tests speak: the SDK client's
// default (the newest, sessionless) and older ones with MCP sessions.
var versions = []struct {
	name, ask, negotiated string
	stateful              bool
}{
	{"default", "", "2026-07-28", false},
	{"2025-11-25", "2025-11-25", "2025-11-25", true},
	{"2025-03-26", "2025-03-26", "2025-03-26", true},
	{"2024-11-05", "2024-11-05", "2024-11-05", true},
}

type options struct {
	policyOff  bool
	token      string
	origins    []string
	sessions   tools.Sessions
	structured bool
	maxMCP     int
	idle       time.Duration
	maxBody    int64 // --max-body-bytes (0: 1 MiB)
	budget     int64 // mcp.Config.AnswerBudget (0: the default)
	cached     bool  // read caches on, any file at once (no racy window)
}

// harness is a real server on a loopback port over a real temporary root.
type harness struct {
	t     testing.TB
	srv   *servertest.Server
	token string
}

func start(t *testing.T, o options) *harness {
	t.Helper()
	if o.maxBody == 0 {
		o.maxBody = 1 << 20
	}
	cfg := server.Config{
		Policy: policy.Settings{Enabled: !o.policyOff, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		Token:  o.token, CORSOrigins: strings.Join(o.origins, ","), MaxBodyBytes: o.maxBody,
		StreamWriteWindow: 10 * time.Second, Sessions: tools.SessionSettings{Headers: strings.Join(o.sessions.Aliases, ","), Default: o.sessions.Default},
		MCP: mcp.Settings{Structured: o.structured}, MCPAnswerBudget: o.budget,
	}
	if o.cached {
		cfg.Cache.Bytes, cfg.Cache.RacyWindow = 8<<20, time.Nanosecond
	}
	// The MCP sessions' bounds are the policy's (--max-sessions,
	// --session-ttl).
	if o.maxMCP > 0 {
		cfg.Policy.MaxSessions = o.maxMCP
	}
	if o.idle > 0 {
		cfg.Policy.TTL = o.idle
	}
	srv := servertest.Start(t, cfg)
	return &harness{t: t, srv: srv, token: o.token}
}

func (h *harness) file(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.srv.Root, rel)
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(h.t, os.WriteFile(p, []byte(content), 0o644))
}

func (h *harness) contents(rel string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.srv.Root, rel))
	require.NoError(h.t, err)
	return string(b)
}

// recorder is the client's HTTP transport: it adds headers to every request
// and keeps the JSON bodies of the answers, so the wire bytes can be checked.
type recorder struct {
	header http.Header
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range r.header {
		req.Header[k] = v
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, b)
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// client is one MCP client session over the SDK's own client.
type client struct {
	*sdk.ClientSession
	rec *recorder
}

// connect opens an MCP session asking for version ("" = the SDK default),
// sending the token and the extra headers ("name", "value", ...).
func (h *harness) connect(version string, headers ...string) *client {
	h.t.Helper()
	cs, rec, err := h.dial(version, headers...)
	require.NoError(h.t, err)
	return &client{cs, rec}
}

func (h *harness) dial(version string, headers ...string) (*sdk.ClientSession, *recorder, error) {
	rec := &recorder{header: http.Header{}}
	if h.token != "" {
		rec.header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		rec.header.Add(headers[i], headers[i+1])
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "toolfs-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: h.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		h.t.Cleanup(func() { cs.Close() })
	}
	return cs, rec, err
}

// call runs a tool and returns its one text block and whether it is an error.
func (c *client) call(t *testing.T, tool string, args any) (string, bool) {
	t.Helper()
	res := c.result(t, tool, args)
	require.Len(t, res.Content, 1)
	tc, ok := res.Content[0].(*sdk.TextContent)
	require.True(t, ok, "content is %T", res.Content[0])
	return tc.Text, res.IsError
}

func (c *client) result(t *testing.T, tool string, args any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return res
}

// rest is a REST call: status, output and metadata of the answer.
type rest struct {
	Status   int
	Output   string          `json:"output"`
	Metadata json.RawMessage `json:"metadata"`
	Code     string          `json:"code"`
}

func (h *harness) rest(tool string, args any, headers ...string) rest {
	h.t.Helper()
	body, err := json.Marshal(args)
	require.NoError(h.t, err)
	resp := h.raw(http.MethodPost, "/tools/"+tool, string(body), append([]string{"Content-Type", "application/json"}, headers...)...)
	var r rest
	require.NoError(h.t, json.Unmarshal([]byte(resp.body), &r), resp.body)
	r.Status = resp.status
	return r
}

type reply struct {
	status int
	header http.Header
	body   string
}

// raw sends one HTTP request with the token (unless headers set
// Authorization) and the given headers.
func (h *harness) raw(method, path, body string, headers ...string) reply {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	require.NoError(h.t, err)
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

var mcpPost = []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}

func TestVersionsNegotiated(t *testing.T) {
	h := start(t, options{})
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			c := h.connect(v.ask)
			assert.Equal(t, v.negotiated, c.InitializeResult().ProtocolVersion)
			if v.stateful {
				assert.NotEmpty(t, c.ID(), "an MCP session")
			} else {
				assert.Empty(t, c.ID(), "no MCP session")
			}
		})
	}
}

// TestToolsList: the catalog's names, schemas byte for byte, descriptions,
// annotations, and the guidance as instructions, for every revision.
func TestToolsList(t *testing.T) {
	h := start(t, options{})
	var cat tools.Catalog
	require.NoError(t, json.Unmarshal([]byte(h.raw(http.MethodGet, "/tools", "").body), &cat))
	require.Len(t, cat.Tools, 8, "ripgrep is installed")

	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			c := h.connect(v.ask)
			guidance := make([]string, 0, len(cat.Tools))
			for _, tool := range cat.Tools {
				guidance = append(guidance, tool.Guidance)
			}
			assert.Equal(t, strings.Join(guidance, "\n\n"), c.InitializeResult().Instructions)
			assert.True(t, strings.HasPrefix(c.InitializeResult().Instructions, "Use the read tool \u2014 not shell commands like cat \u2014 to inspect text files."))

			ctx := context.Background()
			n := len(c.rec.bodies)
			list, err := c.ListTools(ctx, nil)
			require.NoError(t, err)
			require.Len(t, list.Tools, len(cat.Tools))
			for i, tool := range list.Tools {
				want := cat.Tools[i]
				assert.Equal(t, want.Name, tool.Name)
				assert.Equal(t, want.Description, tool.Description)
				a := tools.AnnotationsOf(tool.Name)
				require.NotNil(t, tool.Annotations)
				assert.Equal(t, a.ReadOnlyHint, tool.Annotations.ReadOnlyHint, tool.Name)
				require.NotNil(t, tool.Annotations.OpenWorldHint)
				assert.False(t, *tool.Annotations.OpenWorldHint, tool.Name)
				if a.ReadOnlyHint {
					assert.Nil(t, tool.Annotations.DestructiveHint, tool.Name)
				} else {
					require.NotNil(t, tool.Annotations.DestructiveHint, tool.Name)
					assert.Equal(t, a.DestructiveHint, *tool.Annotations.DestructiveHint, tool.Name)
				}
			}
			// The wire bytes of each inputSchema are the catalog's parameters.
			var wire struct {
				Result struct {
					Tools []struct {
						Name        string          `json:"name"`
						InputSchema json.RawMessage `json:"inputSchema"`
						Annotations json.RawMessage `json:"annotations"`
					} `json:"tools"`
				} `json:"result"`
			}
			require.Greater(t, len(c.rec.bodies), n)
			require.NoError(t, json.Unmarshal(c.rec.bodies[len(c.rec.bodies)-1], &wire))
			require.Len(t, wire.Result.Tools, len(cat.Tools))
			for i, tool := range wire.Result.Tools {
				assert.Equal(t, string(cat.Tools[i].Parameters), string(tool.InputSchema), tool.Name)
			}
			assert.Equal(t, `{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`, string(wire.Result.Tools[0].Annotations))
			assert.Equal(t, `{"destructiveHint":true,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`, string(wire.Result.Tools[2].Annotations))
		})
	}
}

func TestToolsListWithoutRipgrep(t *testing.T) {
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Search: search.Settings{RgPath: "/nonexistent/no-such-rg"}})
	h := &harness{t: t, srv: srv}
	list, err := h.connect("").ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"read", "write", "edit", "move", "delete", "mkdir"}, names)
}

// TestSuccessIsRESTOutput: every tool's text over MCP is the REST output,
// byte for byte, for the same call on the same files.
func TestSuccessIsRESTOutput(t *testing.T) {
	h := start(t, options{policyOff: true})
	big := strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", 2000) // over the 51200-byte cap
	h.file("a.txt", "one\ntwo\nthree\n")
	h.file("big.txt", big)
	h.file("src/x.go", "package x\n// TODO: one\n")
	h.file("src/y.go", "package y\n")

	type step struct {
		name, tool string
		args       map[string]any
		before     func() // puts the files back before each of the two calls
	}
	reset := func() { h.file("e.txt", "alpha\nbeta\nalpha\n"); os.Remove(filepath.Join(h.srv.Root, "w.txt")) }
	steps := []step{
		{"read", "read", map[string]any{"file_path": "a.txt"}, nil},
		{"read window", "read", map[string]any{"file_path": "a.txt", "offset": 2, "limit": 1}, nil},
		{"read capped", "read", map[string]any{"file_path": "big.txt"}, nil},
		{"write create", "write", map[string]any{"file_path": "w.txt", "content": "new\n"}, reset},
		{"write update", "write", map[string]any{"file_path": "e.txt", "content": "gamma\n"}, reset},
		{"edit", "edit", map[string]any{"file_path": "e.txt", "old_string": "beta", "new_string": "BETA"}, reset},
		{"edit all", "edit", map[string]any{"file_path": "e.txt", "old_string": "alpha", "new_string": "A", "replace_all": true}, reset},
		{"glob", "glob", map[string]any{"pattern": "**/*.go"}, nil},
		{"grep", "grep", map[string]any{"pattern": "TODO", "path": "src"}, nil},
	}
	for _, v := range versions {
		c := h.connect(v.ask)
		for _, s := range steps {
			t.Run(v.name+"/"+s.name, func(t *testing.T) {
				if s.before != nil {
					s.before()
				}
				text, isErr := c.call(t, s.tool, s.args)
				if s.before != nil {
					s.before()
				}
				r := h.rest(s.tool, s.args)
				require.Equal(t, http.StatusOK, r.Status, r.Output)
				assert.False(t, isErr)
				assert.Equal(t, r.Output, text)
			})
		}
	}
	// One literal, so the bytes themselves are pinned here too.
	c := h.connect("")
	text, _ := c.call(t, "read", map[string]any{"file_path": "a.txt"})
	assert.Equal(t, "<path>"+filepath.Join(h.srv.Root, "a.txt")+"</path>\n<type>file</type>\n<content>\n1: one\n2: two\n3: three\n\n(End of file - total 3 lines)\n</content>", text)
	capped, _ := c.call(t, "read", map[string]any{"file_path": "big.txt"})
	assert.Less(t, len(capped), 60000, "bounded by the byte cap, not the 130000-byte file")
	assert.Contains(t, capped, "(Output capped. Showing lines 1-")
}

// TestErrorsAreRESTProblemOutput: each failure is isError with exactly the
// REST problem's output.
func TestErrorsAreRESTProblemOutput(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "one\n")
	h.file("dup.txt", "x\nx\n")
	outside := filepath.Dir(h.srv.Root)
	cases := []struct {
		name, tool string
		args       map[string]any
		code       string
	}{
		{"no file_path", "read", map[string]any{}, "INVALID_ARGUMENT"},
		{"bad offset", "read", map[string]any{"file_path": "a.txt", "offset": 0}, "INVALID_ARGUMENT"},
		{"wrong type", "edit", map[string]any{"file_path": "a.txt", "old_string": 1, "new_string": "y"}, "INVALID_ARGUMENT"},
		{"not found", "read", map[string]any{"file_path": "missing.txt"}, "FS_NOT_FOUND"},
		{"sandbox", "read", map[string]any{"file_path": "../escape.txt"}, "FS_SANDBOX_DENIED"},
		{"sandbox absolute", "write", map[string]any{"file_path": filepath.Join(outside, "x.txt"), "content": "x"}, "FS_SANDBOX_DENIED"},
		{"not observed", "edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"}, "FS_NOT_OBSERVED"},
		{"bad pattern", "grep", map[string]any{"pattern": "("}, "SEARCH_INVALID_PATTERN"},
	}
	for _, v := range versions {
		c := h.connect(v.ask, "X-Session-ID", "errs-"+v.name)
		for _, tc := range cases {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				text, isErr := c.call(t, tc.tool, tc.args)
				r := h.rest(tc.tool, tc.args, "X-Session-ID", "errs-rest-"+v.name)
				assert.Equal(t, tc.code, r.Code)
				assert.True(t, isErr)
				assert.Equal(t, r.Output, text)
			})
		}
	}
	c := h.connect("", "X-Session-ID", "golden")
	text, _ := c.call(t, "edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"})
	assert.Equal(t, `Error: edit requires reading "`+filepath.Join(h.srv.Root, "a.txt")+`" first — read the file, then retry`, text)
	text, _ = c.call(t, "read", map[string]any{"file_path": "../escape.txt"})
	assert.Equal(t, `Error: cannot read "`+filepath.Join(outside, "escape.txt")+`": outside the workspace root`, text)
	assert.Equal(t, "one\n", h.contents("a.txt"))
}

// TestPolicyAcrossOneMCPSession: with no session header, one MCP session's
// reads authorize its edits; another MCP session's do not.
func TestPolicyAcrossOneMCPSession(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "one\ntwo\n")
	for _, v := range versions {
		if !v.stateful {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			first, second := h.connect(v.ask), h.connect(v.ask)
			edit := map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "TWO"}
			text, isErr := second.call(t, "edit", edit)
			assert.True(t, isErr)
			assert.Contains(t, text, "requires reading")

			_, isErr = first.call(t, "read", map[string]any{"file_path": "a.txt"})
			require.False(t, isErr)
			text, isErr = first.call(t, "edit", edit)
			assert.False(t, isErr, text)
			assert.Equal(t, "one\nTWO\n", h.contents("a.txt"))

			text, isErr = second.call(t, "edit", map[string]any{"file_path": "a.txt", "old_string": "TWO", "new_string": "two"})
			assert.True(t, isErr)
			assert.Contains(t, text, "requires reading")
			h.file("a.txt", "one\ntwo\n")
		})
	}
	// The sessionless revision has no MCP session: a write needs a header
	// (or --default-session), and the refusal says so.
	c := h.connect("")
	text, isErr := c.call(t, "write", map[string]any{"file_path": "n.txt", "content": "x"})
	assert.True(t, isErr)
	assert.Equal(t, "Error: write and edit need a session while the read-before-write policy is on: send the X-Session-ID header (1-128 characters of A-Za-z0-9._:-) and read the file in that session first; operators can name a frontend's own id header with --session-headers or set --default-session", text)
}

// TestSessionHeadersFirst: X-Session-ID, then --session-headers, then the
// MCP session, then --default-session; X-Session-Cwd as on REST.
func TestSessionHeadersFirst(t *testing.T) {
	h := start(t, options{sessions: tools.Sessions{Aliases: []string{"X-Chat-Id"}}})
	h.file("a.txt", "one\n")
	h.file("sub/b.txt", "bee\n")
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			reader := h.connect(v.ask, "X-Session-ID", "shared-"+v.name)
			_, isErr := reader.call(t, "read", map[string]any{"file_path": "a.txt"})
			require.False(t, isErr)
			// Another MCP session with the same header is the same policy session.
			writer := h.connect(v.ask, "X-Session-ID", "shared-"+v.name)
			text, isErr := writer.call(t, "write", map[string]any{"file_path": "a.txt", "content": "one\n"})
			assert.False(t, isErr, text)
			// So is a REST call.
			r := h.rest("write", map[string]any{"file_path": "a.txt", "content": "one\n"}, "X-Session-ID", "shared-"+v.name)
			assert.Equal(t, http.StatusOK, r.Status, r.Output)

			// The alias header names the session when X-Session-ID is absent,
			// an empty X-Session-ID counting as absent.
			aliased := h.connect(v.ask, "X-Session-ID", "", "X-Chat-Id", "shared-"+v.name)
			text, isErr = aliased.call(t, "write", map[string]any{"file_path": "a.txt", "content": "one\n"})
			assert.False(t, isErr, text)

			bad := h.connect(v.ask, "X-Session-ID", "bad id!")
			text, isErr = bad.call(t, "read", map[string]any{"file_path": "a.txt"})
			assert.True(t, isErr)
			assert.Equal(t, "Error: malformed X-Session-ID: it must be 1-128 characters of A-Za-z0-9._:-", text)
			assert.Equal(t, text, h.rest("read", map[string]any{"file_path": "a.txt"}, "X-Session-ID", "bad id!").Output)

			cwd := h.connect(v.ask, "X-Session-Cwd", "sub")
			text, isErr = cwd.call(t, "read", map[string]any{"file_path": "b.txt"})
			assert.False(t, isErr, text)
			assert.Contains(t, text, "<path>"+filepath.Join(h.srv.Root, "sub", "b.txt")+"</path>")
			text, isErr = h.connect(v.ask, "X-Session-Cwd", "nope").call(t, "read", map[string]any{"file_path": "b.txt"})
			assert.True(t, isErr)
			assert.Equal(t, h.rest("read", map[string]any{"file_path": "b.txt"}, "X-Session-Cwd", "nope").Output, text)
		})
	}
}

// TestSessionHeaderSentTwice: on /mcp as on REST, a session header sent
// twice (an empty template value beside a real one) stands for its one
// non-empty value, and two different values are refused with the REST
// answer's text (docs/decisions.md, "A session header sent twice").
func TestSessionHeaderSentTwice(t *testing.T) {
	h := start(t, options{})
	h.file("sub/a.txt", "one\n")
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			session := "twice-" + v.name
			// Read by REST with one clean header, edit over MCP with the
			// header sent twice: the policy passes only if it is the same
			// session.
			require.Equal(t, http.StatusOK, h.rest("read", map[string]any{"file_path": "sub/a.txt"}, "X-Session-ID", session).Status)
			c := h.connect(v.ask, "X-Session-ID", "", "X-Session-ID", session, "X-Session-Cwd", "sub", "X-Session-Cwd", "")
			text, isErr := c.call(t, "edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"})
			require.False(t, isErr, text)
			text, isErr = c.call(t, "edit", map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "one"})
			require.False(t, isErr, text)

			text, isErr = h.connect(v.ask, "X-Session-ID", session, "X-Session-ID", "other").call(t, "read", map[string]any{"file_path": "sub/a.txt"})
			assert.True(t, isErr)
			assert.Equal(t, "Error: X-Session-ID was sent more than once with different values: send one session id (an empty value counts as absent)", text)
			text, isErr = h.connect(v.ask, "X-Session-Cwd", "sub", "X-Session-Cwd", ".").call(t, "read", map[string]any{"file_path": "a.txt"})
			assert.True(t, isErr)
			assert.Equal(t, "Error: X-Session-Cwd was sent more than once with different values: send one folder (an empty value counts as absent)", text)
		})
	}
	assert.Equal(t, "one\n", h.contents("sub/a.txt"))
}

func TestDefaultSession(t *testing.T) {
	h := start(t, options{sessions: tools.Sessions{Default: "everyone"}})
	h.file("a.txt", "one\n")
	c := h.connect("")
	_, isErr := c.call(t, "read", map[string]any{"file_path": "a.txt"})
	require.False(t, isErr)
	text, isErr := h.connect("").call(t, "edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"})
	assert.False(t, isErr, text)
	assert.Equal(t, "two\n", h.contents("a.txt"))

	// An MCP session comes before the default: a stateful client's reads
	// are its own.
	text, isErr = h.connect("2025-11-25").call(t, "edit", map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "three"})
	assert.True(t, isErr)
	assert.Contains(t, text, "requires reading")
}

func TestStructuredContent(t *testing.T) {
	for _, structured := range []bool{false, true} {
		h := start(t, options{policyOff: true, structured: structured})
		h.file("a.txt", "one\n")
		res := h.connect("").result(t, "read", map[string]any{"file_path": "a.txt"})
		if !structured {
			assert.Nil(t, res.StructuredContent)
			continue
		}
		got, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		assert.JSONEq(t, string(h.rest("read", map[string]any{"file_path": "a.txt"}).Metadata), string(got))
		failed := h.connect("").result(t, "read", map[string]any{"file_path": "missing.txt"})
		assert.True(t, failed.IsError)
		assert.Nil(t, failed.StructuredContent)
	}
}

func TestUnknownToolIsProtocolError(t *testing.T) {
	h := start(t, options{})
	for _, v := range versions {
		_, err := h.connect(v.ask).CallTool(context.Background(), &sdk.CallToolParams{Name: "rename", Arguments: map[string]any{}})
		require.Error(t, err, v.name)
		assert.Contains(t, err.Error(), `unknown tool "rename"`, v.name)
	}
}

func TestAuthOriginAndCORS(t *testing.T) {
	h := start(t, options{token: "s3cret", origins: []string{"https://app.example"}})
	h.file("a.txt", "one\n")

	// Without the token: 401, for the SDK client and a raw request alike.
	noToken := &harness{t: t, srv: h.srv}
	for _, v := range versions {
		_, _, err := noToken.dial(v.ask)
		require.Error(t, err, v.name)
	}
	r := h.raw(http.MethodPost, "/mcp", initialize, append(mcpPost, "Authorization", "")...)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, `Bearer realm="toolfs-api"`, r.header.Get("WWW-Authenticate"))
	for _, v := range versions {
		c := h.connect(v.ask)
		_, isErr := c.call(t, "read", map[string]any{"file_path": "a.txt"})
		assert.False(t, isErr, v.name)
	}

	// Origin: absent, the server's own or a configured one pass; any other
	// is 403.
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"", http.StatusOK},
		{"https://app.example", http.StatusOK},
		{strings.Replace(h.srv.URL, "127.0.0.1", "127.0.0.1", 1), http.StatusOK},
		{"http://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"https://app.example.evil", http.StatusForbidden},
	} {
		hdr := mcpPost
		if tc.origin != "" {
			hdr = append(append([]string{}, mcpPost...), "Origin", tc.origin)
		}
		r := h.raw(http.MethodPost, "/mcp", initialize, hdr...)
		assert.Equal(t, tc.status, r.status, "%s: %s", tc.origin, r.body)
		if tc.status == http.StatusForbidden {
			assert.Equal(t, `{"error":{"code":-32600,"message":"origin \"`+tc.origin+`\" is not allowed: send no Origin, the server's own, or one of --cors-origins"},"jsonrpc":"2.0"}`, r.body)
		}
	}
	// A foreign origin with the SDK client is refused too.
	foreign := &harness{t: t, srv: h.srv, token: h.token}
	_, _, err := foreign.dial("", "Origin", "http://evil.example")
	require.Error(t, err)

	// CORS: the preflight allows the MCP headers; answers expose
	// Mcp-Session-Id (and the files' ETag and range headers).
	pre := h.raw(http.MethodOptions, "/mcp", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,content-type,last-event-id,mcp-method,mcp-name,mcp-protocol-version,mcp-session-id,x-session-id") // sorted, as browsers send it
	assert.Equal(t, http.StatusNoContent, pre.status, "%v %s", pre.header, pre.body)
	assert.Equal(t, "https://app.example", pre.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "authorization,content-type,last-event-id,mcp-method,mcp-name,mcp-protocol-version,mcp-session-id,x-session-id", pre.header.Get("Access-Control-Allow-Headers"))
	answer := h.raw(http.MethodPost, "/mcp", initialize, append(mcpPost, "Origin", "https://app.example")...)
	assert.Equal(t, http.StatusOK, answer.status)
	assert.NotEmpty(t, answer.header.Get("Mcp-Session-Id"))
	assert.Equal(t, "Mcp-Session-Id, Etag, Content-Range, Accept-Ranges", answer.header.Get("Access-Control-Expose-Headers"), "and the files' headers (docs/files.md)")
}

// TestLoopbackHost: without a token the Host must be a loopback name, as on
// REST (DNS rebinding).
func TestLoopbackHost(t *testing.T) {
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Addr: "127.0.0.1:8080"})
	h := &harness{t: t, srv: srv}
	r := h.raw(http.MethodPost, "/mcp", initialize, append(mcpPost, "Host", "rebound.example:8080")...)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Contains(t, r.body, `"code":"FORBIDDEN_HOST"`)
	assert.Equal(t, http.StatusOK, h.raw(http.MethodPost, "/mcp", initialize, append(mcpPost, "Host", "localhost:8080")...).status)
}

// TestRoutes: /mcp is the SDK's (the validator does not answer it), the
// sessionless revision's GET is 405 and a stateful GET without a session
// 400, and REST is untouched.
func TestRoutes(t *testing.T) {
	h := start(t, options{})
	get := h.raw(http.MethodGet, "/mcp", "", "Accept", "text/event-stream")
	assert.Equal(t, http.StatusBadRequest, get.status, get.body)
	assert.Contains(t, get.body, "Mcp-Session-Id")
	get = h.raw(http.MethodGet, "/mcp", "", "Accept", "text/event-stream", "MCP-Protocol-Version", "2026-07-28")
	assert.Equal(t, http.StatusMethodNotAllowed, get.status, get.body)
	gone := h.raw(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, append(mcpPost, "Mcp-Session-Id", "nosuch")...)
	assert.Equal(t, http.StatusNotFound, gone.status)
	assert.Equal(t, http.StatusOK, h.raw(http.MethodGet, "/tools", "").status)
	assert.Equal(t, http.StatusNotFound, h.raw(http.MethodGet, "/mcp/x", "").status)
}

func TestMetricsTransportLabel(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "one\n")
	c := h.connect("", "X-Session-ID", "m")
	c.call(t, "read", map[string]any{"file_path": "a.txt"})
	c.call(t, "read", map[string]any{"file_path": "a.txt"})
	c.call(t, "read", map[string]any{"file_path": "missing.txt"})
	h.connect("", "X-Session-ID", "bad id").call(t, "write", map[string]any{"file_path": "a.txt", "content": ""})
	h.rest("read", map[string]any{"file_path": "a.txt"})
	m := h.raw(http.MethodGet, "/metrics", "").body
	for _, line := range []string{
		`toolfs_tool_calls_total{code="ok",tool="read",transport="mcp"} 2`,
		`toolfs_tool_calls_total{code="FS_NOT_FOUND",tool="read",transport="mcp"} 1`,
		`toolfs_tool_calls_total{code="INVALID_SESSION",tool="write",transport="mcp"} 1`,
		`toolfs_tool_calls_total{code="ok",tool="read",transport="rest"} 1`,
		`toolfs_tool_duration_seconds_count{tool="read",transport="mcp"} 3`,
		`toolfs_tool_duration_seconds_count{tool="read",transport="rest"} 1`,
	} {
		assert.Contains(t, m, line+"\n")
	}
}

// TestMCPSessionsBounded: past the bound the least recently used MCP session
// is closed (its client gets 404); closing a session forgets its policy
// session.
func TestMCPSessionsBounded(t *testing.T) {
	h := start(t, options{maxMCP: 2})
	h.file("a.txt", "one\n")
	read := map[string]any{"file_path": "a.txt"}
	first, second := h.connect("2025-11-25"), h.connect("2025-11-25")
	first.call(t, "read", read) // first is now the most recently used
	third := h.connect("2025-11-25")
	_, err := second.CallTool(context.Background(), &sdk.CallToolParams{Name: "read", Arguments: read})
	require.Error(t, err, "the least recently used session was closed")
	for _, c := range []*client{first, third} {
		_, isErr := c.call(t, "read", read)
		assert.False(t, isErr)
	}

	sessions, _ := h.srv.Store.Stats()
	require.NoError(t, third.Close())
	after, _ := h.srv.Store.Stats()
	assert.Equal(t, sessions-1, after, "DELETE /mcp forgot the session's observations")
}

func TestCallWithoutArguments(t *testing.T) {
	h := start(t, options{})
	for _, v := range versions {
		text, isErr := h.connect(v.ask).call(t, "read", nil)
		assert.True(t, isErr)
		assert.Equal(t, h.rest("read", map[string]any{}).Output, text, v.name)
		assert.Equal(t, "Error: file_path must be a non-empty string", text)
	}
}

func TestIdleMCPSessionCloses(t *testing.T) {
	h := start(t, options{idle: 300 * time.Millisecond})
	h.file("a.txt", "one\n")
	c := h.connect("2025-11-25")
	c.call(t, "read", map[string]any{"file_path": "a.txt"})
	time.Sleep(time.Second)
	_, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": "a.txt"}})
	require.Error(t, err, "the idle session was closed")
}

// TestToolsListFollowsTheProfile: the MCP tool list carries each profile's
// schemas, as GET /tools does (docs/edits.md, "Profiles").
func TestToolsListFollowsTheProfile(t *testing.T) {
	for _, p := range []render.Profile{render.ProfileOriginal, render.ProfileExtended} {
		srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Tools: tools.Settings{Profile: string(p)}})
		h := &harness{t: t, srv: srv}
		var cat tools.Catalog
		require.NoError(t, json.Unmarshal([]byte(h.raw(http.MethodGet, "/tools", "").body), &cat))
		c := h.connect("")
		_, err := c.ListTools(context.Background(), nil)
		require.NoError(t, err)
		var wire struct {
			Result struct {
				Tools []struct {
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(c.rec.bodies[len(c.rec.bodies)-1], &wire))
		require.Len(t, wire.Result.Tools, len(cat.Tools))
		for i, tool := range wire.Result.Tools {
			assert.Equal(t, string(cat.Tools[i].Parameters), string(tool.InputSchema), "%s %s", p, cat.Tools[i].Name)
		}
		edit := string(wire.Result.Tools[2].InputSchema)
		assert.Equal(t, p == render.ProfileExtended, strings.Contains(edit, `"dry_run"`), "%s: %s", p, edit)
	}
}
