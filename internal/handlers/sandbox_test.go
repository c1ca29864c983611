package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// The original's denial texts (docs/sandbox.md), byte for byte.
const hintLine = "[sandbox: escalation available \u2014 retry this exact operation once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"

func deniedText(mode string) string {
	return "Error: [sandbox: file access denied under " + mode + " mode]\n" + hintLine
}

// sbOptions configure a sandboxed server.
type sbOptions struct {
	mode          tools.Fence
	noApprovals   bool
	timeout       time.Duration
	max           int
	token         string
	approverToken string
	profile       render.Profile
}

// sb is a real server with a sandbox mode, on a loopback port.
type sb struct {
	t     *testing.T
	srv   *servertest.Server
	token string // sent on tool calls
}

func startSandbox(t *testing.T, o sbOptions) *sb {
	t.Helper()
	srv := servertest.Start(t, sbServerOptions(o))
	return &sb{t: t, srv: srv, token: o.token}
}

func sbServerOptions(o sbOptions) server.Config {
	if o.timeout == 0 {
		o.timeout = 30 * time.Second
	}
	return server.Config{
		Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		Tools:  tools.Settings{Profile: string(o.profile), SandboxMode: string(o.mode)},
		Token:  o.token, ApproverToken: o.approverToken, MaxBodyBytes: 1 << 20,
		StreamWriteWindow: 10 * time.Second,
		Approvals:         approval.Settings{Deny: o.noApprovals, Max: o.max, Timeout: o.timeout},
	}
}

func (h *sb) file(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.srv.Root, rel)
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(h.t, os.WriteFile(p, []byte(content), 0o644))
}

func (h *sb) contents(rel string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.srv.Root, rel))
	require.NoError(h.t, err)
	return string(b)
}

type sbReply struct {
	Status int
	Body   string
	Output string `json:"output"`
	Code   string `json:"code"`
}

// request sends one request with ctx; auth is the bearer token ("" none);
// headers are name, value pairs.
func (h *sb) request(ctx context.Context, method, path, body, auth string, headers ...string) (sbReply, error) {
	req, err := http.NewRequestWithContext(ctx, method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return sbReply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sbReply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return sbReply{}, err
	}
	r := sbReply{Status: resp.StatusCode, Body: string(raw)}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") && len(raw) > 0 {
		if err := json.Unmarshal(raw, &r); err != nil {
			return sbReply{}, err
		}
	}
	return r, nil
}

// tool calls a tool in session s with cwd ("" = none).
func (h *sb) tool(name, cwd string, args map[string]any) sbReply {
	h.t.Helper()
	r, err := h.toolCtx(context.Background(), name, cwd, args)
	require.NoError(h.t, err)
	return r
}

func (h *sb) toolCtx(ctx context.Context, name, cwd string, args map[string]any) (sbReply, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return sbReply{}, err
	}
	headers := []string{"X-Session-ID", "s"}
	if cwd != "" {
		headers = append(headers, "X-Session-Cwd", cwd)
	}
	return h.request(ctx, http.MethodPost, "/tools/"+name, string(body), h.token, headers...)
}

// list is GET /approvals (with query), sent with auth.
func (h *sb) list(query, auth string) (int, approvalList) {
	h.t.Helper()
	r, err := h.request(context.Background(), http.MethodGet, "/approvals"+query, "", auth)
	require.NoError(h.t, err)
	var l approvalList
	if r.Status == http.StatusOK {
		require.NoError(h.t, json.Unmarshal([]byte(r.Body), &l), r.Body)
	}
	return r.Status, l
}

func (h *sb) decide(id, decision, auth string) sbReply {
	h.t.Helper()
	r, err := h.request(context.Background(), http.MethodPost, "/approvals/"+id, `{"decision":"`+decision+`"}`, auth)
	require.NoError(h.t, err)
	return r
}

// pending waits (long-polling) until n approvals are pending and returns
// them.
func (h *sb) pending(n int, auth string) []approval.Approval {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		status, l := h.list("?wait=2s", auth)
		require.Equal(h.t, http.StatusOK, status)
		if len(l.Approvals) == n {
			return l.Approvals
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("%d approvals never became pending", n)
	return nil
}

type approvalList struct {
	Approvals []approval.Approval `json:"approvals"`
	Cursor    uint64              `json:"cursor"`
}

// metric returns the value of one series line of /metrics ("" if absent).
func (h *sb) metric(series string) string {
	h.t.Helper()
	r, err := h.request(context.Background(), http.MethodGet, "/metrics", "", h.token)
	require.NoError(h.t, err)
	for _, line := range strings.Split(r.Body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// async runs a tool call in the background; its reply arrives on the
// channel.
func (h *sb) async(name, cwd string, args map[string]any) <-chan sbReply {
	out := make(chan sbReply, 1)
	go func() {
		r, err := h.toolCtx(context.Background(), name, cwd, args)
		if err != nil {
			r = sbReply{Status: -1, Body: err.Error()}
		}
		out <- r
	}()
	return out
}

func wait(t *testing.T, c <-chan sbReply) sbReply {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("the call never answered")
	}
	return sbReply{}
}

// TestSandboxFence: every mode × tool × inside/outside the session cwd,
// through the real server. The fence judges where a path leads (a link
// under the cwd to a file outside is outside); reads always pass; the root
// stays the hard boundary in every mode, with its own text.
func TestSandboxFence(t *testing.T) {
	outsideRoot := filepath.Join(t.TempDir(), "x.txt")
	type place struct {
		name, path string
		inside     bool // under the session cwd "ws"
	}
	places := []place{
		{"in cwd", "a.txt", true},
		{"in a cwd subfolder", "sub/a.txt", true},
		{"beside the cwd", "../other/a.txt", false},
		{"at the root", "../a.txt", false},
		{"a link in the cwd to outside it", "link.txt", false},
	}
	for _, mode := range []tools.Fence{tools.FenceOff, tools.FenceReadOnly, tools.FenceWorkspaceWrite, tools.FenceDangerFullAccess} {
		for _, tool := range []string{"write", "edit"} {
			for _, p := range places {
				t.Run(fmt.Sprintf("%s/%s/%s", mode, tool, p.name), func(t *testing.T) {
					h := startSandbox(t, sbOptions{mode: mode})
					for _, f := range []string{"ws/a.txt", "ws/sub/a.txt", "other/a.txt", "a.txt", "other/linked.txt"} {
						h.file(f, "old\n")
					}
					require.NoError(t, os.Symlink("../other/linked.txt", filepath.Join(h.srv.Root, "ws/link.txt")))
					display := filepath.Join(h.srv.Root, "ws", p.path)

					read := h.tool("read", "ws", map[string]any{"file_path": p.path})
					require.Equal(t, http.StatusOK, read.Status, "reads always pass: %s", read.Body)

					args := map[string]any{"file_path": p.path, "content": "new\n"}
					want := "<path>" + display + "</path>\n<type>file</type>\n<content>\nUpdated file\n</content>"
					if tool == "edit" {
						args = map[string]any{"file_path": p.path, "old_string": "old", "new_string": "new"}
						want = "The file " + display + " has been updated successfully."
					}
					allowed := mode == tools.FenceOff || mode == tools.FenceDangerFullAccess ||
						(mode == tools.FenceWorkspaceWrite && p.inside)
					r := h.tool(tool, "ws", args)
					target := filepath.Join("ws", p.path)
					if allowed {
						require.Equal(t, http.StatusOK, r.Status, r.Body)
						assert.Equal(t, want, r.Output)
						assert.Equal(t, "new\n", h.contents(target))
						return
					}
					require.Equal(t, http.StatusForbidden, r.Status, r.Body)
					assert.Equal(t, "FS_SANDBOX_DENIED", r.Code)
					assert.Equal(t, deniedText(string(mode)), r.Output)
					assert.Equal(t, "old\n", h.contents(target), "a denied call writes nothing")
				})
			}
			t.Run(fmt.Sprintf("%s/%s/outside the root", mode, tool), func(t *testing.T) {
				h := startSandbox(t, sbOptions{mode: mode})
				args := map[string]any{"file_path": outsideRoot, "content": "x"}
				if tool == "edit" {
					args = map[string]any{"file_path": outsideRoot, "old_string": "a", "new_string": "b"}
				}
				r := h.tool(tool, "", args)
				require.Equal(t, http.StatusForbidden, r.Status, r.Body)
				assert.Equal(t, "FS_SANDBOX_DENIED", r.Code)
				assert.Equal(t, `Error: cannot `+tool+` "`+outsideRoot+`": outside the workspace root`, r.Output)
			})
		}
	}
}

// TestFenceAsksTheProvider: under workspace-write the fence asks the
// provider whether a target lies within the session cwd (fs.Workspace.Within),
// by where both really are: a sibling whose name starts with the cwd's is
// outside it, a cwd reached through a symlinked folder is the folder it
// leads to, and a symlinked folder inside the cwd is judged by where it
// leads.
func TestFenceAsksTheProvider(t *testing.T) {
	tests := []struct {
		name, cwd, path string
		target          string // the file written, relative to the root
		allowed         bool
	}{
		{"in the cwd", "sub", "a.txt", "sub/a.txt", true},
		{"a sibling sharing the cwd's prefix", "sub", "../sub2/a.txt", "sub2/a.txt", false},
		{"that sibling by its absolute path", "sub", "/sub2/a.txt", "sub2/a.txt", false},
		{"the cwd from the sibling", "sub2", "../sub/a.txt", "sub/a.txt", false},
		{"the sibling's own file", "sub2", "a.txt", "sub2/a.txt", true},
		{"a new file in new folders", "sub", "new/deeper/b.txt", "sub/new/deeper/b.txt", true},
		{"a cwd through a symlinked folder", "linked", "a.txt", "sub/a.txt", true},
		{"beside a symlinked cwd", "linked", "../sub2/a.txt", "sub2/a.txt", false},
		{"a symlinked folder in the cwd to the sibling", "sub", "tosub2/a.txt", "sub2/a.txt", false},
		{"a symlinked folder in the sibling to the cwd", "sub2", "tosub/a.txt", "sub/a.txt", false},
		{"the cwd through a link inside it to itself", "sub", "../linked/a.txt", "sub/a.txt", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startSandbox(t, sbOptions{mode: tools.FenceWorkspaceWrite})
			h.file("sub/a.txt", "old\n")
			h.file("sub2/a.txt", "old\n")
			root := h.srv.Root
			require.NoError(t, os.Symlink("sub", filepath.Join(root, "linked")))
			require.NoError(t, os.Symlink("../sub2", filepath.Join(root, "sub", "tosub2")))
			require.NoError(t, os.Symlink("../sub", filepath.Join(root, "sub2", "tosub")))
			path := tt.path
			if strings.HasPrefix(path, "/") {
				path = filepath.Join(root, path)
			}
			read := h.tool("read", tt.cwd, map[string]any{"file_path": path})
			require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, read.Status, read.Body)
			r := h.tool("write", tt.cwd, map[string]any{"file_path": path, "content": "new\n"})
			if tt.allowed {
				require.Equal(t, http.StatusOK, r.Status, r.Body)
				assert.Equal(t, "new\n", h.contents(tt.target))
				return
			}
			require.Equal(t, http.StatusForbidden, r.Status, r.Body)
			assert.Equal(t, "FS_SANDBOX_DENIED", r.Code)
			assert.Equal(t, deniedText("workspace-write"), r.Output)
			assert.Equal(t, "old\n", h.contents(tt.target), "a denied call writes nothing")
		})
	}
}

// TestSandboxDryRunIsFenced: a dry run gets the real call's denial.
func TestSandboxDryRunIsFenced(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	r := h.tool("write", "", map[string]any{"file_path": "a.txt", "content": "x", "dry_run": true})
	require.Equal(t, http.StatusForbidden, r.Status, r.Body)
	assert.Equal(t, deniedText("read-only"), r.Output)
}

// TestSandboxWithoutCwdIsTheRoot: under workspace-write a call without
// X-Session-Cwd may write anywhere in the root (the cwd is the root).
func TestSandboxWithoutCwdIsTheRoot(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceWorkspaceWrite})
	r := h.tool("write", "", map[string]any{"file_path": "deep/er/new.txt", "content": "x"})
	require.Equal(t, http.StatusOK, r.Status, r.Body)
	assert.Equal(t, "x", h.contents("deep/er/new.txt"))
}

// TestSandboxCatalog: off leaves the catalog as it is; under a fence write
// and edit advertise the original's two properties, with its descriptions,
// after the original's other properties, in both profiles.
func TestSandboxCatalog(t *testing.T) {
	catalog := func(o sbOptions) map[string]json.RawMessage {
		h := startSandbox(t, o)
		r, err := h.request(context.Background(), http.MethodGet, "/tools", "", "")
		require.NoError(t, err)
		var c struct {
			Tools []struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"tools"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Body), &c))
		out := map[string]json.RawMessage{}
		for _, tl := range c.Tools {
			out[tl.Name] = tl.Parameters
		}
		return out
	}
	const sp = `"sandbox_permissions":{"type":"string","enum":["workspace-write","danger-full-access"],"description":"The wider sandbox mode this file operation needs. Only valid as a one-shot retry of an operation the sandbox just denied; requires justification and user approval."},` +
		`"justification":{"type":"string","description":"Required with sandbox_permissions: one sentence for the user explaining why this exact file operation needs the wider access."}`
	orig := catalog(sbOptions{mode: tools.FenceReadOnly, profile: render.ProfileOriginal})
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},"content":{"type":"string","description":"Full UTF-8 text content to write."},`+sp+`},"required":["file_path","content"]}`, string(orig["write"]))
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."},`+sp+`},"required":["file_path","old_string","new_string"]}`, string(orig["edit"]))
	assert.NotContains(t, string(orig["read"]), "sandbox_permissions")

	ext := catalog(sbOptions{mode: tools.FenceWorkspaceWrite})
	for _, name := range []string{"write", "edit"} {
		s := string(ext[name])
		assert.Contains(t, s, sp)
		assert.Less(t, strings.Index(s, `"justification"`), strings.Index(s, `"dry_run"`), "the original's properties come first")
	}

	off := catalog(sbOptions{})
	plain := catalog(sbOptions{mode: tools.FenceOff})
	for name, params := range off {
		assert.NotContains(t, string(params), "sandbox_permissions")
		assert.Equal(t, string(plain[name]), string(params))
	}
}

// TestEscalationArguments: the original's argument checks and texts, and
// ours where it has none, all 400 INVALID_ARGUMENT before anything runs.
func TestEscalationArguments(t *testing.T) {
	cases := []struct {
		name string
		mode tools.Fence
		args map[string]any
		want string
	}{
		{"no fence", tools.FenceOff, map[string]any{"sandbox_permissions": "workspace-write", "justification": "j"},
			"sandbox_permissions is not available in this composition (no sandboxing filesystem to escalate)"},
		{"no fence, no justification", tools.FenceOff, map[string]any{"sandbox_permissions": "danger-full-access"},
			"sandbox_permissions is not available in this composition (no sandboxing filesystem to escalate)"},
		{"no justification", tools.FenceReadOnly, map[string]any{"sandbox_permissions": "workspace-write"},
			"invalid escalation: sandbox_permissions requires a justification"},
		{"justification alone", tools.FenceReadOnly, map[string]any{"justification": "because"},
			"invalid escalation: justification is only valid together with sandbox_permissions"},
		{"empty justification", tools.FenceReadOnly, map[string]any{"sandbox_permissions": "workspace-write", "justification": " \n"},
			"invalid justification: expected a non-empty sentence"},
		{"justification not a string", tools.FenceReadOnly, map[string]any{"sandbox_permissions": "workspace-write", "justification": 3},
			"invalid justification: expected a non-empty sentence"},
		{"justification too long", tools.FenceReadOnly, map[string]any{"sandbox_permissions": "workspace-write", "justification": strings.Repeat("é", 1001)},
			"invalid justification: expected one sentence of at most 1000 characters"},
		{"unknown mode", tools.FenceReadOnly, map[string]any{"sandbox_permissions": "read-only", "justification": "j"},
			`sandbox_permissions must be "workspace-write" or "danger-full-access"`},
		{"mode not a string", tools.FenceReadOnly, map[string]any{"sandbox_permissions": true, "justification": "j"},
			`sandbox_permissions must be "workspace-write" or "danger-full-access"`},
		{"same mode", tools.FenceWorkspaceWrite, map[string]any{"sandbox_permissions": "workspace-write", "justification": "j"},
			`sandbox escalation to "workspace-write" is not strictly wider than this call's current "workspace-write" mode`},
		{"narrower mode", tools.FenceDangerFullAccess, map[string]any{"sandbox_permissions": "workspace-write", "justification": "j"},
			`sandbox escalation to "workspace-write" is not strictly wider than this call's current "danger-full-access" mode`},
		{"top mode", tools.FenceDangerFullAccess, map[string]any{"sandbox_permissions": "danger-full-access", "justification": "j"},
			`sandbox escalation to "danger-full-access" is not strictly wider than this call's current "danger-full-access" mode`},
	}
	for _, tc := range cases {
		for _, tool := range []string{"write", "edit"} {
			t.Run(tc.name+"/"+tool, func(t *testing.T) {
				h := startSandbox(t, sbOptions{mode: tc.mode})
				args := map[string]any{"file_path": "a.txt", "content": "x"}
				if tool == "edit" {
					args = map[string]any{"file_path": "a.txt", "old_string": "a", "new_string": "b"}
				}
				for k, v := range tc.args {
					args[k] = v
				}
				r := h.tool(tool, "", args)
				require.Equal(t, http.StatusBadRequest, r.Status, r.Body)
				assert.Equal(t, "INVALID_ARGUMENT", r.Code)
				assert.Equal(t, "Error: "+tc.want, r.Output)
				_, l := h.list("", "")
				assert.Empty(t, l.Approvals, "no approval for an invalid request")
			})
		}
	}
	// Without a fence, justification alone is an unknown argument, ignored
	// as any other (today's behaviour).
	h := startSandbox(t, sbOptions{})
	r := h.tool("write", "", map[string]any{"file_path": "j.txt", "content": "x", "justification": "j"})
	require.Equal(t, http.StatusOK, r.Status, r.Body)
}

// TestEscalationApproved: a denied edit retried with sandbox_permissions
// asks a person; GET /approvals (long-polled) shows it; approve runs
// exactly that call once under the granted mode; the same call without
// escalation is denied again, and the id cannot be decided twice.
func TestEscalationApproved(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	h.file("ws/a.txt", "one\ntwo\n")
	require.Equal(t, http.StatusOK, h.tool("read", "ws", map[string]any{"file_path": "a.txt"}).Status)
	edit := map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "TWO"}
	r := h.tool("edit", "ws", edit)
	require.Equal(t, http.StatusForbidden, r.Status)
	assert.Equal(t, deniedText("read-only"), r.Output)

	// A long poll waiting before the request arrives returns when it does.
	polled := make(chan approvalList, 1)
	go func() {
		_, l := h.list("?wait=20s", "")
		polled <- l
	}()
	time.Sleep(100 * time.Millisecond)
	escalated := map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "TWO",
		"sandbox_permissions": "workspace-write", "justification": "The user asked to fix line two."}
	answer := h.async("edit", "ws", escalated)
	var l approvalList
	select {
	case l = <-polled:
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not return when the approval appeared")
	}
	require.Len(t, l.Approvals, 1)
	a := l.Approvals[0]
	assert.Equal(t, "s", a.Session)
	assert.Equal(t, "edit", a.Tool)
	assert.Equal(t, filepath.Join(h.srv.Root, "ws/a.txt"), a.Path)
	assert.Equal(t, "workspace-write", a.Mode)
	assert.Equal(t, "escalate sandbox to workspace-write: The user asked to fix line two.", a.Reason)
	assert.Len(t, a.ID, 32)
	assert.WithinDuration(t, a.Created.Add(30*time.Second), a.Expires, time.Millisecond)
	assert.Equal(t, "one\ntwo\n", h.contents("ws/a.txt"), "nothing runs before the decision")

	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
	r = wait(t, answer)
	require.Equal(t, http.StatusOK, r.Status, r.Body)
	assert.Equal(t, "The file "+filepath.Join(h.srv.Root, "ws/a.txt")+" has been updated successfully.", r.Output)
	assert.Equal(t, "one\nTWO\n", h.contents("ws/a.txt"))

	again := h.decide(a.ID, "approve", "")
	assert.Equal(t, http.StatusNotFound, again.Status)
	assert.Equal(t, "APPROVAL_NOT_FOUND", again.Code)
	_, l = h.list("", "")
	assert.Empty(t, l.Approvals)

	// The grant was for that one call: the next write is fenced again.
	r = h.tool("edit", "ws", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "ONE"})
	require.Equal(t, http.StatusForbidden, r.Status)
	assert.Equal(t, deniedText("read-only"), r.Output)
	assert.Equal(t, "one\nTWO\n", h.contents("ws/a.txt"))
	assert.Equal(t, "1", h.metric(`toolfs_approvals_total{decision="approve",via="approvals"}`))
	assert.Equal(t, "0", h.metric(`toolfs_approvals_total{decision="reject",via="approvals"}`))
}

// TestEscalationGrantedModeStillFences: approved to workspace-write, a write
// outside the cwd is denied under the granted mode.
func TestEscalationGrantedModeStillFences(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	require.NoError(t, os.Mkdir(filepath.Join(h.srv.Root, "ws"), 0o755))
	answer := h.async("write", "ws", map[string]any{"file_path": "../b.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "")[0]
	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
	r := wait(t, answer)
	require.Equal(t, http.StatusForbidden, r.Status, r.Body)
	assert.Equal(t, deniedText("workspace-write"), r.Output)
	_, err := os.Stat(filepath.Join(h.srv.Root, "b.txt"))
	assert.True(t, os.IsNotExist(err))
}

// TestEscalationRejected: a rejection answers the original's text and
// writes nothing.
func TestEscalationRejected(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceWorkspaceWrite})
	require.NoError(t, os.Mkdir(filepath.Join(h.srv.Root, "ws"), 0o755))
	answer := h.async("write", "ws", map[string]any{"file_path": "../top.txt", "content": "x",
		"sandbox_permissions": "danger-full-access", "justification": "The config lives at the root."})
	a := h.pending(1, "")[0]
	assert.Equal(t, "escalate sandbox to danger-full-access: The config lives at the root.", a.Reason)
	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "reject", "").Status)
	r := wait(t, answer)
	require.Equal(t, http.StatusForbidden, r.Status, r.Body)
	assert.Equal(t, "ESCALATION_DENIED", r.Code)
	assert.Equal(t, `Error: the user rejected escalating this operation to "danger-full-access"`, r.Output)
	_, err := os.Stat(filepath.Join(h.srv.Root, "top.txt"))
	assert.True(t, os.IsNotExist(err))
	assert.Equal(t, "1", h.metric(`toolfs_approvals_total{decision="reject",via="approvals"}`))
}

// TestEscalationTimeout: a request nobody decides is cancelled after
// --approval-timeout; a late decision is 409.
func TestEscalationTimeout(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly, timeout: 300 * time.Millisecond})
	answer := h.async("write", "", map[string]any{"file_path": "a.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "")[0]
	r := wait(t, answer)
	require.Equal(t, http.StatusForbidden, r.Status, r.Body)
	assert.Equal(t, "ESCALATION_DENIED", r.Code)
	assert.Equal(t, `Error: approval for escalating to "workspace-write" was cancelled`, r.Output)
	_, l := h.list("", "")
	assert.Empty(t, l.Approvals)
	late := h.decide(a.ID, "approve", "")
	assert.Equal(t, http.StatusConflict, late.Status)
	assert.Equal(t, "APPROVAL_NOT_PENDING", late.Code)
	assert.Equal(t, "1", h.metric(`toolfs_approvals_total{decision="timeout",via="approvals"}`))
	_, err := os.Stat(filepath.Join(h.srv.Root, "a.txt"))
	assert.True(t, os.IsNotExist(err))
}

// TestEscalationCallerGone: when the caller disconnects, its approval
// disappears from GET /approvals and counts as cancelled.
func TestEscalationCallerGone(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.toolCtx(ctx, "write", "", map[string]any{"file_path": "a.txt", "content": "x",
			"sandbox_permissions": "danger-full-access", "justification": "j"})
		done <- err
	}()
	a := h.pending(1, "")[0]
	cancel()
	require.Error(t, <-done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, l := h.list("", "")
		if len(l.Approvals) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the approval outlived its call")
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, http.StatusConflict, h.decide(a.ID, "approve", "").Status)
	assert.Equal(t, "1", h.metric(`toolfs_approvals_total{decision="cancelled",via="approvals"}`))
	_, err := os.Stat(filepath.Join(h.srv.Root, "a.txt"))
	assert.True(t, os.IsNotExist(err), "nothing is granted without a decision")
}

// TestEscalationWithoutChannel: --approvals=false denies every escalation
// at once with the original's text.
func TestEscalationWithoutChannel(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly, noApprovals: true})
	r := h.tool("write", "", map[string]any{"file_path": "a.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	require.Equal(t, http.StatusForbidden, r.Status, r.Body)
	assert.Equal(t, "ESCALATION_DENIED", r.Code)
	assert.Equal(t, `Error: sandbox escalation to "workspace-write" requires approval, but no approval channel is available`, r.Output)
	_, l := h.list("", "")
	assert.Empty(t, l.Approvals)
}

// TestApproverToken: with --approver-token only that token decides; the
// agent's token lists but gets 403 on a decision; no token is 401; the
// approver token reaches nothing but the approvals.
func TestApproverToken(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly, token: "agent", approverToken: "person"})
	answer := h.async("write", "", map[string]any{"file_path": "a.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "person")[0]

	status, l := h.list("", "agent")
	assert.Equal(t, http.StatusOK, status)
	assert.Len(t, l.Approvals, 1)
	status, _ = h.list("", "")
	assert.Equal(t, http.StatusUnauthorized, status, "with --token the approvals need a token")

	r := h.decide(a.ID, "approve", "agent")
	assert.Equal(t, http.StatusForbidden, r.Status)
	assert.Equal(t, "NOT_APPROVER", r.Code)
	assert.Equal(t, http.StatusUnauthorized, h.decide(a.ID, "approve", "").Status)
	assert.Equal(t, http.StatusUnauthorized, h.decide(a.ID, "approve", "wrong").Status)

	tool, err := h.request(context.Background(), http.MethodPost, "/tools/read", `{"file_path":"a.txt"}`, "person")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, tool.Status, "the approver token is for the approvals only")

	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "person").Status)
	r = wait(t, answer)
	require.Equal(t, http.StatusOK, r.Status, r.Body)
	assert.Equal(t, "x", h.contents("a.txt"))
}

// TestApproverTokenWithoutAgentToken: without --token the tools are open,
// but deciding still needs the approver token.
func TestApproverTokenWithoutAgentToken(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly, approverToken: "person"})
	answer := h.async("write", "", map[string]any{"file_path": "a.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "")[0]
	assert.Equal(t, http.StatusUnauthorized, h.decide(a.ID, "approve", "").Status)
	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "reject", "person").Status)
	assert.Equal(t, http.StatusForbidden, wait(t, answer).Status)
}

// TestApprovalsBound: past --max-approvals an escalation asks nobody and
// answers 503 TOO_MANY_APPROVALS.
func TestApprovalsBound(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly, max: 2})
	esc := func(name string) map[string]any {
		return map[string]any{"file_path": name, "content": "x", "sandbox_permissions": "workspace-write", "justification": "j"}
	}
	first, second := h.async("write", "", esc("1.txt")), h.async("write", "", esc("2.txt"))
	pending := h.pending(2, "")
	r := h.tool("write", "", esc("3.txt"))
	require.Equal(t, http.StatusServiceUnavailable, r.Status, r.Body)
	assert.Equal(t, "TOO_MANY_APPROVALS", r.Code)
	assert.Equal(t, "Error: cannot ask for approval: 2 approvals are pending already; retry once a person has decided them", r.Output)
	for _, a := range pending {
		require.Equal(t, http.StatusNoContent, h.decide(a.ID, "reject", "").Status)
	}
	assert.Equal(t, http.StatusForbidden, wait(t, first).Status)
	assert.Equal(t, http.StatusForbidden, wait(t, second).Status)
}

// TestApprovalsEndpoints: the long poll's cursor, the wait bound and the
// decision body's checks.
func TestApprovalsEndpoints(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	status, l := h.list("", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, approvalList{Approvals: []approval.Approval{}, Cursor: 0}, l)

	start := time.Now()
	status, l = h.list("?wait=200ms", "")
	assert.Equal(t, http.StatusOK, status)
	assert.Empty(t, l.Approvals)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	answer := h.async("write", "", map[string]any{"file_path": "a.txt", "content": "x", "sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "")[0]
	_, l = h.list("", "")
	require.Equal(t, uint64(1), l.Cursor)
	// Nothing newer than the cursor: the wait runs out and lists what is
	// pending.
	start = time.Now()
	_, l2 := h.list("?wait=200ms&after=1", "")
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	assert.Equal(t, l, l2)

	for _, q := range []string{"?wait=61s", "?wait=-1s", "?wait=soon"} {
		r, err := h.request(context.Background(), http.MethodGet, "/approvals"+q, "", "")
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, r.Status, q)
		assert.Equal(t, "Error: wait must be a duration between 0s and 60s, such as 30s", r.Output, q)
	}
	for _, body := range []string{`{"decision":"maybe"}`, `{}`, `{"decision":"approve","x":1}`, `not json`} {
		r, err := h.request(context.Background(), http.MethodPost, "/approvals/"+a.ID, body, "")
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, r.Status, body)
		assert.Equal(t, `Error: request body must be {"decision": "approve"} or {"decision": "reject"}`, r.Output, body)
	}
	r := h.decide("no-such-id", "approve", "")
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, "APPROVAL_NOT_FOUND", r.Code)
	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "reject", "").Status)
	wait(t, answer)
}

// TestEscalationRootBoundaryWhenApproved: danger-full-access, approved,
// still cannot leave the root: a folder swapped for a link to outside the
// root while the call waited is refused by the provider's fresh walk.
func TestEscalationRootBoundaryWhenApproved(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	outside := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(h.srv.Root, "d"), 0o755))
	answer := h.async("write", "", map[string]any{"file_path": "d/f.txt", "content": "x",
		"sandbox_permissions": "danger-full-access", "justification": "j"})
	a := h.pending(1, "")[0]
	require.NoError(t, os.Remove(filepath.Join(h.srv.Root, "d")))
	require.NoError(t, os.Symlink(outside, filepath.Join(h.srv.Root, "d")))
	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
	r := wait(t, answer)
	require.Equal(t, http.StatusForbidden, r.Status, r.Body)
	assert.Equal(t, "FS_SANDBOX_DENIED", r.Code)
	_, err := os.Stat(filepath.Join(outside, "f.txt"))
	assert.True(t, os.IsNotExist(err), "nothing written outside the root")
}

// TestEscalationOutlivesReadTimeout: a call waiting for a person longer
// than the server's ReadTimeout (2m in cmd/toolfs-api, under the 5m
// --approval-timeout) is not cancelled by it: net/http clears the read
// deadline once the body is read and it watches the connection for a
// disconnect.
func TestEscalationOutlivesReadTimeout(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	o := sbServerOptions(sbOptions{mode: tools.FenceReadOnly})
	o.Root = root
	s, err := server.New(o, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	hs := httptest.NewUnstartedServer(s.Handler)
	hs.Config.ReadTimeout = 300 * time.Millisecond
	hs.Start()
	t.Cleanup(hs.Close)
	h := &sb{t: t, srv: &servertest.Server{Server: s, URL: hs.URL}}

	answer := h.async("write", "", map[string]any{"file_path": "a.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "")[0]
	time.Sleep(time.Second) // past ReadTimeout
	_, l := h.list("", "")
	require.Len(t, l.Approvals, 1, "the call is still waiting")
	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
	r := wait(t, answer)
	require.Equal(t, http.StatusOK, r.Status, r.Body)
}

// TestEscalationCountsOnce: concurrent decisions on one approval: exactly
// one wins, the call runs once.
func TestEscalationCountsOnce(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	answer := h.async("write", "", map[string]any{"file_path": "a.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "")[0]
	var wg sync.WaitGroup
	statuses := make(chan int, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- h.decide(a.ID, "approve", "").Status
		}()
	}
	wg.Wait()
	close(statuses)
	won := 0
	for s := range statuses {
		if s == http.StatusNoContent {
			won++
		} else {
			assert.Equal(t, http.StatusNotFound, s)
		}
	}
	assert.Equal(t, 1, won)
	require.Equal(t, http.StatusOK, wait(t, answer).Status)
	assert.Equal(t, "1", h.metric(`toolfs_approvals_total{decision="approve",via="approvals"}`))
	assert.Equal(t, `1`, h.metric(`toolfs_tool_calls_total{code="ok",tool="write",transport="rest"}`))
}

// TestApprovalInTheChangeFeed: a pending approval is published on GET
// /events as {type: "approval", path, session, approval}, filtered by
// session like any event.
func TestApprovalInTheChangeFeed(t *testing.T) {
	o := sbServerOptions(sbOptions{mode: tools.FenceReadOnly})
	o.Events.Enabled = true
	srv := servertest.Start(t, o)
	h := &sb{t: t, srv: srv}
	f := &feed{harness: &harness{t: t, root: srv.Root, srv: srv}}
	mine, other := f.subscribe("?session=s"), f.subscribe("?session=someone-else")
	require.Equal(t, http.StatusOK, mine.resp.StatusCode)

	answer := h.async("write", "", map[string]any{"file_path": "d/a.txt", "content": "x",
		"sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "")[0]
	created, err := json.Marshal(a.Created)
	require.NoError(t, err)
	expires, err := json.Marshal(a.Expires)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"approval","path":"d/a.txt","session":"s","approval":{"id":"`+a.ID+`","session":"s","tool":"write","path":"`+filepath.Join(srv.Root, "d/a.txt")+`","mode":"workspace-write","reason":"escalate sandbox to workspace-write: j",`+
		`"diff":"--- `+filepath.Join(srv.Root, "d/a.txt")+`\n+++ `+filepath.Join(srv.Root, "d/a.txt")+`\n@@ -0,0 +1,1 @@\n+x","truncated":false,"created":`+string(created)+`,"expires":`+string(expires)+`}}`, mine.next())
	other.quiet(200 * time.Millisecond)

	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
	require.Equal(t, http.StatusOK, wait(t, answer).Status)
	assert.Contains(t, mine.next(), `"type":"write","path":"d/a.txt"`)
}

// TestApprovalAnswersMatchTheContract validates the approvals endpoints'
// answers, and the escalation's problems, against api/openapi.yaml.
func TestApprovalAnswersMatchTheContract(t *testing.T) {
	c := loadContract(t)
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly, token: "agent", approverToken: "person", max: 1, timeout: 2 * time.Second})
	send := func(name, method, path, body, auth string, status int) {
		t.Helper()
		req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("X-Session-ID", "s")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, status, resp.StatusCode, "%s: %s", name, raw)
		req.Body = io.NopCloser(strings.NewReader(""))
		c.check(t, name, req, resp, raw)
	}
	send("list empty", "GET", "/approvals", "", "person", 200)
	send("list waited", "GET", "/approvals?wait=10ms&after=0", "", "agent", 200)
	send("fence", "POST", "/tools/write", `{"file_path":"a.txt","content":"x"}`, "agent", 403)
	esc := `{"file_path":"a.txt","content":"x","sandbox_permissions":"workspace-write","justification":"j"}`
	first := h.async("write", "", map[string]any{"file_path": "a.txt", "content": "x", "sandbox_permissions": "workspace-write", "justification": "j"})
	a := h.pending(1, "person")[0]
	send("list pending", "GET", "/approvals", "", "person", 200)
	send("bound", "POST", "/tools/write", esc, "agent", 503)
	send("decision body", "POST", "/approvals/"+a.ID, `{"decision":"yes"}`, "person", 400)
	send("not approver", "POST", "/approvals/"+a.ID, `{"decision":"approve"}`, "agent", 403)
	send("unauthorized", "POST", "/approvals/"+a.ID, `{"decision":"approve"}`, "wrong", 401)
	send("decide", "POST", "/approvals/"+a.ID, `{"decision":"reject"}`, "person", 204)
	send("decided", "POST", "/approvals/"+a.ID, `{"decision":"reject"}`, "person", 404)
	require.Equal(t, http.StatusForbidden, wait(t, first).Status)
	timedOut := h.async("write", "", map[string]any{"file_path": "b.txt", "content": "x", "sandbox_permissions": "workspace-write", "justification": "j"})
	b := h.pending(1, "person")[0]
	r := wait(t, timedOut)
	require.Equal(t, http.StatusForbidden, r.Status)
	send("not pending", "POST", "/approvals/"+b.ID, `{"decision":"approve"}`, "person", 409)
	send("escalation argument", "POST", "/tools/write", `{"file_path":"a.txt","content":"x","sandbox_permissions":"danger-full-access","justification":"   "}`, "agent", 400)
}

// TestEditLinesFencedAndApproved: edit_lines is fenced as edit is, and its
// escalation shows a person the change (its dry run's diff) and runs it
// once approved (SPEC §24: one pipeline for every change).
func TestEditLinesFencedAndApproved(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	h.file("ws/a.txt", "one\ntwo\n")
	require.Equal(t, http.StatusOK, h.tool("read", "ws", map[string]any{"file_path": "a.txt"}).Status)
	edits := []any{map[string]any{"op": "replace", "start": "2#PM", "text": "TWO"}}
	r := h.tool("edit_lines", "ws", map[string]any{"file_path": "a.txt", "edits": edits})
	require.Equal(t, http.StatusForbidden, r.Status)
	assert.Equal(t, deniedText("read-only"), r.Output)

	answer := h.async("edit_lines", "ws", map[string]any{"file_path": "a.txt", "edits": edits,
		"sandbox_permissions": "workspace-write", "justification": "The user asked to fix line two."})
	a := h.pending(1, "")[0]
	assert.Equal(t, "edit_lines", a.Tool)
	assert.Contains(t, a.Diff, "-two\n+TWO")
	assert.Equal(t, "one\ntwo\n", h.contents("ws/a.txt"), "nothing runs before the decision")
	require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
	r = wait(t, answer)
	require.Equal(t, http.StatusOK, r.Status, r.Body)
	assert.Equal(t, "The file "+filepath.Join(h.srv.Root, "ws/a.txt")+" has been updated successfully.\nLines 2-2 now:\n"+anchor(2, "TWO")+": TWO", r.Output)
	assert.Equal(t, "one\nTWO\n", h.contents("ws/a.txt"))
}
