package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpText runs one tool call in a new MCP connection on version ("" = the
// SDK's newest, sessionless revision) with headers, and returns its one
// text block and whether it is an error.
func mcpText(t *testing.T, base, version, tool string, args map[string]any, headers ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx,
		&mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: headerTransport(h)}, MaxRetries: -1},
		&mcpsdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	defer cs.Close()
	if version != "" {
		require.NotEmpty(t, cs.ID(), "a revision with protocol sessions")
	}
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	return res.Content[0].(*mcpsdk.TextContent).Text, res.IsError
}

type headerTransport http.Header

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestDefaultSessionEverywhere pins docs/api.md, "Sessions": with the
// binary's defaults a request that names no session is in the session
// "default", on REST, /model and /mcp alike, so a client that can send
// nothing of its own reads and then edits; an MCP client on a revision with
// protocol sessions still has its own; a header always wins.
func TestDefaultSessionEverywhere(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "a.txt")
	require.NoError(t, os.WriteFile(file, []byte("one\n"), 0o644))
	base, _ := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root})
	edit := func(from, to string) string {
		return `{"file_path":"a.txt","old_string":"` + from + `","new_string":"` + to + `"}`
	}

	require.Equal(t, 200, call(t, "POST", base+"/tools/read", "", `{"file_path":"a.txt"}`).status)
	got := call(t, "POST", base+"/tools/edit", "", edit("one", "two"))
	require.Equal(t, 200, got.status, got.body)
	got = call(t, "POST", base+"/model/edit", "", edit("two", "three"))
	require.Equal(t, 200, got.status, got.body)
	assert.Equal(t, "The file "+file+" has been updated successfully.", got.body)

	// A sessionless MCP revision (2026-07-28): the same default session.
	text, isErr := mcpText(t, base, "", "edit", map[string]any{"file_path": "a.txt", "old_string": "three", "new_string": "four"})
	require.False(t, isErr, text)
	text, isErr = mcpText(t, base, "", "read", map[string]any{"file_path": "a.txt"})
	require.False(t, isErr, text)
	assert.Contains(t, text, "1: four\n")

	// A protocol session is its own policy session: it never read a.txt.
	text, isErr = mcpText(t, base, "2025-11-25", "edit", map[string]any{"file_path": "a.txt", "old_string": "four", "new_string": "five"})
	assert.True(t, isErr)
	assert.Equal(t, `Error: edit requires reading "`+file+`" first — read the file, then retry`, text)

	// A header always wins over the default, on every transport.
	got = call(t, "POST", base+"/tools/edit", "someone", edit("four", "five"))
	assert.Equal(t, 409, got.status, got.body)
	assert.Contains(t, got.body, `"code":"FS_NOT_OBSERVED"`)
	text, isErr = mcpText(t, base, "", "edit", map[string]any{"file_path": "a.txt", "old_string": "four", "new_string": "five"}, "X-Session-ID", "someone")
	assert.True(t, isErr)
	assert.Equal(t, `Error: edit requires reading "`+file+`" first — read the file, then retry`, text)

	// DELETE forgets the default session like any other.
	require.Equal(t, 204, call(t, "DELETE", base+"/sessions/default", "", "").status)
	got = call(t, "POST", base+"/tools/edit", "", edit("four", "five"))
	assert.Equal(t, 409, got.status, got.body)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "four\n", string(b))
}

// TestDefaultSessionFlag: --default-session names the session a request
// without one is in; it is an ordinary session id that a header may name.
func TestDefaultSessionFlag(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	base, _ := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--default-session", "other"})
	require.Equal(t, 200, call(t, "POST", base+"/tools/read", "", `{"file_path":"a.txt"}`).status)
	got := call(t, "POST", base+"/tools/edit", "default", `{"file_path":"a.txt","old_string":"one","new_string":"two"}`)
	assert.Equal(t, 409, got.status, "default is no longer the default: %s", got.body)
	got = call(t, "POST", base+"/tools/edit", "other", `{"file_path":"a.txt","old_string":"one","new_string":"two"}`)
	assert.Equal(t, 200, got.status, got.body)
}

// TestRequireSession: --require-session restores the strict rule: a read
// without a session answers and records nothing; a write or edit is 400
// INVALID_SESSION with the message that says how to send one, on REST,
// /model and /mcp; a sessionful MCP client still has its own session.
func TestRequireSession(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "a.txt")
	require.NoError(t, os.WriteFile(file, []byte("one\n"), 0o644))
	base, _ := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--require-session"})
	const msg = "Error: write and edit need a session while the read-before-write policy is on: send the X-Session-ID header " +
		"(1-128 characters of A-Za-z0-9._:-) and read the file in that session first; operators can name a frontend's own id header " +
		"with --session-headers or set --default-session"
	body := `{"file_path":"a.txt","old_string":"one","new_string":"two"}`

	require.Equal(t, 200, call(t, "POST", base+"/tools/read", "", `{"file_path":"a.txt"}`).status)
	got := call(t, "POST", base+"/tools/edit", "", body)
	assert.Equal(t, 400, got.status)
	assert.Contains(t, got.body, `"code":"INVALID_SESSION"`)
	assert.Contains(t, got.body, `"output":"`+strings.ReplaceAll(msg, `"`, `\"`)+`"`)
	got = call(t, "POST", base+"/model/write", "", `{"file_path":"new.txt","content":"x"}`)
	assert.Equal(t, 400, got.status)
	assert.Equal(t, msg, got.body)
	text, isErr := mcpText(t, base, "", "edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"})
	assert.True(t, isErr)
	assert.Equal(t, msg, text)
	got = call(t, "GET", base+"/metrics", "", "")
	assert.Contains(t, got.body, "\ntoolfs_sessions 0\n", "a read without a session recorded nothing")

	// With a header, or a protocol session, everything works as before.
	require.Equal(t, 200, call(t, "POST", base+"/tools/read", "s", `{"file_path":"a.txt"}`).status)
	got = call(t, "POST", base+"/tools/edit", "s", body)
	assert.Equal(t, 200, got.status, got.body)
	text, isErr = mcpText(t, base, "2025-11-25", "write", map[string]any{"file_path": "b.txt", "content": "b\n"})
	assert.False(t, isErr, text)
	_, err := os.Stat(filepath.Join(root, "new.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
