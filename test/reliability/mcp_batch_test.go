package reliability

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpRaw is an MCP session on a child, spoken by hand: JSON-RPC batches
// are what the SDK clients never send.
type mcpRaw struct {
	t       *testing.T
	hc      *http.Client
	url     string
	headers http.Header
}

// openMCP initializes an MCP session on version and sends initialized.
func openMCP(t *testing.T, c *child, version string) *mcpRaw {
	t.Helper()
	m := &mcpRaw{t: t, hc: newClient(), url: c.base + "/mcp", headers: http.Header{}}
	m.headers.Set("Content-Type", "application/json")
	m.headers.Set("Accept", "application/json, text/event-stream")
	status, body, h := m.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	require.Equal(t, http.StatusOK, status, body)
	m.headers.Set("Mcp-Session-Id", h.Get("Mcp-Session-Id"))
	m.headers.Set("MCP-Protocol-Version", version)
	status, body, _ = m.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, http.StatusAccepted, status, body)
	return m
}

func (m *mcpRaw) post(body string) (int, string, http.Header) {
	m.t.Helper()
	req, err := http.NewRequest(http.MethodPost, m.url, strings.NewReader(body))
	require.NoError(m.t, err)
	req.Header = m.headers.Clone()
	resp, err := m.hc.Do(req)
	require.NoError(m.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(m.t, err)
	return resp.StatusCode, string(b), resp.Header
}

// reads is a batch of n read calls, of path(i).
func reads(n int, path func(i int) string) string {
	msgs := make([]string, n)
	for i := range n {
		msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read","arguments":{"file_path":%q}}}`, i+1, path(i))
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// TestMCPBatchMemoryBoundedChild: one POST to /mcp cannot make the server
// hold memory in proportion to its batch (docs/mcp.md, "Limits"). On the
// real binary with its default flags, on 2025-03-26: the 1,500
// reads of a large file and 17 reads are refused with 400 at no cost; the
// largest batch allowed, 16 reads of windows full of characters JSON
// escapes six-fold, is answered; 16 greps whose answers (3 MB each) pass
// the answer budget are refused. The peak RSS (VmHWM) stays within 128 MiB
// of the server's after start-up; before the limits the 1,500 reads alone
// took it from 26 to 297 MiB.
func TestMCPBatchMemoryBoundedChild(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat(strings.Repeat("x", 99)+"\n", 1300) // 130 KB: each read is a full 51,200-byte window
	require.NoError(t, os.WriteFile(filepath.Join(root, "big.txt"), []byte(big), 0o644))
	worst := strings.Repeat(strings.Repeat("\x01<", 100)+"\n", 300) // a full window
	for i := range 17 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("w%02d.txt", i)), []byte(worst), 0o644))
	}
	hits := strings.Repeat(strings.Repeat("<", 1999)+"x\n", 300) // grep shows 250 matches of 2,000 bytes, 6 KB each in a batch's JSON
	require.NoError(t, os.WriteFile(filepath.Join(root, "g.txt"), []byte(hits), 0o644))
	srv := startChild(t, root)
	pid := srv.cmd.Process.Pid
	m := openMCP(t, srv, "2025-03-26")
	status, body, _ := m.post(reads(1, func(int) string { return "big.txt" }))
	require.Equal(t, http.StatusOK, status, body)
	base := peakRSS(t, pid)
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }

	batch := reads(1500, func(int) string { return "big.txt" })
	status, body, _ = m.post(batch)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch of 1500 messages exceeds the limit of 16"}}`, clip(body))
	after1500 := peakRSS(t, pid)

	worstPath := func(i int) string { return fmt.Sprintf("w%02d.txt", i) }
	status, body, _ = m.post(reads(17, worstPath))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch of 17 messages exceeds the limit of 16"}}`, clip(body))
	after17 := peakRSS(t, pid)

	status, body, _ = m.post(reads(16, worstPath))
	require.Equal(t, http.StatusOK, status, body[:min(len(body), 300)])
	var answers []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &answers))
	assert.Len(t, answers, 16)
	answer16 := len(body)
	after16 := peakRSS(t, pid)

	greps := make([]string, 16)
	for i := range greps {
		greps[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"grep","arguments":{"pattern":"x","path":"g.txt"}}}`, i+1)
	}
	status, body, _ = m.post("[" + strings.Join(greps, ",") + "]")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"answers to this request exceed the limit of 17277868 bytes"}}`, clip(body))
	afterBudget := peakRSS(t, pid)

	t.Logf("peak RSS: %.1f MiB after start-up and one read; %.1f after 1,500 reads (%d-byte request, refused); %.1f after 17 worst-case reads (refused); %.1f after 16 worst-case reads (answered, %d bytes); %.1f after 16 greps over the budget (refused)",
		mib(base), mib(after1500), len(batch), mib(after17), mib(after16), answer16, mib(afterBudget))
	assert.Less(t, after1500-base, int64(8<<20), "a refused batch costs its body, not its answers")
	assert.Less(t, after17-base, int64(8<<20))
	assert.Less(t, after16-base, int64(48<<20))
	assert.Less(t, afterBudget-base, int64(128<<20), "a few times the budget, whatever the batch")
	srv.stop()
}

// clip keeps a failure's message readable when an answer is megabytes long.
func clip(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "..."
	}
	return s
}
