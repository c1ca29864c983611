package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callWith is call with headers given as name, value pairs, sent byte for
// byte (a header value may hold bytes that are not UTF-8).
func callWith(t *testing.T, method, url, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header[http.CanonicalHeaderKey(headers[i])] = []string{headers[i+1]}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, string(b)}
}

// Names that are not UTF-8 are kept byte for byte (docs/checkpoints.md,
// "Names that are not UTF-8"): two folders whose names differ only in a
// byte that is not UTF-8 reach the server as a session's X-Session-Cwd
// (a header carries bytes; a JSON body cannot). Their files get one
// record each, with path as people read it (U+FFFD for the bad byte) and
// path_bytes, the exact bytes, in the history and the audit line. After a
// restart each session's revert removes exactly the file its session
// created, and never the file no session touched whose name is the
// U+FFFD spelling, though it holds the same bytes.
func TestCheckpointsKeepNamesByteForByte(t *testing.T) {
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "audit.log")
	e9, e8, lossy := "caf\xe9", "caf\xe8", "caf\ufffd"
	for _, dir := range []string{e9, e8, lossy} {
		require.NoError(t, os.Mkdir(filepath.Join(root, dir), 0o755))
	}
	const content = "agent\n"
	untouched := filepath.Join(root, lossy, "notes.txt")
	require.NoError(t, os.WriteFile(untouched, []byte(content), 0o644))
	args := []string{"--addr", "127.0.0.1:0", "--root", root, "--audit-log", log}
	base, stop := startRun(t, args)

	write := jsonBody(map[string]any{"file_path": "notes.txt", "content": content})
	a := callWith(t, "POST", base+"/tools/write", write, "X-Session-ID", "s9", "X-Session-Cwd", e9)
	require.Equal(t, 200, a.status, a.body)
	a = callWith(t, "POST", base+"/tools/write", write, "X-Session-ID", "s8", "X-Session-Cwd", e8)
	require.Equal(t, 200, a.status, a.body)

	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	// The audit lines: one per file, told apart by path_bytes.
	raw, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, lines, 2)
	for i, want := range []string{e9, e8} {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &rec), lines[i])
		assert.Equal(t, lossy+"/notes.txt", rec["path"], lines[i])
		assert.Equal(t, b64(want+"/notes.txt"), rec["path_bytes"], lines[i])
		assert.Contains(t, lines[i], `"path":"caf\ufffd/notes.txt","path_bytes":"`+b64(want+"/notes.txt")+`","before"`, "path_bytes follows path")
	}

	history := func(session string) (string, string) {
		a := callWith(t, "GET", base+"/sessions/"+session+"/changes", "")
		require.Equal(t, 200, a.status, a.body)
		var res struct {
			Changes []struct {
				Path      string `json:"path"`
				PathBytes string `json:"path_bytes"`
			} `json:"changes"`
		}
		require.NoError(t, json.Unmarshal([]byte(a.body), &res))
		require.Len(t, res.Changes, 1, a.body)
		return res.Changes[0].Path, res.Changes[0].PathBytes
	}
	p, pb := history("s9")
	assert.Equal(t, lossy+"/notes.txt", p)
	assert.Equal(t, b64(e9+"/notes.txt"), pb)

	// After a restart the history is read from disk.
	stop()
	base, stop = startRun(t, args)
	defer stop()
	p, pb = history("s9")
	assert.Equal(t, lossy+"/notes.txt", p)
	assert.Equal(t, b64(e9+"/notes.txt"), pb, "the exact bytes survive the restart")
	_, pb = history("s8")
	assert.Equal(t, b64(e8+"/notes.txt"), pb)

	a = callWith(t, "POST", base+"/sessions/s9/revert", `{"to":0}`)
	require.Equal(t, 200, a.status, a.body)
	assert.NoFileExists(t, filepath.Join(root, e9, "notes.txt"), "the revert removes the file its session created")
	assert.FileExists(t, filepath.Join(root, e8, "notes.txt"), "and not the other session's")
	assert.Equal(t, content, readFile(t, untouched), "nor the file no session touched")

	a = callWith(t, "POST", base+"/sessions/s8/revert", `{"to":0}`)
	require.Equal(t, 200, a.status, a.body)
	assert.NoFileExists(t, filepath.Join(root, e8, "notes.txt"))
	assert.Equal(t, content, readFile(t, untouched), "the file no session touched stays")

	// The reverts' audit lines name the exact files too.
	raw, err = os.ReadFile(log)
	require.NoError(t, err)
	lines = strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, lines, 4)
	for i, want := range []string{e9, e8} {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[2+i]), &rec), lines[2+i])
		assert.Equal(t, "revert", rec["tool"])
		assert.Equal(t, b64(want+"/notes.txt"), rec["path_bytes"], lines[2+i])
	}
}
