package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// The change pipeline through the whole server (SPEC §24,
// docs/architecture.md "The change pipeline"): every change is fenced,
// recorded, audited and published by the same lines, whatever the
// operation.

// msgReadOnlyDenied is the fence's refusal under read-only, byte for byte
// (docs/sandbox.md).
const msgReadOnlyDenied = "[sandbox: file access denied under read-only mode]\n" +
	"[sandbox: escalation available \u2014 retry this exact operation once with sandbox_permissions " +
	"(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"

type problemBody struct {
	Code   string   `json:"code"`
	Output string   `json:"output"`
	Paths  []string `json:"paths"`
}

func problemOf(t *testing.T, a answer) problemBody {
	t.Helper()
	var p problemBody
	require.NoError(t, json.Unmarshal([]byte(a.body), &p), a.body)
	return p
}

// post sends a JSON body in session ("" = none).
func post(t *testing.T, url, session, body string) answer {
	t.Helper()
	h := []string{"Content-Type", "application/json"}
	if session != "" {
		h = append(h, "X-Session-ID", session)
	}
	return send(t, "POST", url, "", body, h...)
}

// TestRevertIsFenced: the sandbox mode fences a revert as it fences a
// write: a history written by a server without a fence is not reverted by
// one under read-only (403 with the fence's text), and nothing changes.
func TestRevertIsFenced(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	open := servertest.Start(t, server.Config{Root: root, Policy: policy.Settings{Enabled: true}, Checkpoints: checkpoint.Settings{Enabled: true}})
	a := post(t, open.URL+"/tools/write", "s", `{"file_path":"a.txt","content":"agent\n"}`)
	require.Equal(t, 200, a.status, a.body)
	open.Shutdown(context.Background())

	fenced := servertest.Start(t, server.Config{Root: root, Policy: policy.Settings{Enabled: true}, Checkpoints: checkpoint.Settings{Enabled: true}, Tools: tools.Settings{SandboxMode: "read-only"}})
	a = post(t, fenced.URL+"/sessions/s/revert", "", `{"to":0}`)
	require.Equal(t, 403, a.status, a.body)
	p := problemOf(t, a)
	assert.Equal(t, "FS_SANDBOX_DENIED", p.Code)
	assert.Equal(t, "Error: "+msgReadOnlyDenied, p.Output)
	b, err := os.ReadFile(filepath.Join(root, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "agent\n", string(b), "nothing reverted")

	// A dry run is judged as the revert it shows.
	a = post(t, fenced.URL+"/sessions/s/revert", "", `{"to":0,"dry_run":true}`)
	assert.Equal(t, 403, a.status, a.body)
}

// etagOf downloads a file's ETag.
func etagOf(t *testing.T, base, rel string) string {
	t.Helper()
	a := send(t, "GET", base+"/files/"+rel, "", "")
	require.Equal(t, 200, a.status, a.body)
	return a.header.Get("ETag")
}

type historyBody struct {
	Output  string `json:"output"`
	Changes []struct {
		Seq  int64  `json:"seq"`
		Tool string `json:"tool"`
		Path string `json:"path"`
	} `json:"changes"`
}

func historyOf(t *testing.T, base, session string) historyBody {
	t.Helper()
	a := send(t, "GET", base+"/sessions/"+session+"/changes", "", "")
	require.Equal(t, 200, a.status, a.body)
	var h historyBody
	require.NoError(t, json.Unmarshal([]byte(a.body), &h))
	return h
}

// TestUploadsAndDeletesInHistory: an upload or delete through /files that
// names a session (X-Session-ID, or the default session) is a change of
// that session's history, and its revert restores the file replaced,
// recreates the file deleted with its bytes and mode, and removes the file
// uploaded new.
func TestUploadsAndDeletesInHistory(t *testing.T) {
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Checkpoints: checkpoint.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}})
	path := func(rel string) string { return filepath.Join(srv.Root, rel) }
	require.NoError(t, os.WriteFile(path("over.txt"), []byte("old\n"), 0o644))
	require.NoError(t, os.WriteFile(path("keep.txt"), []byte("kept\x00bytes\n"), 0o640))
	require.NoError(t, os.Chmod(path("keep.txt"), 0o640))

	a := send(t, "PUT", srv.URL+"/files/new.txt", "", "new\n", "X-Session-ID", "s")
	require.Equal(t, 201, a.status, a.body)
	a = send(t, "PUT", srv.URL+"/files/over.txt", "", "replaced\n", "X-Session-ID", "s", "If-Match", etagOf(t, srv.URL, "over.txt"))
	require.Equal(t, 200, a.status, a.body)
	a = send(t, "DELETE", srv.URL+"/files/keep.txt", "", "", "X-Session-ID", "s", "If-Match", etagOf(t, srv.URL, "keep.txt"))
	require.Equal(t, 204, a.status, a.body)

	h := historyOf(t, srv.URL, "s")
	assert.Equal(t, "Changes of this session, newest first (revert with to = the seq to go back to; 0 undoes them all):\n"+
		"3 delete keep.txt (removed)\n2 upload over.txt\n1 upload new.txt (created)", h.Output)

	a = post(t, srv.URL+"/sessions/s/revert", "", `{"to":0}`)
	require.Equal(t, 200, a.status, a.body)
	assert.NoFileExists(t, path("new.txt"))
	b, err := os.ReadFile(path("over.txt"))
	require.NoError(t, err)
	assert.Equal(t, "old\n", string(b))
	b, err = os.ReadFile(path("keep.txt"))
	require.NoError(t, err)
	assert.Equal(t, "kept\x00bytes\n", string(b))
	st, err := os.Stat(path("keep.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), st.Mode().Perm(), "recreated with its mode")

	// Without a session header, the default session's history.
	a = send(t, "PUT", srv.URL+"/files/d.txt", "", "d\n")
	require.Equal(t, 201, a.status, a.body)
	assert.Contains(t, historyOf(t, srv.URL, "default").Output, "1 upload d.txt (created)")
}
