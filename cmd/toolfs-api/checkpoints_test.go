package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The checkpoints through the whole server (docs/checkpoints.md): the
// history a session's writes and edits leave, reverts to a seq and of
// everything, a revert of a revert, a dry run that writes nothing, and the
// history after a restart of the server on the same root.

type listedChange struct {
	Seq        int64  `json:"seq"`
	Tool       string `json:"tool"`
	Path       string `json:"path"`
	Revertible bool   `json:"revertible"`
	Reason     string `json:"reason"`
	Added      *int   `json:"added"`
}

func changesOf(t *testing.T, base, session string) []listedChange {
	t.Helper()
	a := call(t, "GET", base+"/sessions/"+session+"/changes", "", "")
	require.Equal(t, 200, a.status, a.body)
	var res struct {
		Output  string         `json:"output"`
		Changes []listedChange `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &res))
	return res.Changes
}

func mustCall(t *testing.T, method, url, session, body string) string {
	t.Helper()
	a := call(t, method, url, session, body)
	require.Equal(t, 200, a.status, "%s %s: %s", method, url, a.body)
	return a.body
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestCheckpointsThroughTheServer(t *testing.T) {
	root := t.TempDir()
	crlf := "one\r\ntwo\r\nthree" // CRLF, no final newline
	require.NoError(t, os.WriteFile(filepath.Join(root, "b.txt"), []byte(crlf), 0o644))
	args := []string{"--addr", "127.0.0.1:0", "--root", root}
	base, stop := startRun(t, args)
	const s = "agent-1"

	mustCall(t, "POST", base+"/tools/write", s, jsonBody(map[string]any{"file_path": "a.txt", "content": "new file\n"}))
	mustCall(t, "POST", base+"/tools/read", s, `{"file_path":"b.txt"}`)
	mustCall(t, "POST", base+"/tools/edit", s, `{"file_path":"b.txt","old_string":"two","new_string":"TWO"}`)
	mustCall(t, "POST", base+"/tools/edit", s, `{"file_path":"b.txt","edits":[{"old_string":"one","new_string":"1"},{"old_string":"three","new_string":"3"}]}`)
	mustCall(t, "POST", base+"/model/write", s, jsonBody(map[string]any{"file_path": "sub/c.txt", "content": "c"}))
	afterAgent := readFile(t, filepath.Join(root, "b.txt"))
	assert.Equal(t, "1\r\nTWO\r\n3", afterAgent)

	cs := changesOf(t, base, s)
	require.Len(t, cs, 4)
	assert.Equal(t, []string{"sub/c.txt", "b.txt", "b.txt", "a.txt"}, []string{cs[0].Path, cs[1].Path, cs[2].Path, cs[3].Path})
	assert.Equal(t, []int64{4, 3, 2, 1}, []int64{cs[0].Seq, cs[1].Seq, cs[2].Seq, cs[3].Seq})
	assert.Equal(t, "edit", cs[1].Tool)
	require.NotNil(t, cs[1].Added)
	assert.Equal(t, 2, *cs[1].Added)

	// A dry run writes nothing, and shows each file's diff.
	dry := mustCall(t, "POST", base+"/sessions/"+s+"/revert", "", `{"to":2,"dry_run":true}`)
	assert.Contains(t, dry, "Dry run: no changes were written. Reverting would undo 2 change(s) in 2 file(s): b.txt, sub/c.txt")
	assert.Equal(t, afterAgent, readFile(t, filepath.Join(root, "b.txt")))
	assert.FileExists(t, filepath.Join(root, "sub/c.txt"))
	assert.Len(t, changesOf(t, base, s), 4)

	// To a seq: only the later changes are undone.
	var res struct {
		Output   string `json:"output"`
		Metadata struct {
			Restored []struct {
				Path  string            `json:"path"`
				Diffs []json.RawMessage `json:"diffs"`
			} `json:"restored"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustCall(t, "POST", base+"/sessions/"+s+"/revert", "", `{"to":2}`)), &res))
	assert.Equal(t, "Reverted 2 change(s) in 2 file(s): b.txt, sub/c.txt", res.Output)
	require.Len(t, res.Metadata.Restored, 2)
	assert.Equal(t, "b.txt", res.Metadata.Restored[0].Path)
	assert.NotEmpty(t, res.Metadata.Restored[0].Diffs)
	assert.Equal(t, "one\r\nTWO\r\nthree", readFile(t, filepath.Join(root, "b.txt")))
	assert.NoFileExists(t, filepath.Join(root, "sub/c.txt"))

	// A revert of the revert brings the agent's changes back.
	cs = changesOf(t, base, s)
	require.Equal(t, "revert", cs[0].Tool)
	assert.Equal(t, int64(5), cs[0].Seq)
	out := mustCall(t, "POST", base+"/sessions/"+s+"/revert", "", `{"to":4}`)
	assert.Contains(t, out, `"output":"Reverted 2 change(s) in 2 file(s): b.txt, sub/c.txt"`)
	assert.Equal(t, afterAgent, readFile(t, filepath.Join(root, "b.txt")))
	assert.Equal(t, "c", readFile(t, filepath.Join(root, "sub/c.txt")))

	// The history survives a restart of the server on the same root.
	before := changesOf(t, base, s)
	stop()
	base, stop = startRun(t, args)
	defer stop()
	assert.Equal(t, before, changesOf(t, base, s))

	// Everything: every byte as before the session's first change.
	out = mustCall(t, "POST", base+"/sessions/"+s+"/revert", "", `{"to":0}`)
	assert.Contains(t, out, `"output":"Reverted 8 change(s) in 3 file(s): a.txt, b.txt, sub/c.txt"`)
	assert.Equal(t, crlf, readFile(t, filepath.Join(root, "b.txt")))
	assert.NoFileExists(t, filepath.Join(root, "a.txt"))
	assert.NoFileExists(t, filepath.Join(root, "sub/c.txt"))

	// Every revert was counted.
	metrics := call(t, "GET", base+"/metrics", "", "").body
	assert.Regexp(t, regexp.MustCompile(`(?m)^toolfs_reverts_total\{outcome="reverted"\} 1$`), metrics, "this process made one")

	// DELETE /sessions/{id} forgets the history.
	a := call(t, "DELETE", base+"/sessions/"+s, "", "")
	require.Equal(t, 204, a.status, a.body)
	assert.Empty(t, changesOf(t, base, s))
}

// A person's edit between the agent's change and the revert refuses the
// whole revert, naming that file, and nothing anywhere changes.
func TestCheckpointsRevertRefusesAPersonsEdit(t *testing.T) {
	root := t.TempDir()
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root})
	defer stop()
	const s = "agent-2"
	mustCall(t, "POST", base+"/tools/write", s, `{"file_path":"x.txt","content":"agent x\n"}`)
	mustCall(t, "POST", base+"/tools/write", s, `{"file_path":"y.txt","content":"agent y\n"}`)
	require.NoError(t, os.WriteFile(filepath.Join(root, "y.txt"), []byte("person y\n"), 0o644))

	a := call(t, "POST", base+"/sessions/"+s+"/revert", "", `{"to":0}`)
	require.Equal(t, 409, a.status, a.body)
	var p struct {
		Code   string   `json:"code"`
		Output string   `json:"output"`
		Paths  []string `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &p))
	assert.Equal(t, "FS_STALE_VERSION", p.Code)
	assert.Equal(t, []string{"y.txt"}, p.Paths)
	assert.True(t, strings.HasPrefix(p.Output, "Error: cannot revert: these files changed since this session's last change to them: y.txt"), p.Output)
	assert.Equal(t, "agent x\n", readFile(t, filepath.Join(root, "x.txt")))
	assert.Equal(t, "person y\n", readFile(t, filepath.Join(root, "y.txt")))
	assert.Len(t, changesOf(t, base, s), 2, "nothing recorded")
	assert.Regexp(t, `(?m)^toolfs_reverts_total\{outcome="stale"\} 1$`, call(t, "GET", base+"/metrics", "", "").body)
}

// A change that replaced a file larger than --checkpoint-max-file-bytes is
// listed as not revertible, and a revert past it is 422.
func TestCheckpointsLargeFileNotRevertible(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "big.txt"), []byte(strings.Repeat("x", 4096)), 0o644))
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--checkpoint-max-file-bytes", "1024", "--checkpoint-bytes", "65536"})
	defer stop()
	const s = "agent-3"
	mustCall(t, "POST", base+"/tools/read", s, `{"file_path":"big.txt"}`)
	mustCall(t, "POST", base+"/tools/write", s, `{"file_path":"big.txt","content":"small\n"}`)
	cs := changesOf(t, base, s)
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Revertible)
	assert.Equal(t, "the content it replaced (4096 bytes) is larger than --checkpoint-max-file-bytes (1024 bytes), so it was not kept", cs[0].Reason)
	a := call(t, "POST", base+"/sessions/"+s+"/revert", "", `{"to":0}`)
	require.Equal(t, 422, a.status, a.body)
	assert.Contains(t, a.body, `"code":"FS_NOT_REVERTIBLE"`)
	assert.Contains(t, a.body, `cannot revert change 1 (big.txt): the content it replaced (4096 bytes)`)
	assert.Equal(t, "small\n", readFile(t, filepath.Join(root, "big.txt")))
}

// --checkpoints=false records nothing and answers the routes with why.
func TestCheckpointsOff(t *testing.T) {
	root := t.TempDir()
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--checkpoints=false"})
	defer stop()
	mustCall(t, "POST", base+"/tools/write", "s", `{"file_path":"x.txt","content":"x"}`)
	a := call(t, "GET", base+"/sessions/s/changes", "", "")
	assert.Equal(t, 400, a.status)
	assert.Contains(t, a.body, "checkpoints are off on this server (--checkpoints=false)")
	assert.NoDirExists(t, filepath.Join(root, ".toolfs-api", "checkpoints"))
}

// Over MCP, the extended profile offers changes and revert on the calling
// session; the original profile's tools/list does not have them.
func TestCheckpointsOverMCP(t *testing.T) {
	root := t.TempDir()
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root})
	defer stop()
	h := []string{"X-Session-ID", "mcp-1"}
	_, isErr := mcpText(t, base, "", "write", map[string]any{"file_path": "m.txt", "content": "one\n"}, h...)
	require.False(t, isErr)
	_, isErr = mcpText(t, base, "", "edit", map[string]any{"file_path": "m.txt", "old_string": "one", "new_string": "two"}, h...)
	require.False(t, isErr)
	text, isErr := mcpText(t, base, "", "changes", map[string]any{}, h...)
	require.False(t, isErr, text)
	assert.Equal(t, "Changes of this session, newest first (revert with to = the seq to go back to; 0 undoes them all):\n2 edit m.txt +1 -1\n1 write m.txt +1 -0 (created)", text)
	assert.Len(t, changesOf(t, base, "mcp-1"), 2, "the same history as REST's")

	text, isErr = mcpText(t, base, "", "revert", map[string]any{"to": 1, "dry_run": true}, h...)
	require.False(t, isErr, text)
	assert.True(t, strings.HasPrefix(text, "Dry run: no changes were written. Reverting would undo 1 change(s) in 1 file(s): m.txt\n"), text)
	assert.Equal(t, "two\n", readFile(t, filepath.Join(root, "m.txt")))
	text, isErr = mcpText(t, base, "", "revert", map[string]any{"to": 1}, h...)
	require.False(t, isErr, text)
	assert.Equal(t, "Reverted 1 change(s) in 1 file(s): m.txt", text)
	assert.Equal(t, "one\n", readFile(t, filepath.Join(root, "m.txt")))

	// A person's edit in between refuses the revert, and nothing changes.
	require.NoError(t, os.WriteFile(filepath.Join(root, "m.txt"), []byte("person\n"), 0o644))
	text, isErr = mcpText(t, base, "", "revert", map[string]any{"to": 0}, h...)
	assert.True(t, isErr)
	assert.True(t, strings.HasPrefix(text, "Error: cannot revert: these files changed since this session's last change to them: m.txt"), text)
	assert.Equal(t, "person\n", readFile(t, filepath.Join(root, "m.txt")))
	text, isErr = mcpText(t, base, "", "revert", map[string]any{"to": -1}, h...)
	assert.True(t, isErr)
	assert.Equal(t, "Error: "+"to must be a non-negative integer: the seq to go back to (0 undoes every change)", text)
}

func TestCheckpointToolsNotInTheOriginalProfile(t *testing.T) {
	for _, tc := range []struct {
		profile string
		want    bool
	}{{"extended", true}, {"original", false}} {
		base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", t.TempDir(), "--profile", tc.profile})
		names := mcpToolNames(t, base)
		stop()
		assert.Equal(t, tc.want, slices.Contains(names, "changes"), "%s: %v", tc.profile, names)
		assert.Equal(t, tc.want, slices.Contains(names, "revert"), "%s: %v", tc.profile, names)
	}
}

func mcpToolNames(t *testing.T, base string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx,
		&mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}
