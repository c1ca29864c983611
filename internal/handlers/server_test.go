package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// harness is a real server on a loopback port over a real temporary root.
type harness struct {
	t     *testing.T
	root  string
	srv   *servertest.Server
	token string
}

type options struct {
	policyOff bool
	token     string
	origins   []string
	maxBody   int64
	caps      *render.Caps
	noRg      bool
	sessions  tools.Sessions
	profile   render.Profile
	dialect   string // --edit-dialect
	publicURL string
	root      string      // "" = a new temporary folder
	store     policy.Gate // nil = the memory store
	// checkpoints turns the history on (a patch, a change of several
	// files, is journaled there).
	checkpoints bool
}

func start(t *testing.T, o options) *harness {
	t.Helper()
	so := server.Config{
		Policy: policy.Settings{Enabled: !o.policyOff, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		Tools:  tools.Settings{Profile: string(o.profile), EditDialect: o.dialect},
		Token:  o.token, CORSOrigins: strings.Join(o.origins, ","), MaxBodyBytes: o.maxBody,
		StreamWriteWindow: 10 * time.Second, Sessions: tools.SessionSettings{Headers: strings.Join(o.sessions.Aliases, ","), Default: o.sessions.Default},
		PublicURL: o.publicURL,
		Root:      o.root, Checkpoints: checkpoint.Settings{Enabled: o.checkpoints},
	}
	if o.caps != nil {
		so.Tools.ReadLimit, so.Tools.ReadMaxLineLength, so.Tools.ReadMaxBytes = o.caps.Limit, o.caps.MaxLineLength, o.caps.MaxBytes
	}
	if so.MaxBodyBytes == 0 {
		so.MaxBodyBytes = 1 << 20
	}
	if o.noRg {
		so.Search.RgPath = "/nonexistent/no-such-rg"
	}
	var with []server.Option
	if o.store != nil {
		with = append(with, server.WithSessionStore(o.store))
	}
	srv := servertest.Start(t, so, with...)
	return &harness{t: t, root: srv.Root, srv: srv, token: o.token}
}

func (h *harness) path(rel string) string { return filepath.Join(h.root, rel) }

func (h *harness) file(rel, content string) string {
	h.t.Helper()
	p := h.path(rel)
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(h.t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func (h *harness) contents(rel string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.path(rel))
	require.NoError(h.t, err)
	return string(b)
}

// reply is a decoded answer: the status, and either the success or the
// problem members.
type reply struct {
	Status   int
	Header   http.Header
	Raw      string
	Output   string          `json:"output"`
	Metadata json.RawMessage `json:"metadata"`
	Code     string          `json:"code"`
	Detail   string          `json:"detail"`
	Title    string          `json:"title"`
	Type     string          `json:"type"`
	PStatus  int             `json:"status"`
}

func (h *harness) do(method, path string, body string, headers ...string) reply {
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
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		require.NoError(h.t, json.Unmarshal(raw, &r), string(raw))
		if r.Code != "" {
			require.Equal(h.t, "application/problem+json", resp.Header.Get("Content-Type"))
			require.Equal(h.t, r.Status, r.PStatus, "problem status member matches the response")
			require.Equal(h.t, "Error: "+r.Detail, r.Output)
		}
	}
	return r
}

// tool posts a JSON body (given as a Go value) to /tools/<name>.
func (h *harness) tool(name, session string, body any, headers ...string) reply {
	h.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(h.t, err)
	if session != "" {
		headers = append(headers, "X-Session-ID", session)
	}
	return h.do(http.MethodPost, "/tools/"+name, string(b), headers...)
}

type obj = map[string]any

func TestReadOutputExact(t *testing.T) {
	h := start(t, options{})
	p := h.file("a.txt", "hello\nworld")
	r := h.tool("read", "s1", obj{"file_path": "a.txt"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\n1: hello\n2: world\n\n(End of file - total 2 lines)\n</content>", r.Output)
	assert.JSONEq(t, `{"path":"`+p+`","offset":1,"lines":[{"number":1,"text":"hello"},{"number":2,"text":"world"}],"totalLines":2}`, string(r.Metadata))
	assert.Contains(t, r.Raw, `"output":"<path>`, "outputs are not HTML-escaped")

	h.file("empty.go", "")
	r = h.tool("read", "", obj{"file_path": "empty.go"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "<path>"+h.path("empty.go")+"</path>\n<type>file</type>\n<content>\n(End of file - total 0 lines)\n</content>", r.Output)
	assert.JSONEq(t, `{"path":"`+h.path("empty.go")+`","offset":1,"lines":[],"totalLines":0,"lang":"go"}`, string(r.Metadata))

	h.file("big.txt", "line one\nline two\nline three\nline four\nline five\nline six\nline seven\nline eight\nline nine\nline ten\n")
	r = h.tool("read", "", obj{"file_path": "big.txt", "offset": 5, "limit": 4})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "<path>"+h.path("big.txt")+"</path>\n<type>file</type>\n<content>\n5: line five\n6: line six\n7: line seven\n8: line eight\n\n(Showing lines 5-8 of 10. Use offset=9 to continue.)\n</content>", r.Output)
}

func TestWriteAndEditOutputsExact(t *testing.T) {
	h := start(t, options{})
	p := h.path("dir/new.txt")
	r := h.tool("write", "s1", obj{"file_path": "dir/new.txt", "content": "one\ntwo\n"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>", r.Output)
	assert.JSONEq(t, `{"operation":"create","diffs":[]}`, string(r.Metadata))
	assert.Equal(t, "one\ntwo\n", h.contents("dir/new.txt"))

	// The write recorded the new version: the session may write again.
	r = h.tool("write", "s1", obj{"file_path": "dir/new.txt", "content": "one\nTWO\n"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\nUpdated file\n</content>", r.Output)
	assert.JSONEq(t, `{"operation":"update","diffs":[{"path":"dir/new.txt","oldText":"one\ntwo","newText":"one\nTWO"}]}`, string(r.Metadata))

	r = h.tool("edit", "s1", obj{"file_path": "dir/new.txt", "old_string": "TWO", "new_string": "2"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully.", r.Output)
	assert.JSONEq(t, `{"diffs":[{"path":"dir/new.txt","oldText":"one\nTWO","newText":"one\n2"}]}`, string(r.Metadata))

	r = h.tool("edit", "s1", obj{"file_path": "dir/new.txt", "old_string": "o", "new_string": "0", "replace_all": true})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated. All occurrences were successfully replaced.", r.Output)
	assert.Equal(t, "0ne\n2\n", h.contents("dir/new.txt"))
}

func TestErrors(t *testing.T) {
	h := start(t, options{profile: render.ProfileOriginal}) // the original's texts; hints: edits_test.go
	h.file("a.txt", "alpha\nbeta\nbeta\n")
	h.file("bin.dat", "ab\x00cd")
	h.file("bad.txt", "ok\n\xff\n")
	require.NoError(t, os.Mkdir(h.path("dir"), 0o755))
	require.NoError(t, os.Symlink("/etc/passwd", h.path("out")))
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "x.txt"), []byte("x"), 0o644))

	cases := []struct {
		name    string
		tool    string
		session string
		body    any
		status  int
		code    string
		output  string
	}{
		{"read missing", "read", "s", obj{"file_path": "nope.txt"}, 404, "FS_NOT_FOUND", `Error: cannot read "` + h.path("nope.txt") + `": not found`},
		{"read folder", "read", "s", obj{"file_path": "dir"}, 422, "FS_NOT_REGULAR_FILE", `Error: cannot read "` + h.path("dir") + `": not a regular file`},
		{"read binary", "read", "s", obj{"file_path": "bin.dat"}, 422, "FS_NOT_TEXT", `Error: cannot read "` + h.path("bin.dat") + `": binary file`},
		{"read invalid utf8", "read", "s", obj{"file_path": "bad.txt"}, 422, "FS_NOT_TEXT", `Error: cannot read "` + h.path("bad.txt") + `": invalid UTF-8 text`},
		{"read offset out of range", "read", "s", obj{"file_path": "a.txt", "offset": 9}, 404, "FS_NOT_FOUND", `Error: offset 9 is out of range for "` + h.path("a.txt") + `" (3 lines)`},
		{"read outside by dotdot", "read", "s", obj{"file_path": "../x.txt"}, 403, "FS_SANDBOX_DENIED", `Error: cannot read "` + filepath.Join(filepath.Dir(h.root), "x.txt") + `": outside the workspace root`},
		{"read outside absolute", "read", "s", obj{"file_path": filepath.Join(outside, "x.txt")}, 403, "FS_SANDBOX_DENIED", `Error: cannot read "` + filepath.Join(outside, "x.txt") + `": outside the workspace root`},
		{"read through escaping symlink", "read", "s", obj{"file_path": "out"}, 403, "FS_SANDBOX_DENIED", `Error: cannot read "` + h.path("out") + `": outside the workspace root`},
		{"read file as folder", "read", "s", obj{"file_path": "a.txt/b"}, 404, "FS_NOT_FOUND", `Error: cannot resolve "` + h.path("a.txt/b") + `": a parent path segment is not a directory`},
		{"read empty path", "read", "s", obj{"file_path": "  "}, 400, "INVALID_ARGUMENT", "Error: file_path must be a non-empty string"},
		{"read missing path", "read", "s", obj{}, 400, "INVALID_ARGUMENT", "Error: file_path must be a non-empty string"},
		{"read path wrong type", "read", "s", obj{"file_path": 7}, 400, "INVALID_ARGUMENT", "Error: file_path must be a non-empty string"},
		{"read offset zero", "read", "s", obj{"file_path": "a.txt", "offset": 0}, 400, "INVALID_ARGUMENT", "Error: offset must be a positive integer"},
		{"read offset fraction", "read", "s", obj{"file_path": "a.txt", "offset": 1.5}, 400, "INVALID_ARGUMENT", "Error: offset must be a positive integer"},
		{"read offset string", "read", "s", obj{"file_path": "a.txt", "offset": "2"}, 400, "INVALID_ARGUMENT", "Error: offset must be a positive integer"},
		{"read limit zero", "read", "s", obj{"file_path": "a.txt", "limit": 0}, 400, "INVALID_ARGUMENT", "Error: limit must be a positive integer"},
		{"read limit too big", "read", "s", obj{"file_path": "a.txt", "limit": 2001}, 400, "INVALID_ARGUMENT", "Error: limit must be less than or equal to 2000"},
		{"read file_path first", "read", "s", obj{"offset": -1, "limit": "x"}, 400, "INVALID_ARGUMENT", "Error: file_path must be a non-empty string"},
		{"read NUL in path", "read", "s", obj{"file_path": "a\x00b"}, 400, "INVALID_ARGUMENT", "Error: file_path must not contain a NUL byte"},
		{"write unobserved", "write", "s", obj{"file_path": "a.txt", "content": "x"}, 409, "FS_NOT_OBSERVED", `Error: cannot overwrite existing "` + h.path("a.txt") + `" without reading it first — read the file, then retry`},
		{"write folder", "write", "s", obj{"file_path": "dir", "content": "x"}, 422, "FS_NOT_REGULAR_FILE", `Error: cannot write "` + h.path("dir") + `": not a regular file`},
		{"write outside", "write", "s", obj{"file_path": "../w.txt", "content": "x"}, 403, "FS_SANDBOX_DENIED", `Error: cannot write "` + filepath.Join(filepath.Dir(h.root), "w.txt") + `": outside the workspace root`},
		{"write content missing", "write", "s", obj{"file_path": "n.txt"}, 400, "INVALID_ARGUMENT", "Error: content must be a string"},
		{"write without session", "write", "", obj{"file_path": "n.txt", "content": "x"}, 400, "INVALID_SESSION", ""},
		{"edit unobserved", "edit", "s", obj{"file_path": "a.txt", "old_string": "alpha", "new_string": "A"}, 409, "FS_NOT_OBSERVED", `Error: edit requires reading "` + h.path("a.txt") + `" first — read the file, then retry`},
		{"edit empty old", "edit", "s", obj{"file_path": "a.txt", "old_string": "", "new_string": "A"}, 400, "INVALID_ARGUMENT", "Error: old_string must be a non-empty string"},
		{"edit same strings", "edit", "s", obj{"file_path": "a.txt", "old_string": "a", "new_string": "a"}, 400, "INVALID_ARGUMENT", "Error: old_string and new_string must differ"},
		{"edit new missing", "edit", "s", obj{"file_path": "a.txt", "old_string": "a"}, 400, "INVALID_ARGUMENT", "Error: new_string must be a string"},
		{"edit replace_all wrong type", "edit", "s", obj{"file_path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": "yes"}, 400, "INVALID_ARGUMENT", "Error: replace_all must be a boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.tool(tc.tool, tc.session, tc.body)
			assert.Equal(t, tc.status, r.Status, r.Raw)
			assert.Equal(t, tc.code, r.Code, r.Raw)
			if tc.output != "" {
				assert.Equal(t, tc.output, r.Output)
			}
		})
	}
	assert.Equal(t, "alpha\nbeta\nbeta\n", h.contents("a.txt"), "no failed call touched the file")

	// After a read, the edit errors that need a read.
	require.Equal(t, 200, h.tool("read", "s", obj{"file_path": "a.txt"}).Status)
	r := h.tool("edit", "s", obj{"file_path": "a.txt", "old_string": "gamma", "new_string": "G"})
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "FS_EDIT_NOT_FOUND", r.Code)
	assert.Equal(t, `Error: old_string was not found in "`+h.path("a.txt")+`"`, r.Output)
	r = h.tool("edit", "s", obj{"file_path": "a.txt", "old_string": "beta", "new_string": "B"})
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "FS_AMBIGUOUS_EDIT", r.Code)
	assert.Equal(t, `Error: old_string matched 2 times in "`+h.path("a.txt")+`"; provide a more specific old_string or set replace_all to true`, r.Output)
}

func TestPolicyChain(t *testing.T) {
	h := start(t, options{})
	h.file("f.txt", "v1\n")
	p := h.path("f.txt")

	require.Equal(t, 200, h.tool("read", "s", obj{"file_path": "f.txt", "limit": 1}).Status)
	// Someone else changes the file after the read.
	time.Sleep(10 * time.Millisecond)
	h.file("f.txt", "v2\n")
	r := h.tool("write", "s", obj{"file_path": "f.txt", "content": "mine\n"})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "FS_STALE_VERSION", r.Code)
	assert.Equal(t, `Error: cannot write "`+p+`": file changed since it was read — re-read the file, then retry`, r.Output)
	r = h.tool("edit", "s", obj{"file_path": "f.txt", "old_string": "v2", "new_string": "v3"})
	assert.Equal(t, `Error: cannot edit "`+p+`": file changed since it was read — re-read the file, then retry`, r.Output)
	assert.Equal(t, "v2\n", h.contents("f.txt"))

	// Re-read unblocks; a windowed read authorizes an edit anywhere.
	require.Equal(t, 200, h.tool("read", "s", obj{"file_path": "f.txt"}).Status)
	require.Equal(t, 200, h.tool("write", "s", obj{"file_path": "f.txt", "content": "mine\n"}).Status)
	assert.Equal(t, "mine\n", h.contents("f.txt"))

	// Confirmed absence: deleted → stale → re-read records absence → edit is
	// not found, write recreates.
	require.NoError(t, os.Remove(p))
	r = h.tool("write", "s", obj{"file_path": "f.txt", "content": "again\n"})
	assert.Equal(t, `Error: cannot write "`+p+`": file no longer exists — re-read the file, then retry`, r.Output)
	assert.Equal(t, 404, h.tool("read", "s", obj{"file_path": "f.txt"}).Status)
	r = h.tool("edit", "s", obj{"file_path": "f.txt", "old_string": "a", "new_string": "b"})
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "FS_NOT_FOUND", r.Code)
	assert.Equal(t, `Error: cannot edit "`+p+`": not found`, r.Output)
	r = h.tool("write", "s", obj{"file_path": "f.txt", "content": "again\n"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Contains(t, r.Output, "Created file")

	// Sessions are isolated: s2 never read it.
	r = h.tool("write", "s2", obj{"file_path": "f.txt", "content": "theirs\n"})
	assert.Equal(t, "FS_NOT_OBSERVED", r.Code)
	r = h.tool("edit", "s2", obj{"file_path": "f.txt", "old_string": "again", "new_string": "x"})
	assert.Equal(t, "FS_NOT_OBSERVED", r.Code)
	assert.Equal(t, "again\n", h.contents("f.txt"))

	// Forgetting a session forgets its reads.
	assert.Equal(t, 204, h.do(http.MethodDelete, "/sessions/s", "").Status)
	r = h.tool("edit", "s", obj{"file_path": "f.txt", "old_string": "again", "new_string": "x"})
	assert.Equal(t, "FS_NOT_OBSERVED", r.Code)
}

func TestPolicyOff(t *testing.T) {
	h := start(t, options{policyOff: true})
	h.file("f.txt", "one\n")
	r := h.tool("write", "", obj{"file_path": "f.txt", "content": "two\n"})
	require.Equal(t, 200, r.Status, r.Raw)
	r = h.tool("edit", "", obj{"file_path": "f.txt", "old_string": "two", "new_string": "three"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "three\n", h.contents("f.txt"))
	r = h.tool("edit", "", obj{"file_path": "gone.txt", "old_string": "a", "new_string": "b"})
	assert.Equal(t, "FS_STALE_VERSION", r.Code)
	assert.Equal(t, `Error: cannot edit "`+h.path("gone.txt")+`": file changed since it was read — re-read the file, then retry`, r.Output)
}

func TestSessionHeaders(t *testing.T) {
	h := start(t, options{})
	h.file("sub/a.txt", "in sub\n")
	h.file("a.txt", "at root\n")
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, h.path("escape")))

	r := h.tool("read", "", obj{"file_path": "a.txt"}, "X-Session-Cwd", "sub")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Contains(t, r.Output, "<path>"+h.path("sub/a.txt")+"</path>")
	r = h.tool("read", "", obj{"file_path": "a.txt"}, "X-Session-Cwd", h.path("sub"))
	assert.Contains(t, r.Output, "1: in sub")

	for _, cwd := range []string{"missing", "a.txt", "escape", "..", outside} {
		r = h.tool("read", "", obj{"file_path": "a.txt"}, "X-Session-Cwd", cwd)
		assert.Equal(t, 400, r.Status, cwd)
		assert.Equal(t, "INVALID_SESSION", r.Code, cwd)
	}
	for _, id := range []string{"has space", strings.Repeat("x", 129), "semi;colon"} {
		r = h.tool("read", id, obj{"file_path": "a.txt"})
		assert.Equal(t, 400, r.Status, id)
		assert.Equal(t, "INVALID_SESSION", r.Code, id)
	}
	r = h.tool("read", strings.Repeat("x", 128), obj{"file_path": "a.txt"})
	assert.Equal(t, 200, r.Status)

	// A header that is present but empty counts as absent (docs/api.md,
	// "Sessions"; it was malformed before): a read goes ahead, recording
	// nothing; a write is refused for want of a session.
	for _, hdr := range []string{"X-Session-Id", "X-Session-Cwd"} {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/tools/read", strings.NewReader(`{"file_path":"a.txt"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header[hdr] = []string{""}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, hdr)
	}
	r = h.tool("write", "", obj{"file_path": "new.txt", "content": "x"}, "X-Session-ID", "")
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "INVALID_SESSION", r.Code)
	assert.Equal(t, "Error: write and edit need a session while the read-before-write policy is on: "+
		"send the X-Session-ID header (1-128 characters of A-Za-z0-9._:-) and read the file in that session first; "+
		"operators can name a frontend's own id header with --session-headers or set --default-session", r.Output)
}

// TestSessionAliasesAndDefault: --session-headers names headers tried after
// X-Session-ID, --default-session serves a request that names none; either
// is an ordinary session id.
func TestSessionAliasesAndDefault(t *testing.T) {
	h := start(t, options{sessions: tools.Sessions{Aliases: []string{"X-OpenWebUI-Chat-Id", "X-Chat"}, Default: "fallback"}})
	h.file("a.txt", "one\n")

	// Read through the first alias; write as that session, by either name.
	require.Equal(t, 200, h.tool("read", "", obj{"file_path": "a.txt"}, "X-OpenWebUI-Chat-Id", "chat-1").Status)
	r := h.tool("write", "chat-1", obj{"file_path": "a.txt", "content": "two\n"})
	require.Equal(t, 200, r.Status, r.Raw)
	// X-Session-ID wins over an alias; an empty alias is skipped for the next.
	r = h.tool("edit", "other", obj{"file_path": "a.txt", "old_string": "two", "new_string": "2"}, "X-OpenWebUI-Chat-Id", "chat-1")
	assert.Equal(t, "FS_NOT_OBSERVED", r.Code)
	r = h.tool("edit", "", obj{"file_path": "a.txt", "old_string": "two", "new_string": "2"}, "X-OpenWebUI-Chat-Id", "", "X-Chat", "chat-1")
	require.Equal(t, 200, r.Status, r.Raw)
	// A malformed alias is refused, naming the header.
	r = h.tool("read", "", obj{"file_path": "a.txt"}, "X-Chat", "no spaces")
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "Error: malformed X-Chat: it must be 1-128 characters of A-Za-z0-9._:-", r.Output)

	// No header at all: the default session, which read nothing yet.
	r = h.tool("edit", "", obj{"file_path": "a.txt", "old_string": "2", "new_string": "3"})
	assert.Equal(t, "FS_NOT_OBSERVED", r.Code)
	require.Equal(t, 200, h.tool("read", "", obj{"file_path": "a.txt"}).Status)
	r = h.tool("edit", "", obj{"file_path": "a.txt", "old_string": "2", "new_string": "3"}, "X-Session-ID", "")
	require.Equal(t, 200, r.Status, r.Raw)
	r = h.tool("edit", "fallback", obj{"file_path": "a.txt", "old_string": "3", "new_string": "4"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "4\n", h.contents("a.txt"))
}

func TestHTTPEdges(t *testing.T) {
	h := start(t, options{token: "sekret", maxBody: 1024})
	h.file("a.txt", "a\n")

	// 401 without or with a wrong token; /healthz is open.
	for _, auth := range []string{"", "Bearer wrong", "sekret"} {
		req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/tools", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var p reply
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
		resp.Body.Close()
		assert.Equal(t, 401, resp.StatusCode, auth)
		assert.Equal(t, "UNAUTHORIZED", p.Code)
	}
	resp, err := http.Get(h.srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)

	// 413 over the body cap, with or without a Content-Length.
	big := `{"file_path":"a.txt","content":"` + strings.Repeat("x", 2048) + `"}`
	r := h.do(http.MethodPost, "/tools/write", big, "X-Session-ID", "s")
	assert.Equal(t, 413, r.Status)
	assert.Equal(t, "BODY_TOO_LARGE", r.Code)
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/tools/write", io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Authorization", "Bearer sekret")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", "s")
	req.ContentLength = -1
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 413, resp.StatusCode)

	// 400s: broken JSON, not an object, wrong content type; 404 route.
	assert.Equal(t, "Error: request body is not valid JSON", h.do(http.MethodPost, "/tools/read", `{"file_path":`).Output)
	assert.Equal(t, "Error: request body must be a JSON object", h.do(http.MethodPost, "/tools/read", `[1]`).Output)
	r = h.do(http.MethodPost, "/tools/read", `{"file_path":"a.txt"}`, "Content-Type", "text/plain")
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "Error: request body must be JSON (Content-Type: application/json)", r.Output)
	r = h.do(http.MethodGet, "/nope", "")
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "NOT_FOUND", r.Code)
	assert.Equal(t, "about:blank", r.Type)
}

func TestCORS(t *testing.T) {
	h := start(t, options{token: "t", origins: []string{"http://app.example"}})
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, h.srv.URL+"/tools/read", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, x-session-id")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := preflight("http://app.example")
	assert.Less(t, resp.StatusCode, 300)
	assert.Equal(t, "http://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-session-id")
	resp = preflight("http://evil.example")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestStreamedRead(t *testing.T) {
	h := start(t, options{})
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		b.WriteString("line of text number something\n")
	}
	h.file("s.txt", b.String())
	js := h.tool("read", "s", obj{"file_path": "s.txt", "offset": 10, "limit": 100})
	require.Equal(t, 200, js.Status)
	st := h.tool("read", "s", obj{"file_path": "s.txt", "offset": 10, "limit": 100}, "Accept", "text/plain")
	require.Equal(t, 200, st.Status)
	assert.Equal(t, "text/plain; charset=utf-8", st.Header.Get("Content-Type"))
	assert.Equal(t, "no", st.Header.Get("X-Accel-Buffering"))
	assert.Equal(t, js.Output, st.Raw, "the streamed body is exactly the JSON output")

	// Errors before the first line are ordinary problems.
	r := h.tool("read", "s", obj{"file_path": "s.txt", "offset": 5000}, "Accept", "text/plain")
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "FS_NOT_FOUND", r.Code)
}

// TestStreamedReadFirstBytesEarly proves lines leave before the file is
// counted to its end: the window is shown while a writer is still appending
// to a FIFO-like growing source... here a large file whose tail is invalid
// UTF-8, so the transfer must break after the first lines arrived.
func TestStreamedReadLateFailureAborts(t *testing.T) {
	h := start(t, options{})
	var b bytes.Buffer
	for b.Len() < 8<<20 {
		b.WriteString("some ordinary line of text\n")
	}
	b.WriteString("\xff\n")
	h.file("late.txt", b.String())

	body, _ := json.Marshal(obj{"file_path": "late.txt", "limit": 3})
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/tools/read", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	head := make([]byte, 64)
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(head), "<path>"))
	_, err = io.ReadAll(resp.Body)
	assert.Error(t, err, "a late failure breaks the transfer")

	// JSON gets the whole answer: a 422.
	r := h.tool("read", "", obj{"file_path": "late.txt", "limit": 3})
	assert.Equal(t, 422, r.Status)
}

// TestCatalog pins the original profile's catalog: byte for byte the
// original's (docs/edits.md, "Profiles").
func TestCatalog(t *testing.T) {
	h := start(t, options{profile: render.ProfileOriginal})
	r := h.do(http.MethodGet, "/tools", "")
	require.Equal(t, 200, r.Status)
	var cat struct {
		Tools []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &cat))
	require.GreaterOrEqual(t, len(cat.Tools), 3)
	assert.Equal(t, `{"name":"read","description":"Read a UTF-8 text file and return line-numbered content.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"Path to read, resolved by the filesystem backend."},"offset":{"type":"number","description":"1-based first line to return. Defaults to 1."},"limit":{"type":"number","description":"Maximum number of lines to return. Defaults to 2000."}},"required":["file_path"]},"guidance":"Use the read tool — not shell commands like cat — to inspect text files. Results include line numbers. Use offset and limit to continue reading large files."}`, string(cat.Tools[0]))
	assert.Equal(t, `{"name":"write","description":"Create or fully replace a UTF-8 text file.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},"content":{"type":"string","description":"Full UTF-8 text content to write."}},"required":["file_path","content"]},"guidance":"Use the write tool to create files or completely replace file contents. Existing files are overwritten, so read an existing file first (the default fs-policy requires it) and prefer edit for targeted changes."}`, string(cat.Tools[1]))
	assert.Equal(t, `{"name":"edit","description":"Edit an existing UTF-8 text file by replacing literal text.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."}},"required":["file_path","old_string","new_string"]},"guidance":"Use the edit tool for targeted changes to existing UTF-8 text files. It replaces literal old_string with new_string; by default old_string must appear exactly once. If old_string appears multiple times, provide a more specific old_string or set replace_all to true. Read the file first (the default fs-policy requires it), unless you just created or edited it in this session."}`, string(cat.Tools[2]))

	spec := h.do(http.MethodGet, "/openapi.yaml", "")
	assert.Equal(t, 200, spec.Status)
	assert.True(t, strings.HasPrefix(spec.Raw, "openapi: 3.0.3"))
}

func TestMetricsMove(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "a\n")
	h.tool("read", "s", obj{"file_path": "a.txt"})
	h.tool("read", "s", obj{"file_path": "missing.txt"})
	h.tool("write", "s", obj{"file_path": "a.txt", "content": "b\n"})
	h.tool("edit", "s", obj{"file_path": "a.txt", "old_string": "b", "new_string": "c"})
	h.file("a.txt", "external\n")
	h.tool("edit", "s", obj{"file_path": "a.txt", "old_string": "external", "new_string": "c"})

	m := h.do(http.MethodGet, "/metrics", "").Raw
	for _, want := range []string{
		"toolfs_fs_stat_calls_total 2\n", // one per read, found or not; none per write/edit
		`toolfs_read_footers_total{footer="eof"} 1`,
		// The transport label is new (docs/api.md, "Metrics").
		`toolfs_tool_calls_total{code="ok",tool="read",transport="rest"} 1`,
		`toolfs_tool_calls_total{code="FS_NOT_FOUND",tool="read",transport="rest"} 1`,
		`toolfs_tool_calls_total{code="ok",tool="write",transport="rest"} 1`,
		`toolfs_tool_calls_total{code="ok",tool="edit",transport="rest"} 1`,
		`toolfs_stale_versions_total{tool="edit"} 1`,
		`toolfs_tool_duration_seconds_count{tool="read",transport="rest"} 2`,
		"toolfs_sessions 1\n",
		"toolfs_observations 2\n", // a.txt present, missing.txt absent
		"go_goroutines",
		"process_open_fds",
	} {
		assert.Contains(t, m, want)
	}
}

// TestMetricsCountEvictions: a read the store's bounds evicted (here the
// harness's 100 paths per session) makes the next edit FS_NOT_OBSERVED, and
// toolfs_observations_evicted_total says why (docs/api.md, "Metrics").
func TestMetricsCountEvictions(t *testing.T) {
	h := start(t, options{})
	for k := range 101 {
		h.file(fmt.Sprintf("f%03d.txt", k), "x\n")
		h.tool("read", "s", obj{"file_path": fmt.Sprintf("f%03d.txt", k)})
	}
	m := h.do(http.MethodGet, "/metrics", "").Raw
	assert.Contains(t, m, "toolfs_observations_evicted_total 1\n")
	assert.Contains(t, m, "toolfs_observations 100\n")
	a := h.tool("edit", "s", obj{"file_path": "f000.txt", "old_string": "x", "new_string": "y"})
	assert.Equal(t, "FS_NOT_OBSERVED", a.Code)
	a = h.tool("edit", "s", obj{"file_path": "f100.txt", "old_string": "x", "new_string": "y"})
	assert.Equal(t, http.StatusOK, a.Status, a.Raw)
}

func TestLoopbackHostsStopsDNSRebinding(t *testing.T) {
	srv := servertest.Start(t, server.Config{Addr: "127.0.0.1:8080"})
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "localhost:8080": 200, "[::1]:8080": 200, "app.localhost": 200,
		"127.0.0.1": 200, "localhost.": 200, "LOCALHOST:1": 200, "[::1]": 200, "127.0.0.1:": 200,
		"rebind.attacker.example:8080": 403, "10.0.0.1": 403,
		// A port must be digits: these name other hosts (issue 12, item 5).
		"127.0.0.1:80.evil.example": 403, "localhost:evil.example": 403, "[::1]:x": 403,
		"localhost:8080:1": 403, "::1": 403, "[::1": 403, ":8080": 403, "127.0.0.1:123456": 403,
		"[::1]evil": 403,
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/tools", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, host)
	}
}

func TestSearchWithAndWithoutRipgrep(t *testing.T) {
	h := start(t, options{})
	h.file("src/a.go", "package a\n// needle\n")
	if !search.New(search.Config{}).Available() {
		t.Skip("rg is not installed (apt-get install ripgrep)")
	}
	r := h.tool("grep", "", obj{"pattern": "needle"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "Found 1 match\n\nsrc/a.go\nLine 2: // needle", r.Output)
	r = h.tool("glob", "", obj{"pattern": "*.go"}, "X-Session-Cwd", "src")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "a.go", r.Output)
	r = h.tool("grep", "", obj{"pattern": "x", "path": "../.."})
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "FS_SANDBOX_DENIED", r.Code)
	r = h.tool("grep", "", obj{"pattern": "("})
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "SEARCH_INVALID_PATTERN", r.Code)
	var cat struct {
		Tools       []struct{ Name string } `json:"tools"`
		Unavailable []json.RawMessage       `json:"unavailable"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.do(http.MethodGet, "/tools", "").Raw), &cat))
	require.Len(t, cat.Tools, 8)
	assert.Equal(t, "grep", cat.Tools[4].Name)
	assert.Empty(t, cat.Unavailable)

	h = start(t, options{noRg: true})
	r = h.tool("glob", "", obj{"pattern": "*"})
	assert.Equal(t, 500, r.Status)
	assert.Equal(t, "SEARCH_FAILED", r.Code)
	assert.Equal(t, "Error: glob could not start its search command (ripgrep launch failed)", r.Output)
	// Arguments are checked first, rg or not.
	r = h.tool("glob", "", obj{"pattern": "*", "path": "a\x00b"})
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Equal(t, "Error: path must not contain a NUL byte", r.Output)
	assert.Equal(t, `{"tools":[`, h.do(http.MethodGet, "/tools", "").Raw[:10])
	require.NoError(t, json.Unmarshal([]byte(h.do(http.MethodGet, "/tools", "").Raw), &cat))
	assert.Len(t, cat.Tools, 6, "read, write, edit, move, delete, mkdir")
	assert.JSONEq(t, `{"name":"glob","reason":"ripgrep (rg) was not found at start-up; install it or set --rg-path"}`, string(cat.Unavailable[0]))
}

func TestDeleteSessionMalformedID(t *testing.T) {
	h := start(t, options{})
	r := h.do(http.MethodDelete, "/sessions/bad%20id", "")
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "INVALID_SESSION", r.Code)
	assert.Equal(t, 204, h.do(http.MethodDelete, "/sessions/never-seen", "").Status)
}
