package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// meta0728 is the _meta every 2026-07-28 request carries.
const meta0728 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// post0728 are the headers of a 2026-07-28 POST of method (and name).
func post0728(method, name string) []string {
	h := append(append([]string{}, mcpPost...), "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method)
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

// TestHeaderBodyMismatchRefused: on 2026-07-28 an Mcp-Method or Mcp-Name
// header that differs from the body (or a missing Mcp-Name) is 400 with
// the revision's HeaderMismatch error, -32020, and nothing runs: a proxy
// that routes or limits by the headers cannot be told one tool while
// another runs (docs/mcp.md, "Cache hints, headers and traces").
func TestHeaderBodyMismatchRefused(t *testing.T) {
	h := start(t, options{policyOff: true})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","arguments":{"file_path":"x.txt","content":"hi"},` + meta0728 + `}}`
	for name, c := range map[string]struct {
		headers []string
		want    string
	}{
		"name":         {post0728("tools/call", "read"), `{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"header mismatch: Mcp-Name header value 'read' does not match body value 'write'"}}`},
		"method":       {post0728("tools/list", "write"), `{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"header mismatch: Mcp-Method header value 'tools/list' does not match body value 'tools/call'"}}`},
		"missing name": {post0728("tools/call", ""), `{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"missing required Mcp-Name header for method \"tools/call\""}}`},
	} {
		t.Run(name, func(t *testing.T) {
			r := h.raw(http.MethodPost, "/mcp", call, c.headers...)
			assert.Equal(t, http.StatusBadRequest, r.status)
			assert.JSONEq(t, c.want, r.body)
			assert.NoFileExists(t, filepath.Join(h.srv.Root, "x.txt"))
		})
	}
	assert.NotContains(t, h.raw(http.MethodGet, "/metrics", "").body, `toolfs_tool_calls_total{`, "no call ran")
	r := h.raw(http.MethodPost, "/mcp", call, post0728("tools/call", "write")...)
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Equal(t, "hi", h.contents("x.txt"), "the same call with matching headers runs")
}

// TestListCacheHints: tools/list and server/discover carry ttlMs (five
// minutes: what they list changes only with a restart) and cacheScope,
// "public" without a credential and "private" with one.
func TestListCacheHints(t *testing.T) {
	type hints struct {
		TTLMs      *int    `json:"ttlMs"`
		CacheScope *string `json:"cacheScope"`
	}
	for _, c := range []struct{ token, scope string }{{"", "public"}, {"s3cret", "private"}} {
		h := start(t, options{token: c.token})
		for _, method := range []string{"tools/list", "server/discover"} {
			r := h.raw(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+meta0728+`}}`, post0728(method, "")...)
			require.Equal(t, http.StatusOK, r.status, r.body)
			var got struct{ Result hints }
			require.NoError(t, json.Unmarshal([]byte(r.body), &got), r.body)
			require.NotNil(t, got.Result.TTLMs, method)
			require.NotNil(t, got.Result.CacheScope, method)
			assert.Equal(t, 300000, *got.Result.TTLMs, method)
			assert.Equal(t, c.scope, *got.Result.CacheScope, method)
		}
	}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the JSON lines written so far whose msg is msg.
func (l *logBuffer) lines(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestTraceparentInLogs: a caller's W3C traceparent, from an MCP call's
// _meta or from the HTTP header (REST and /mcp), gives its trace id to the
// request's access log line and to the call's audit line; a call's _meta
// wins over the header for its audit line; an invalid value is ignored.
func TestTraceparentInLogs(t *testing.T) {
	var logs logBuffer
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	cfg := server.Config{Root: root, Policy: policy.Settings{Enabled: false, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second, Audit: audit.Settings{Path: auditPath}}
	s, err := server.New(cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NoError(t, err)
	hs := httptest.NewServer(s.Handler)
	t.Cleanup(func() { hs.Close(); s.Shutdown(context.Background()) })
	h := &harness{t: t, srv: &servertest.Server{Server: s, URL: hs.URL}}

	const (
		metaTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
		headerTrace = "0af7651916cd43dd8448eb211c80319c"
	)
	tp := func(trace string) string { return "00-" + trace + "-b7ad6b7169203331-01" }
	mcpWrite := func(id, file, meta string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","arguments":{"file_path":"` + file + `","content":"x"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}` + meta + `}}}`
	}
	send := []struct {
		id, body, path string
		headers        []string
		access, audit  string // the trace ids wanted, "" for none
	}{
		{"r-meta", mcpWrite("r-meta", "a.txt", `,"traceparent":"`+tp(metaTrace)+`"`), "/mcp", nil, metaTrace, metaTrace},
		{"r-both", mcpWrite("r-both", "b.txt", `,"traceparent":"`+tp(metaTrace)+`"`), "/mcp", []string{"traceparent", tp(headerTrace)}, headerTrace, metaTrace},
		{"r-mcp-header", mcpWrite("r-mcp-header", "c.txt", ""), "/mcp", []string{"traceparent", tp(headerTrace)}, headerTrace, headerTrace},
		{"r-bad", mcpWrite("r-bad", "d.txt", `,"traceparent":"00-`+strings.Repeat("0", 32)+`-b7ad6b7169203331-01"`), "/mcp", []string{"traceparent", "not a trace"}, "", ""},
		{"r-rest", `{"file_path":"e.txt","content":"x"}`, "/tools/write", []string{"traceparent", tp(headerTrace)}, headerTrace, headerTrace},
	}
	for _, c := range send {
		headers := append([]string{"X-Request-Id", c.id}, c.headers...)
		if c.path == "/mcp" {
			headers = append(headers, post0728("tools/call", "write")...)
		} else {
			headers = append(headers, "Content-Type", "application/json")
		}
		r := h.raw(http.MethodPost, c.path, c.body, headers...)
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.NotContains(t, r.body, `"isError":true`)
	}

	require.Eventually(t, func() bool { return len(logs.lines("request")) >= len(send) }, 5*time.Second, 10*time.Millisecond)
	access := map[string]any{}
	for _, l := range logs.lines("request") {
		access[l["request_id"].(string)] = l["trace_id"]
	}
	b, err := os.ReadFile(auditPath)
	require.NoError(t, err)
	audited := map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		audited[rec["request_id"].(string)] = rec["trace_id"]
	}
	for _, c := range send {
		want := func(id string) any {
			if id == "" {
				return nil
			}
			return id
		}
		assert.Equal(t, want(c.access), access[c.id], "access log of %s", c.id)
		assert.Equal(t, want(c.audit), audited[c.id], "audit line of %s", c.id)
	}
}
