package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
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
	open := servertest.Start(t, server.Config{Root: root, Policy: true, Checkpoints: true})
	a := post(t, open.URL+"/tools/write", "s", `{"file_path":"a.txt","content":"agent\n"}`)
	require.Equal(t, 200, a.status, a.body)
	open.Shutdown(context.Background())

	fenced := servertest.Start(t, server.Config{Root: root, Policy: true, Checkpoints: true, SandboxMode: "read-only"})
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
