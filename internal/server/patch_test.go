package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// apply_patch through the whole server (SPEC §25, docs/edits.md
// "apply_patch"): one change of the pipeline over every file it names.

// patchServer is a server with the policy and checkpoints on, and its
// files.
type patchServer struct {
	t   *testing.T
	srv *servertest.Server
}

func startPatch(t *testing.T, cfg server.Config) *patchServer {
	t.Helper()
	cfg.Policy.Enabled, cfg.Checkpoints.Enabled = true, true
	return &patchServer{t: t, srv: servertest.Start(t, cfg)}
}

func (p *patchServer) path(rel string) string { return filepath.Join(p.srv.Root, rel) }

func (p *patchServer) write(rel, content string) {
	p.t.Helper()
	require.NoError(p.t, os.MkdirAll(filepath.Dir(p.path(rel)), 0o755))
	require.NoError(p.t, os.WriteFile(p.path(rel), []byte(content), 0o644))
}

func (p *patchServer) contents(rel string) string {
	p.t.Helper()
	b, err := os.ReadFile(p.path(rel))
	require.NoError(p.t, err)
	return string(b)
}

// read reads rel in session, as the policy asks before an update.
func (p *patchServer) read(session string, rels ...string) {
	p.t.Helper()
	for _, rel := range rels {
		a := post(p.t, p.srv.URL+"/tools/read", session, jsonBody(map[string]any{"file_path": rel}))
		require.Equal(p.t, 200, a.status, a.body)
	}
}

// patch sends a patch in session and decodes the answer.
func (p *patchServer) patch(session string, args map[string]any) patchAnswer {
	p.t.Helper()
	a := post(p.t, p.srv.URL+"/tools/apply_patch", session, jsonBody(args))
	r := patchAnswer{status: a.status, body: a.body}
	require.NoError(p.t, json.Unmarshal([]byte(a.body), &r), a.body)
	return r
}

type patchAnswer struct {
	status   int
	body     string
	Output   string          `json:"output"`
	Metadata json.RawMessage `json:"metadata"`
	Code     string          `json:"code"`
	Hint     json.RawMessage `json:"hint"`
}

// TestApplyPatchAnswer: a patch that adds, updates (one hunk found only
// with its trailing whitespace ignored), deletes and moves files answers
// the exact text of SPEC §25 and the metadata, and the files are as the
// patch says, every other byte kept (CRLF, no final newline).
func TestApplyPatchAnswer(t *testing.T) {
	p := startPatch(t, server.Config{})
	p.write("src/app.py", "def greet():\r\n    print(\"Hi\")  \r\n    return 1\r\n")
	p.write("notes.txt", "one\ntwo")
	p.write("obsolete.txt", "bye\n")
	p.write("old/name.txt", "old content\n")
	p.read("s", "src/app.py", "notes.txt", "obsolete.txt", "old/name.txt")

	r := p.patch("s", map[string]any{"input": "*** Begin Patch\n" +
		"*** Add File: hello.txt\n+Hello world\n" +
		"*** Update File: src/app.py\n@@ def greet():\n-    print(\"Hi\")\n+    print(\"Hello, world!\")\n" +
		"*** Update File: notes.txt\n@@\n one\n-two\n+2\n" +
		"*** Delete File: obsolete.txt\n" +
		"*** Update File: old/name.txt\n*** Move to: new/name.txt\n@@\n-old content\n+new content\n" +
		"*** End Patch\n"})
	require.Equal(t, 200, r.status, r.body)
	root := p.srv.Root
	assert.Equal(t, "Applied the patch: 5 file(s) changed.\n"+
		"A "+root+"/hello.txt\n"+
		"M "+root+"/src/app.py\n"+
		"M "+root+"/notes.txt\n"+
		"D "+root+"/obsolete.txt\n"+
		"R "+root+"/old/name.txt -> "+root+"/new/name.txt\n"+
		"Matched after ignoring trailing whitespace at lines 2-2 of "+root+"/src/app.py.", r.Output)
	assert.JSONEq(t, `{"files":[
		{"path":"hello.txt","operation":"add","diffs":[]},
		{"path":"src/app.py","operation":"update","diffs":[{"path":"src/app.py","oldText":"def greet():\n    print(\"Hi\")  \n    return 1","newText":"def greet():\n    print(\"Hello, world!\")\n    return 1"}]},
		{"path":"notes.txt","operation":"update","diffs":[{"path":"notes.txt","oldText":"one\ntwo","newText":"one\n2"}]},
		{"path":"obsolete.txt","operation":"delete","diffs":[{"path":"obsolete.txt","oldText":"bye","newText":""}]},
		{"path":"old/name.txt","operation":"move","to":"new/name.txt","diffs":[{"path":"new/name.txt","oldText":"old content","newText":"new content"}]}],
		"matches":[{"path":"src/app.py","hunk":1,"level":3,"startLine":2,"endLine":2}]}`, string(r.Metadata))
	assert.Equal(t, "Hello world\n", p.contents("hello.txt"))
	assert.Equal(t, "def greet():\r\n    print(\"Hello, world!\")\r\n    return 1\r\n", p.contents("src/app.py"))
	assert.Equal(t, "one\n2", p.contents("notes.txt"), "no final newline, as the file had none")
	assert.NoFileExists(t, p.path("obsolete.txt"))
	assert.NoFileExists(t, p.path("old/name.txt"))
	assert.Equal(t, "new content\n", p.contents("new/name.txt"))

	// Every file the patch removed is known absent to the session, every
	// file it wrote known at its new version: it patches them again
	// without reading.
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Update File: obsolete.txt\n@@\n-bye\n*** End Patch"})
	assert.Equal(t, 404, r.status, r.body)
	assert.Equal(t, `Error: cannot patch "`+root+`/obsolete.txt": not found`, r.Output)
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Update File: new/name.txt\n@@\n-new content\n+newer\n*** Update File: hello.txt\n@@\n+again\n*** End Patch"})
	require.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "Hello world\nagain\n", p.contents("hello.txt"))
}

// TestApplyPatchPolicy: an update, a delete or a move's source needs the
// file read by the session and unchanged since; an add over an existing
// file and a move onto one are allowed only as write would (read,
// unchanged); each refusal names its file, and nothing of the patch is
// written.
func TestApplyPatchPolicy(t *testing.T) {
	p := startPatch(t, server.Config{})
	root := p.srv.Root
	p.write("a.txt", "a\n")
	p.write("b.txt", "b\n")
	p.write("dir/x.txt", "x\n")
	p.read("s", "a.txt")
	before := "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n"
	tests := []struct {
		name, patch, code, output string
	}{
		{"update unread", "*** Update File: b.txt\n@@\n-b\n+B\n", "FS_NOT_OBSERVED",
			`Error: apply_patch requires reading "` + root + `/b.txt" first — read the file, then retry`},
		{"delete unread", "*** Delete File: b.txt\n", "FS_NOT_OBSERVED",
			`Error: apply_patch requires reading "` + root + `/b.txt" first — read the file, then retry`},
		{"move unread", "*** Update File: b.txt\n*** Move to: c.txt\n", "FS_NOT_OBSERVED",
			`Error: apply_patch requires reading "` + root + `/b.txt" first — read the file, then retry`},
		{"add over an unread file", "*** Add File: b.txt\n+new\n", "FS_NOT_OBSERVED",
			`Error: cannot overwrite existing "` + root + `/b.txt" without reading it first — read the file, then retry`},
		{"move onto an unread file", "*** Update File: a.txt\n*** Move to: b.txt\n", "FS_NOT_OBSERVED",
			`Error: apply_patch requires reading "` + root + `/a.txt" first — read the file, then retry`},
		{"a folder", "*** Delete File: dir\n", "FS_NOT_OBSERVED",
			`Error: apply_patch requires reading "` + root + `/dir" first — read the file, then retry`},
		{"outside the root", "*** Delete File: ../x.txt\n", "FS_SANDBOX_DENIED", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := before + tt.patch + "*** End Patch\n"
			if tt.name == "move onto an unread file" {
				body = "*** Begin Patch\n" + tt.patch + "*** End Patch\n"
				p.read("s2", "a.txt")
				r := p.patch("s2", map[string]any{"input": body})
				assert.Equal(t, "FS_NOT_OBSERVED", r.Code, r.body)
				assert.Equal(t, `Error: cannot overwrite existing "`+root+`/b.txt" without reading it first — read the file, then retry`, r.Output)
				return
			}
			r := p.patch("s", map[string]any{"input": body})
			assert.Equal(t, tt.code, r.Code, r.body)
			if tt.output != "" {
				assert.Equal(t, tt.output, r.Output)
			}
			assert.Equal(t, "a\n", p.contents("a.txt"), "the first file is untouched")
			assert.Equal(t, "b\n", p.contents("b.txt"))
		})
	}

	// Read (and unchanged), each of them is allowed.
	p.read("s", "b.txt", "dir/x.txt")
	r := p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Add File: b.txt\n+replaced\n*** Update File: a.txt\n*** Move to: dir/x.txt\n*** End Patch"})
	require.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "replaced\n", p.contents("b.txt"))
	assert.Equal(t, "a\n", p.contents("dir/x.txt"))
	assert.NoFileExists(t, p.path("a.txt"))

	// Changed since it was read: stale, nothing written.
	p.write("b.txt", "changed elsewhere\n")
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Update File: b.txt\n@@\n-replaced\n+x\n*** End Patch"})
	assert.Equal(t, 409, r.status, r.body)
	assert.Equal(t, `Error: cannot patch "`+root+`/b.txt": file changed since it was read — re-read the file, then retry`, r.Output)
	assert.NoFileExists(t, p.path("new.txt"))

	// A folder, read as the directory it is, is never deleted.
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Delete File: dir\n*** End Patch"})
	assert.Equal(t, 409, r.status, r.body)
	assert.DirExists(t, p.path("dir"))
}

// TestApplyPatchAllOrNothing: when a later hunk is not found, the files
// before it stay as they were (Codex would have written them); the error
// names the file and the hunk, and shows the most similar text.
func TestApplyPatchAllOrNothing(t *testing.T) {
	p := startPatch(t, server.Config{})
	p.write("a.txt", "alpha\nbeta\n")
	p.write("b.txt", "one\ntwo\nthree\n")
	p.read("s", "a.txt", "b.txt")
	r := p.patch("s", map[string]any{"input": "*** Begin Patch\n" +
		"*** Add File: new.txt\n+new\n" +
		"*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n" +
		"*** Update File: b.txt\n@@\n-one\n+1\n@@\n two\n-three!\n+3\n" +
		"*** End Patch"})
	assert.Equal(t, 422, r.status, r.body)
	assert.Equal(t, "FS_EDIT_NOT_FOUND", r.Code)
	assert.Equal(t, `Error: cannot apply hunk 2 to "`+p.srv.Root+`/b.txt": its lines were not found`+
		"\nMost similar text (lines 2-3):\n2: two\n3: three", r.Output)
	assert.JSONEq(t, `{"startLine":2,"endLine":3,"lines":["two","three"]}`, string(r.Hint))
	assert.Equal(t, "alpha\nbeta\n", p.contents("a.txt"))
	assert.Equal(t, "one\ntwo\nthree\n", p.contents("b.txt"))
	assert.NoFileExists(t, p.path("new.txt"))

	// Two places are refused, listed.
	p.write("c.txt", "x\ny\nx\n")
	p.read("s", "c.txt")
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Update File: c.txt\n@@\n-x\n+z\n*** End Patch"})
	assert.Equal(t, 422, r.status, r.body)
	assert.Equal(t, `Error: cannot apply hunk 1 to "`+p.srv.Root+`/c.txt": its lines match more than one place; add context lines to tell them apart`+
		"\nMatches start at lines 1, 3.", r.Output)
	assert.Equal(t, "alpha\nbeta\n", p.contents("a.txt"))
}

// TestApplyPatchRevert: a patch is one change of the session's history,
// one seq for all its files, and reverting to before it undoes the whole
// patch: the update restored, the added file removed, the deleted file
// recreated, the move undone.
func TestApplyPatchRevert(t *testing.T) {
	p := startPatch(t, server.Config{})
	p.write("a.txt", "a\n")
	p.write("gone.txt", "gone\n")
	p.write("m.txt", "m\n")
	p.read("s", "a.txt", "gone.txt", "m.txt")
	a := post(t, p.srv.URL+"/tools/write", "s", `{"file_path":"a.txt","content":"a0\n"}`)
	require.Equal(t, 200, a.status, a.body)
	r := p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-a0\n+a1\n*** Add File: n.txt\n+n\n*** Delete File: gone.txt\n*** Update File: m.txt\n*** Move to: moved/m.txt\n*** End Patch"})
	require.Equal(t, 200, r.status, r.body)

	h := historyOf(t, p.srv.URL, "s")
	assert.Equal(t, "Changes of this session, newest first (revert with to = the seq to go back to; 0 undoes them all):\n"+
		"2 apply_patch a.txt\n2 apply_patch n.txt (created)\n2 apply_patch gone.txt (removed)\n2 apply_patch m.txt (removed)\n2 apply_patch moved/m.txt (created)\n"+
		"1 write a.txt +1 -1", h.Output)

	a = post(t, p.srv.URL+"/sessions/s/revert", "", `{"to":1}`)
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "a0\n", p.contents("a.txt"))
	assert.NoFileExists(t, p.path("n.txt"))
	assert.Equal(t, "gone\n", p.contents("gone.txt"))
	assert.Equal(t, "m\n", p.contents("m.txt"))
	assert.NoFileExists(t, p.path("moved/m.txt"))
}

// TestApplyPatchMCP: the MCP tool gives the same text as REST, success
// and failure alike, and is callable without being listed by the default
// dialect.
func TestApplyPatchMCP(t *testing.T) {
	p := startPatch(t, server.Config{})
	p.write("a.txt", "a\n")
	p.write("b.txt", "a\n")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "patch-test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: p.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: sessionHeader("m")}, MaxRetries: -1,
	}, nil)
	require.NoError(t, err)
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	for _, tool := range list.Tools {
		assert.NotEqual(t, "apply_patch", tool.Name, "the default dialect lists edit alone")
	}
	call := func(args map[string]any) (string, bool) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "apply_patch", Arguments: args})
		require.NoError(t, err)
		require.Len(t, res.Content, 1)
		return res.Content[0].(*sdk.TextContent).Text, res.IsError
	}
	p.read("m", "a.txt")
	p.read("r", "b.txt")
	patch := func(f string) map[string]any {
		return map[string]any{"input": "*** Begin Patch\n*** Update File: " + f + "\n@@\n-a  \n+b\n*** End Patch"}
	}
	text, isErr := call(patch("a.txt"))
	assert.False(t, isErr, text)
	rest := p.patch("r", patch("b.txt"))
	assert.Equal(t, strings.ReplaceAll(rest.Output, "b.txt", "a.txt"), text)

	text, isErr = call(patch("zzz.txt"))
	assert.True(t, isErr)
	rest = p.patch("r", patch("zzz.txt"))
	assert.Equal(t, rest.Output, text)
	assert.Equal(t, `Error: apply_patch requires reading "`+p.srv.Root+`/zzz.txt" first — read the file, then retry`, text)
}

// sessionHeader sends every request with X-Session-ID.
type sessionHeader string

func (s sessionHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Session-ID", string(s))
	return http.DefaultTransport.RoundTrip(r)
}

// TestApplyPatchOperations: the Responses API's apply_patch_call
// operations are applied as one patch, and the metadata carries each
// operation's status and output for its apply_patch_call_output.
func TestApplyPatchOperations(t *testing.T) {
	p := startPatch(t, server.Config{})
	p.write("lib/fib.py", "def fib(n):\n    if n < 2:\n        return n\n    return fib(n-1) + fib(n-2)\n")
	p.write("old.txt", "old\n")
	p.read("s", "lib/fib.py", "old.txt")
	r := p.patch("s", map[string]any{"operations": []map[string]any{
		{"type": "create_file", "path": "main.py", "diff": "+from lib.fib import fib\n+print(fib(10))\n+"},
		{"type": "update_file", "path": "lib/fib.py", "diff": "@@ def fib(n):\n-    if n < 2:\n+    if n <= 1:\n"},
		{"type": "delete_file", "path": "old.txt"},
	}})
	require.Equal(t, 200, r.status, r.body)
	root := p.srv.Root
	var meta struct {
		Operations []map[string]string `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(r.Metadata, &meta))
	assert.Equal(t, []map[string]string{
		{"status": "completed", "output": "A " + root + "/main.py"},
		{"status": "completed", "output": "M " + root + "/lib/fib.py"},
		{"status": "completed", "output": "D " + root + "/old.txt"},
	}, meta.Operations)
	assert.Equal(t, "from lib.fib import fib\nprint(fib(10))\n", p.contents("main.py"))
	assert.Equal(t, "def fib(n):\n    if n <= 1:\n        return n\n    return fib(n-1) + fib(n-2)\n", p.contents("lib/fib.py"))
	assert.NoFileExists(t, p.path("old.txt"))

	r = p.patch("s", map[string]any{"operations": []map[string]any{{"type": "rename_file", "path": "x"}}})
	assert.Equal(t, 400, r.status)
	assert.Equal(t, "Error: operations[0].type must be one of create_file, update_file, delete_file", r.Output)
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** End Patch", "operations": []map[string]any{}})
	assert.Equal(t, "Error: provide either input or operations, not both", r.Output)
	r = p.patch("s", map[string]any{})
	assert.Equal(t, `Error: input must be a string: the patch, from "*** Begin Patch" to "*** End Patch"`, r.Output)
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch"})
	assert.Equal(t, 400, r.status)
	assert.Equal(t, "INVALID_ARGUMENT", r.Code)
	assert.Equal(t, `Error: invalid patch: line 2: expected "*** Add File: <path>", "*** Delete File: <path>" or "*** Update File: <path>", found "*** Frobnicate File: foo"`, r.Output)
}

// TestApplyPatchDryRun: a dry run checks everything and writes nothing,
// showing each file's change as a unified diff.
func TestApplyPatchDryRun(t *testing.T) {
	p := startPatch(t, server.Config{})
	p.write("a.txt", "one\ntwo\n")
	p.read("s", "a.txt")
	r := p.patch("s", map[string]any{"dry_run": true, "input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+2\n*** Add File: b.txt\n+b\n*** End Patch"})
	require.Equal(t, 200, r.status, r.body)
	root := p.srv.Root
	assert.Equal(t, "Dry run: no changes were written. The patch would change 2 file(s):\n"+
		"M "+root+"/a.txt\nA "+root+"/b.txt\n"+
		"--- "+root+"/a.txt\n+++ "+root+"/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"+
		"--- "+root+"/b.txt\n+++ "+root+"/b.txt\n@@ -0,0 +1,1 @@\n+b", r.Output)
	assert.Equal(t, "one\ntwo\n", p.contents("a.txt"))
	assert.NoFileExists(t, p.path("b.txt"))
	assert.Contains(t, historyOf(t, p.srv.URL, "s").Output, "No changes")
}

// TestApplyPatchCodexScenarios runs Codex's own fixtures
// (internal/patch/testdata/codex-scenarios) through the real server: the
// session reads every input file, sends the patch, and the tree is the
// expected one, except where SPEC §25 decides otherwise
// (docs/edits.md, "Codex's fixtures").
func TestApplyPatchCodexScenarios(t *testing.T) {
	dir := "../patch/testdata/codex-scenarios"
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	differs := map[string]map[string]string{
		"014_update_file_appends_trailing_newline":         {"no_newline.txt": "first line\nsecond line"},
		"015_failure_after_partial_success_leaves_changes": {},
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			p := startPatch(t, server.Config{})
			in := treeOf(t, filepath.Join(dir, e.Name(), "input"))
			for rel, content := range in {
				p.write(rel, content)
				p.read("s", rel)
			}
			want := treeOf(t, filepath.Join(dir, e.Name(), "expected"))
			if d, ok := differs[e.Name()]; ok {
				want = d
			}
			text, err := os.ReadFile(filepath.Join(dir, e.Name(), "patch.txt"))
			require.NoError(t, err)
			r := p.patch("s", map[string]any{"input": string(text)})
			t.Logf("%d %s", r.status, r.Output)
			assert.Equal(t, want, treeOf(t, p.srv.Root))
		})
	}
	assert.Equal(t, 23, n)
}

// treeOf is every regular file under dir by slash path, the server's
// private folder left out.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".toolfs-api" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	require.NoError(t, err)
	return maps.Clone(out)
}

// TestApplyPatchAuditAndEvents: a patch writes one audit line per file
// (one request id) and one change-feed event per file: edit for each file
// it leaves, delete for each it removes.
func TestApplyPatchAuditAndEvents(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	p := startPatch(t, server.Config{Audit: audit.Settings{Path: log}, Events: events.Settings{Enabled: true}})
	p.write("a.txt", "a\n")
	p.write("c.txt", "c\n")
	p.read("s", "a.txt", "c.txt")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", p.srv.URL+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	events := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e map[string]any
				if json.Unmarshal([]byte(d), &e) == nil {
					events <- e
				}
			}
		}
	}()

	a := send(t, "POST", p.srv.URL+"/tools/apply_patch", "", jsonBody(map[string]any{"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Add File: b.txt\n+b\n*** Delete File: c.txt\n*** End Patch"}),
		"Content-Type", "application/json", "X-Session-ID", "s", "X-Request-Id", "r-patch")
	require.Equal(t, 200, a.status, a.body)

	lines := auditLines(t, log)
	require.Len(t, lines, 3)
	for i, path := range []string{"a.txt", "b.txt", "c.txt"} {
		assert.Contains(t, lines[i], `"tool":"apply_patch","path":"`+path+`"`)
		assert.Contains(t, lines[i], `"request_id":"r-patch"`)
	}
	assert.Contains(t, lines[1], `"before":null`)
	assert.Contains(t, lines[2], `"after":null`)

	got := map[string]string{}
	timeout := time.After(10 * time.Second)
	for len(got) < 3 {
		select {
		case e := <-events:
			if path, _ := e["path"].(string); path != "" {
				got[path], _ = e["type"].(string)
			}
		case <-timeout:
			t.Fatalf("events so far: %v", got)
		}
	}
	assert.Equal(t, map[string]string{"a.txt": "edit", "b.txt": "edit", "c.txt": "delete"}, got)
}

// TestApplyPatchIsFenced: the sandbox mode fences every file of a patch,
// as it fences a write.
func TestApplyPatchIsFenced(t *testing.T) {
	p := startPatch(t, server.Config{Tools: tools.Settings{SandboxMode: "read-only"}})
	p.write("a.txt", "a\n")
	p.read("s", "a.txt")
	r := p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch"})
	assert.Equal(t, 403, r.status, r.body)
	assert.Equal(t, "FS_SANDBOX_DENIED", r.Code)
	assert.Equal(t, "Error: "+msgReadOnlyDenied, r.Output)
	assert.Equal(t, "a\n", p.contents("a.txt"))
}

// TestApplyPatchConcurrent: patches over the same files in opposite
// orders, from two sessions at once, never deadlock (the locks are taken
// in one global order) and never lose an update: each call applies whole
// or is refused as stale.
func TestApplyPatchConcurrent(t *testing.T) {
	p := startPatch(t, server.Config{})
	p.write("a.txt", "0\n")
	p.write("b.txt", "0\n")
	patchOf := func(first, second, from, to string) string {
		return "*** Begin Patch\n*** Update File: " + first + "\n@@\n-" + from + "\n+" + to + "\n*** Update File: " + second + "\n@@\n-" + from + "\n+" + to + "\n*** End Patch"
	}
	done := make(chan int, 2)
	for w, order := range [][2]string{{"a.txt", "b.txt"}, {"b.txt", "a.txt"}} {
		session := "w" + string(rune('0'+w))
		go func() {
			applied := 0
			for range 30 {
				a := post(t, p.srv.URL+"/tools/read", session, `{"file_path":"a.txt"}`)
				var read struct {
					Metadata struct {
						Lines []struct{ Text string } `json:"lines"`
					} `json:"metadata"`
				}
				if json.Unmarshal([]byte(a.body), &read) != nil || len(read.Metadata.Lines) == 0 {
					continue
				}
				post(t, p.srv.URL+"/tools/read", session, `{"file_path":"b.txt"}`)
				cur := read.Metadata.Lines[0].Text
				next := cur + "+" + session
				r := post(t, p.srv.URL+"/tools/apply_patch", session, jsonBody(map[string]any{"input": patchOf(order[0], order[1], cur, next)}))
				if r.status == 200 {
					applied++
				}
			}
			done <- applied
		}()
	}
	total := 0
	for range 2 {
		select {
		case n := <-done:
			total += n
		case <-time.After(60 * time.Second):
			t.Fatal("the patches did not finish: a deadlock?")
		}
	}
	assert.NotZero(t, total)
	assert.Equal(t, p.contents("a.txt"), p.contents("b.txt"), "both files took every applied patch, in the same order")
	assert.Equal(t, total, strings.Count(p.contents("a.txt"), "+"), "no applied patch was lost")
}

// TestApplyPatchPolicyOff: with the policy off nothing needs reading, but
// a folder is still never deleted and a missing file never updated. With
// the checkpoint store off a patch is refused: a change of several files
// is journaled there (docs/checkpoints.md, "Journaled changes").
func TestApplyPatchPolicyOff(t *testing.T) {
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: false}, Checkpoints: checkpoint.Settings{Enabled: true}})
	require.NoError(t, os.MkdirAll(filepath.Join(srv.Root, "dir"), 0o755))
	a := post(t, srv.URL+"/tools/apply_patch", "", `{"input":"*** Begin Patch\n*** Delete File: dir\n*** End Patch"}`)
	assert.Equal(t, 422, a.status)
	assert.Equal(t, "Error: cannot patch \""+srv.Root+"/dir\": not a regular file", problemOf(t, a).Output)
	a = post(t, srv.URL+"/tools/apply_patch", "", `{"input":"*** Begin Patch\n*** Add File: n.txt\n+n\n*** Update File: nope\n@@\n-x\n*** End Patch"}`)
	assert.Equal(t, 404, a.status)
	assert.Equal(t, "Error: cannot patch \""+srv.Root+"/nope\": not found", problemOf(t, a).Output)
	assert.NoFileExists(t, filepath.Join(srv.Root, "n.txt"))
	assert.DirExists(t, filepath.Join(srv.Root, "dir"))

}

// TestApplyPatchWithoutCheckpoints: with --checkpoints=false a patch is
// applied, still all or nothing across its files: the pipeline journals it
// in the journal-only store, which keeps nothing once the patch is done
// (no history, no log, no kept content) and no revert is offered
// (docs/checkpoints.md, "Without checkpoints").
func TestApplyPatchWithoutCheckpoints(t *testing.T) {
	p := &patchServer{t: t, srv: servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}})}
	p.write("a.txt", "alpha\nbeta\n")
	p.write("b.txt", "one\ntwo\r\n")
	p.write("gone.txt", "bye\n")
	p.read("s", "a.txt", "b.txt", "gone.txt")
	r := p.patch("s", map[string]any{"input": "*** Begin Patch\n" +
		"*** Add File: new.txt\n+new\n" +
		"*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n" +
		"*** Update File: b.txt\n@@\n-one\n+1\n" +
		"*** Delete File: gone.txt\n" +
		"*** End Patch"})
	require.Equal(t, 200, r.status, r.body)
	root := p.srv.Root + "/"
	assert.Equal(t, "Applied the patch: 4 file(s) changed.\nA "+root+"new.txt\nM "+root+"a.txt\nM "+root+"b.txt\nD "+root+"gone.txt", r.Output)
	assert.Equal(t, "new\n", p.contents("new.txt"))
	assert.Equal(t, "ALPHA\nbeta\n", p.contents("a.txt"))
	assert.Equal(t, "1\ntwo\r\n", p.contents("b.txt"))
	assert.NoFileExists(t, p.path("gone.txt"))
	assert.NoDirExists(t, p.path(".toolfs-api/checkpoints"), "no history is kept")
	logs, err := filepath.Glob(p.path(".toolfs-api/journal/sessions/*.log"))
	require.NoError(t, err)
	assert.Empty(t, logs, "the done patch's journal is removed")

	// All or nothing: a later file's hunk not found changes no file.
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n" +
		"*** Add File: more.txt\n+more\n" +
		"*** Update File: a.txt\n@@\n-ALPHA\n+alpha\n" +
		"*** Update File: b.txt\n@@\n-three\n+3\n" +
		"*** End Patch"})
	assert.Equal(t, 422, r.status, r.body)
	assert.Equal(t, "FS_EDIT_NOT_FOUND", r.Code)
	assert.Equal(t, "ALPHA\nbeta\n", p.contents("a.txt"))
	assert.NoFileExists(t, p.path("more.txt"))

	// The session goes on from the patch's versions, without reading again.
	r = p.patch("s", map[string]any{"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-ALPHA\n+alpha\n*** Update File: new.txt\n@@\n-new\n+newer\n*** End Patch"})
	require.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "alpha\nbeta\n", p.contents("a.txt"))
	assert.Equal(t, "newer\n", p.contents("new.txt"))

	// No history: revert is not offered.
	a := post(t, p.srv.URL+"/tools/revert", "s", `{"to":0}`)
	assert.NotEqual(t, 200, a.status, a.body)
	assert.Equal(t, "alpha\nbeta\n", p.contents("a.txt"))
}
