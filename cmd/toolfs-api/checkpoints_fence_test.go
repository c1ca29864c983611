package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A revert is fenced by the sandbox mode as a write of each file it
// restores is (docs/sandbox.md, SPEC §24): the session's changes are made
// on a server without a fence, which is then restarted on the same root
// under one (the history survives restarts).

// fenceDenial is the original tool-fs's denial under mode, byte for byte.
func fenceDenial(mode string) string {
	return "Error: [sandbox: file access denied under " + mode + " mode]\n" +
		"[sandbox: escalation available \u2014 retry this exact operation once with sandbox_permissions " +
		"(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
}

type problemReply struct {
	Code   string   `json:"code"`
	Output string   `json:"output"`
	Paths  []string `json:"paths"`
}

func problemOf(t *testing.T, a answer) problemReply {
	t.Helper()
	var p problemReply
	require.NoError(t, json.Unmarshal([]byte(a.body), &p), a.body)
	return p
}

// agentSession makes session s create in/a.txt and out/b.txt and edit
// kept.txt on a server without a fence, and returns the root and the
// files as they are after it.
func agentSession(t *testing.T) (string, map[string]string) {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "kept.txt"), []byte("before\n"), 0o644))
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root})
	mustCall(t, "POST", base+"/tools/write", "s", jsonBody(map[string]any{"file_path": "in/a.txt", "content": "a\n"}))
	mustCall(t, "POST", base+"/tools/write", "s", jsonBody(map[string]any{"file_path": "out/b.txt", "content": "b\n"}))
	mustCall(t, "POST", base+"/tools/read", "s", `{"file_path":"kept.txt"}`)
	mustCall(t, "POST", base+"/tools/edit", "s", `{"file_path":"kept.txt","old_string":"before","new_string":"after"}`)
	stop()
	return root, tree(t, root)
}

// tree is every file under root with its content, the private folder
// (the history, the kept contents) included.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(root, p)
			if !strings.HasPrefix(rel, ".toolfs-api/checkpoints/locks/") && !strings.HasPrefix(rel, ".toolfs-api/locks") {
				out[rel] = string(b)
			}
		}
		return nil
	}))
	return out
}

// Under read-only every revert that would restore a file is 403
// FS_SANDBOX_DENIED with the original's text, a dry run too, over REST
// and over MCP, and nothing on disk changes, not even the history.
func TestRevertFencedReadOnly(t *testing.T) {
	root, after := agentSession(t)
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--sandbox-mode", "read-only"})
	defer stop()

	for _, body := range []string{`{"to":0}`, `{"to":2}`, `{"to":0,"dry_run":true}`} {
		a := call(t, "POST", base+"/sessions/s/revert", "", body)
		assert.Equal(t, 403, a.status, body)
		p := problemOf(t, a)
		assert.Equal(t, "FS_SANDBOX_DENIED", p.Code, body)
		assert.Equal(t, fenceDenial("read-only"), p.Output, body)
	}
	text, isErr := mcpText(t, base, "", "revert", map[string]any{"to": 0}, "X-Session-ID", "s")
	assert.True(t, isErr)
	assert.Equal(t, fenceDenial("read-only"), text)
	assert.Equal(t, after, tree(t, root), "nothing on disk changed")

	// Nothing after to: nothing restored, nothing to fence.
	a := call(t, "POST", base+"/sessions/s/revert", "", `{"to":3}`)
	require.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, `"output":"Reverted 0 change(s) in 0 file(s)."`)
}

// Under workspace-write a revert restores files under the request's
// X-Session-Cwd only: one file outside refuses the whole revert.
func TestRevertFencedWorkspaceWrite(t *testing.T) {
	root, after := agentSession(t)
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--sandbox-mode", "workspace-write"})
	defer stop()

	a := callWith(t, "POST", base+"/sessions/s/revert", `{"to":0}`, "X-Session-Cwd", "in")
	assert.Equal(t, 403, a.status, a.body)
	assert.Equal(t, fenceDenial("workspace-write"), problemOf(t, a).Output)
	text, isErr := mcpText(t, base, "", "revert", map[string]any{"to": 0}, "X-Session-ID", "s", "X-Session-Cwd", "in")
	assert.True(t, isErr)
	assert.Equal(t, fenceDenial("workspace-write"), text)
	assert.Equal(t, after, tree(t, root), "nothing on disk changed")

	// Without a cwd the fence is the root, as for a write.
	a = callWith(t, "POST", base+"/sessions/s/revert", `{"to":0}`)
	require.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, `"output":"Reverted 3 change(s) in 3 file(s): in/a.txt, out/b.txt, kept.txt"`)
	assert.NoFileExists(t, filepath.Join(root, "in/a.txt"))
	assert.Equal(t, "before\n", readFile(t, filepath.Join(root, "kept.txt")))
}

type pendingApproval struct {
	ID      string   `json:"id"`
	Session string   `json:"session"`
	Tool    string   `json:"tool"`
	Path    string   `json:"path"`
	Paths   []string `json:"paths"`
	Mode    string   `json:"mode"`
	Reason  string   `json:"reason"`
	Diff    string   `json:"diff"`
}

// onePending waits for exactly one pending approval and returns it.
func onePending(t *testing.T, base string) pendingApproval {
	t.Helper()
	var l struct {
		Approvals []pendingApproval `json:"approvals"`
	}
	require.Eventually(t, func() bool {
		a := call(t, "GET", base+"/approvals", "", "")
		require.Equal(t, 200, a.status, a.body)
		require.NoError(t, json.Unmarshal([]byte(a.body), &l))
		return len(l.Approvals) == 1
	}, 10*time.Second, 10*time.Millisecond)
	return l.Approvals[0]
}

// An escalated revert asks a person about its whole change (tool revert,
// path its first file, paths all of them, the dry run's diffs); approved,
// it runs under the granted mode; rejected, it is ESCALATION_DENIED and
// nothing changes.
func TestRevertEscalation(t *testing.T) {
	root, after := agentSession(t)
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--sandbox-mode", "read-only"})
	defer stop()
	escalated := `{"to":0,"sandbox_permissions":"workspace-write","justification":"undo what the agent did"}`

	// Rejected.
	done := make(chan answer, 1)
	go func() { done <- call(t, "POST", base+"/sessions/s/revert", "", escalated) }()
	p := onePending(t, base)
	assert.Equal(t, pendingApproval{
		ID: p.ID, Session: "s", Tool: "revert", Path: filepath.Join(root, "in/a.txt"),
		Paths: []string{filepath.Join(root, "in/a.txt"), filepath.Join(root, "out/b.txt"), filepath.Join(root, "kept.txt")},
		Mode:  "workspace-write", Reason: "escalate sandbox to workspace-write: undo what the agent did", Diff: p.Diff,
	}, p)
	assert.Equal(t, "--- in/a.txt\n+++ in/a.txt\n@@ -1,1 +0,0 @@\n-a\n--- out/b.txt\n+++ out/b.txt\n@@ -1,1 +0,0 @@\n-b\n"+
		"--- kept.txt\n+++ kept.txt\n@@ -1,1 +1,1 @@\n-after\n+before", p.Diff, "the dry run's text after its first line")
	a := call(t, "POST", base+"/approvals/"+p.ID, "", `{"decision":"reject"}`)
	require.Equal(t, 204, a.status, a.body)
	a = <-done
	assert.Equal(t, 403, a.status, a.body)
	assert.Equal(t, problemReply{Code: "ESCALATION_DENIED", Output: `Error: the user rejected escalating this operation to "workspace-write"`}, problemOf(t, a))
	assert.Equal(t, after, tree(t, root), "nothing on disk changed")

	// Approved: it runs, under the granted mode.
	go func() { done <- call(t, "POST", base+"/sessions/s/revert", "", escalated) }()
	p = onePending(t, base)
	a = call(t, "POST", base+"/approvals/"+p.ID, "", `{"decision":"approve"}`)
	require.Equal(t, 204, a.status, a.body)
	a = <-done
	require.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, `"output":"Reverted 3 change(s) in 3 file(s): in/a.txt, out/b.txt, kept.txt"`)
	assert.NoFileExists(t, filepath.Join(root, "in/a.txt"))
	assert.NoFileExists(t, filepath.Join(root, "out/b.txt"))
	assert.Equal(t, "before\n", readFile(t, filepath.Join(root, "kept.txt")))
}

// Approved, the revert is checked again from the start: a file changed
// while the person decided refuses it (the ordinary FS_STALE_VERSION), and
// a change the session made meanwhile is not undone behind the person's
// back.
func TestRevertEscalationCheckedAgain(t *testing.T) {
	root, _ := agentSession(t)
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--sandbox-mode", "workspace-write"})
	defer stop()
	escalated := `{"to":0,"sandbox_permissions":"danger-full-access","justification":"undo what the agent did"}`

	done := make(chan answer, 1)
	go func() {
		done <- callWith(t, "POST", base+"/sessions/s/revert", escalated, "X-Session-Cwd", "in")
	}()
	p := onePending(t, base)
	require.NoError(t, os.WriteFile(filepath.Join(root, "out/b.txt"), []byte("a person's edit\n"), 0o644))
	a := call(t, "POST", base+"/approvals/"+p.ID, "", `{"decision":"approve"}`)
	require.Equal(t, 204, a.status, a.body)
	a = <-done
	assert.Equal(t, 409, a.status, a.body)
	assert.Equal(t, problemReply{Code: "FS_STALE_VERSION", Paths: []string{"out/b.txt"},
		Output: "Error: cannot revert: these files changed since this session's last change to them: out/b.txt"}, problemOf(t, a))
	assert.Equal(t, "a\n", readFile(t, filepath.Join(root, "in/a.txt")), "nothing restored")

	// The session writes another file while a person decides.
	require.NoError(t, os.WriteFile(filepath.Join(root, "out/b.txt"), []byte("b\n"), 0o644))
	go func() {
		done <- callWith(t, "POST", base+"/sessions/s/revert", escalated, "X-Session-Cwd", "in")
	}()
	p = onePending(t, base)
	a = callWith(t, "POST", base+"/tools/write", jsonBody(map[string]any{"file_path": "c.txt", "content": "c\n"}), "X-Session-ID", "s", "X-Session-Cwd", "in")
	require.Equal(t, 200, a.status, a.body)
	a = call(t, "POST", base+"/approvals/"+p.ID, "", `{"decision":"approve"}`)
	require.Equal(t, 204, a.status, a.body)
	a = <-done
	assert.Equal(t, 409, a.status, a.body)
	assert.Equal(t, []string{"in/c.txt"}, problemOf(t, a).Paths)
	assert.Equal(t, "c\n", readFile(t, filepath.Join(root, "in/c.txt")), "what the person did not see is not undone")
	assert.Equal(t, "a\n", readFile(t, filepath.Join(root, "in/a.txt")))
}

// Under a fence the MCP revert tool advertises the escalation arguments,
// with write's descriptions; without one it does not.
func TestRevertToolEscalationArguments(t *testing.T) {
	for _, mode := range []string{"off", "read-only"} {
		base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", t.TempDir(), "--sandbox-mode", mode})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx,
			&mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1}, nil)
		require.NoError(t, err)
		res, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		schemas := map[string]string{}
		for _, tl := range res.Tools {
			b, _ := json.Marshal(tl.InputSchema)
			schemas[tl.Name] = string(b)
		}
		cs.Close()
		cancel()
		stop()
		var revert, write struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(t, json.Unmarshal([]byte(schemas["revert"]), &revert))
		require.NoError(t, json.Unmarshal([]byte(schemas["write"]), &write))
		if mode == "off" {
			assert.NotContains(t, revert.Properties, "sandbox_permissions")
			continue
		}
		for _, name := range []string{"sandbox_permissions", "justification"} {
			require.Contains(t, revert.Properties, name)
			assert.JSONEq(t, string(write.Properties[name]), string(revert.Properties[name]), name)
		}
	}
}
