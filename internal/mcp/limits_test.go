package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/mcp"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// batchRevisions are the revisions whose JSON-RPC allows batches.
var batchRevisions = []string{"2025-03-26", "2024-11-05"}

// open starts an MCP session on version by hand (initialize, then
// initialized) and returns the headers of a request in it.
func (h *harness) open(t testing.TB, version string) []string {
	t.Helper()
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	r := h.raw(http.MethodPost, "/mcp", init, mcpPost...)
	require.Equal(t, http.StatusOK, r.status, r.body)
	id := r.header.Get("Mcp-Session-Id")
	require.NotEmpty(t, id)
	headers := append(append([]string{}, mcpPost...), "Mcp-Session-Id", id, "MCP-Protocol-Version", version)
	r = h.raw(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, headers...)
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	return headers
}

// calls is a JSON-RPC batch of n tools/call messages, args(i) the arguments
// of the i-th.
func calls(n int, tool string, args func(i int) map[string]any) string {
	msgs := make([]string, n)
	for i := range n {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": args(i)}})
		msgs[i] = string(b)
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

type batchAnswer []struct {
	ID     int `json:"id"`
	Result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

// mcpSeries is the lines of /metrics that count MCP calls.
func (h *harness) mcpSeries() []string {
	var out []string
	for _, line := range strings.Split(h.raw(http.MethodGet, "/metrics", "").body, "\n") {
		if strings.Contains(line, `transport="mcp"`) {
			out = append(out, line)
		}
	}
	return out
}

// TestBatchOverLimitRefused: a batch of 17 writes is refused with 400 and a
// JSON-RPC error naming the limit, before anything in it runs: no file is
// created and no call is counted. The session goes on.
func TestBatchOverLimitRefused(t *testing.T) {
	h := start(t, options{})
	for _, v := range batchRevisions {
		t.Run(v, func(t *testing.T) {
			headers := h.open(t, v)
			before := h.mcpSeries()
			write := func(i int) map[string]any {
				return map[string]any{"file_path": fmt.Sprintf("%s/f%02d.txt", v, i), "content": "x\n"}
			}
			r := h.raw(http.MethodPost, "/mcp", calls(17, "write", write), headers...)
			assert.Equal(t, http.StatusBadRequest, r.status)
			assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch of 17 messages exceeds the limit of 16"}}`, clip(r.body))
			for i := range 17 {
				assert.NoFileExists(t, filepath.Join(h.srv.Root, v, fmt.Sprintf("f%02d.txt", i)))
			}
			assert.Equal(t, before, h.mcpSeries(), "no call ran")

			// The shape: 1,500 reads, white space around.
			h.file("a.txt", "one\n")
			read := func(int) map[string]any { return map[string]any{"file_path": "a.txt"} }
			r = h.raw(http.MethodPost, "/mcp", " \n"+calls(1500, "read", read)+"\n", headers...)
			assert.Equal(t, http.StatusBadRequest, r.status)
			assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch of 1500 messages exceeds the limit of 16"}}`, clip(r.body))
			assert.Equal(t, before, h.mcpSeries(), "no call ran")

			r = h.raw(http.MethodPost, "/mcp", calls(1, "read", read), headers...)
			assert.Equal(t, http.StatusOK, r.status, "the session goes on: %s", r.body)
		})
	}
}

// TestBatchAtLimitRuns: a batch of 16 writes runs whole.
func TestBatchAtLimitRuns(t *testing.T) {
	h := start(t, options{})
	for _, v := range batchRevisions {
		t.Run(v, func(t *testing.T) {
			headers := h.open(t, v)
			r := h.raw(http.MethodPost, "/mcp", calls(16, "write", func(i int) map[string]any {
				return map[string]any{"file_path": fmt.Sprintf("%s/f%02d.txt", v, i), "content": "x\n"}
			}), headers...)
			require.Equal(t, http.StatusOK, r.status, r.body)
			var answers batchAnswer
			require.NoError(t, json.Unmarshal([]byte(r.body), &answers))
			require.Len(t, answers, 16)
			for _, a := range answers {
				require.Len(t, a.Result.Content, 1, string(a.Error))
				assert.False(t, a.Result.IsError, a.Result.Content[0].Text)
				assert.Contains(t, a.Result.Content[0].Text, "Created file")
			}
			for i := range 16 {
				assert.Equal(t, "x\n", h.contents(fmt.Sprintf("%s/f%02d.txt", v, i)))
			}
		})
	}
}

// TestBatchOnNewerRevisions: the count is checked before the revision, so
// a batch of 17 gets the same refusal on every revision; the SDK refuses
// shorter batches from 2025-06-18 on, as before.
func TestBatchOnNewerRevisions(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "one\n")
	read := func(int) map[string]any { return map[string]any{"file_path": "a.txt"} }
	stateful := h.open(t, "2025-11-25")
	sessionless := append(append([]string{}, mcpPost...), "MCP-Protocol-Version", "2026-07-28")
	for name, headers := range map[string][]string{"2025-11-25": stateful, "2026-07-28": sessionless} {
		r := h.raw(http.MethodPost, "/mcp", calls(17, "read", read), headers...)
		assert.Equal(t, http.StatusBadRequest, r.status, name)
		assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch of 17 messages exceeds the limit of 16"}}`, clip(r.body), name)
		r = h.raw(http.MethodPost, "/mcp", calls(2, "read", read), headers...)
		assert.Equal(t, http.StatusBadRequest, r.status, name)
		assert.Contains(t, r.body, "batching is not supported", name)
	}
}

// TestAnswerBudget: the answers of one request are counted as they are
// produced; past the budget the request is refused with 400 and the
// limit's JSON-RPC error, on a batch and on a single call, and the next
// request of the session is served.
func TestAnswerBudget(t *testing.T) {
	const limit = 200_000
	h := start(t, options{budget: limit})
	h.file("big.txt", strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", 2000))
	read := func(int) map[string]any { return map[string]any{"file_path": "big.txt"} }
	refusal := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"answers to this request exceed the limit of 200000 bytes"}}`
	for _, v := range batchRevisions {
		t.Run(v, func(t *testing.T) {
			headers := h.open(t, v)
			r := h.raw(http.MethodPost, "/mcp", calls(3, "read", read), headers...)
			require.Equal(t, http.StatusOK, r.status, r.body)
			assert.Greater(t, len(r.body), 150_000, "three windows of about 51 KB")

			r = h.raw(http.MethodPost, "/mcp", calls(16, "read", read), headers...)
			assert.Equal(t, http.StatusBadRequest, r.status)
			assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			assert.Equal(t, refusal, clip(r.body))

			r = h.raw(http.MethodPost, "/mcp", calls(1, "read", read), headers...)
			assert.Equal(t, http.StatusOK, r.status, r.body)
		})
	}
	small := start(t, options{budget: 20_000})
	small.file("big.txt", h.contents("big.txt"))
	one := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"big.txt"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"}}}}`
	for name, headers := range map[string][]string{
		"2025-11-25": small.open(t, "2025-11-25"),
		"2026-07-28": append(append([]string{}, mcpPost...), "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "read"),
	} {
		body := one
		if name == "2025-11-25" {
			body = one[:strings.Index(one, `,"_meta"`)] + "}}"
		}
		r := small.raw(http.MethodPost, "/mcp", body, headers...)
		assert.Equal(t, http.StatusBadRequest, r.status, name)
		assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"answers to this request exceed the limit of 20000 bytes"}}`, clip(r.body), name)
	}
}

// TestDefaultBudget: under the default caps a batch of 16 reads fits
// whatever the text (each window full of characters JSON escapes six-fold),
// while seven greps of 3 MB each pass the default budget (which also holds
// one image read's picture, docs/media.md) and are refused with its figure.
func TestDefaultBudget(t *testing.T) {
	h := start(t, options{})
	worst := strings.Repeat(strings.Repeat("\x01<", 100)+"\n", 300) // 60,300 bytes: a full window
	for i := range 16 {
		h.file(fmt.Sprintf("w%02d.txt", i), worst)
	}
	headers := h.open(t, "2025-03-26")
	r := h.raw(http.MethodPost, "/mcp", calls(16, "read", func(i int) map[string]any {
		return map[string]any{"file_path": fmt.Sprintf("w%02d.txt", i)}
	}), headers...)
	require.Equal(t, http.StatusOK, r.status, r.body)
	var answers batchAnswer
	require.NoError(t, json.Unmarshal([]byte(r.body), &answers))
	require.Len(t, answers, 16)
	for _, a := range answers {
		require.Len(t, a.Result.Content, 1)
		assert.Contains(t, a.Result.Content[0].Text, "(Output capped. Showing lines 1-")
	}
	t.Logf("16 worst-case reads: %d bytes of answer", len(r.body))
	assert.Greater(t, len(r.body), 16*250_000, "each window escaped to over 250 KB")

	// Grep shows 250 matches of 2,000 bytes: some 3 MB of answer each, once
	// JSON escapes the <s.
	h.file("g.txt", strings.Repeat(strings.Repeat("<", 1999)+"x\n", 300))
	r = h.raw(http.MethodPost, "/mcp", calls(7, "grep", func(int) map[string]any {
		return map[string]any{"pattern": "x", "path": "g.txt"}
	}), headers...)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"answers to this request exceed the limit of 17277868 bytes"}}`, clip(r.body))
}

// TestLargeWriteOverMCP: a tools/call body may be as large as
// --max-body-bytes, past the SDK's own 4 MiB default (TestBodyCapDefault
// does it on the sessionless revision).
func TestLargeWriteOverMCP(t *testing.T) {
	h := start(t, options{maxBody: 8 << 20})
	h.largeWrite(t, h.connect("2025-03-26"), "big.txt")
}

// largeWrite writes 4.3 MB to rel over c (the SDK decodes a body several
// times: a minute under the race detector on a loaded machine).
func (h *harness) largeWrite(t *testing.T, c *client, rel string) {
	t.Helper()
	content := strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", 66_000)
	require.Greater(t, len(content), 4<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "write", Arguments: map[string]any{"file_path": rel, "content": content}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	assert.Equal(t, content, h.contents(rel))
}

// TestBodyCapDefault: built with no MaxBodyBytes, the handler takes bodies
// up to 32 MiB, not the SDK's 4 MiB. Its session bounds are required.
func TestBodyCapDefault(t *testing.T) {
	root := t.TempDir()
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	x := tools.New(tools.Options{FS: local, Caps: render.DefaultCaps()})
	hs := httptest.NewServer(http.StripPrefix("/mcp", mcp.New(mcp.Config{SessionTimeout: time.Minute, MaxSessions: 10}, x)))
	t.Cleanup(hs.Close)
	h := &harness{t: t, srv: &servertest.Server{URL: hs.URL}}
	h.srv.Server = &server.Server{Root: root}
	h.largeWrite(t, h.connect(""), "big.txt")
}

// clip keeps a failure's message readable when an answer is megabytes long.
func clip(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "..."
	}
	return s
}

// TestBudgetCancelsTheRest: once an answer passes the budget, the request's
// other calls end: an escalated edit waiting for a person's approval in the
// same batch is withdrawn at once rather than holding the request for the
// 30 s approval timeout, and writes nothing.
func TestBudgetCancelsTheRest(t *testing.T) {
	srv := servertest.Start(t, server.Config{
		Policy:       policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
		MCPAnswerBudget: 2000,
		Tools:           tools.Settings{SandboxMode: string(tools.FenceReadOnly)},
		Approvals:       approval.Settings{Timeout: 30 * time.Second},
	})
	h := &harness{t: t, srv: srv}
	h.file("big.txt", strings.Repeat("0123456789abcdef\n", 1000))
	h.file("e.txt", "old\n")
	headers := h.open(t, "2025-03-26")
	r := h.raw(http.MethodPost, "/mcp", calls(1, "read", func(int) map[string]any { return map[string]any{"file_path": "e.txt"} }), headers...)
	require.Equal(t, http.StatusOK, r.status, r.body)

	start := time.Now()
	r = h.raw(http.MethodPost, "/mcp", `[`+
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"edit","arguments":{"file_path":"e.txt","old_string":"old","new_string":"new","sandbox_permissions":"workspace-write","justification":"The user asked for it."}}},`+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"big.txt"}}}]`, headers...)
	took := time.Since(start)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"answers to this request exceed the limit of 2000 bytes"}}`, clip(r.body))
	assert.Less(t, took, 10*time.Second, "the waiting edit was cancelled")
	assert.Equal(t, "old\n", h.contents("e.txt"))
	var pending struct {
		Approvals []approval.Approval `json:"approvals"`
		Cursor    int                 `json:"cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.raw(http.MethodGet, "/approvals", "").body), &pending))
	assert.Empty(t, pending.Approvals)
	t.Logf("answered in %s; approvals created and withdrawn: %d", took.Round(time.Millisecond), pending.Cursor)
}
