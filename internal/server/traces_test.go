package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/telemetry"
)

// syncBuffer is a log sink the handlers write to concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// field is a JSON log's or audit file's field of each line, by request id.
func (s *syncBuffer) field(msg, field string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return linesBy(s.b.Bytes(), msg, field)
}

func linesBy(b []byte, msg, field string) map[string]any {
	out := map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && (msg == "" || m["msg"] == msg) {
			if id, ok := m["request_id"].(string); ok {
				out[id] = m[field]
			}
		}
	}
	return out
}

// spanOf is what a test compares of an exported span.
type spanOf struct {
	Name   string
	Kind   trace.SpanKind
	Parent string // the parent span id, "" for a root
	Attrs  map[string]any
	Status codes.Code
	Desc   string
}

func summary(s tracetest.SpanStub) spanOf {
	attrs := map[string]any{}
	for _, kv := range s.Attributes {
		switch kv.Value.Type() {
		case attribute.INT64:
			attrs[string(kv.Key)] = kv.Value.AsInt64()
		default:
			attrs[string(kv.Key)] = kv.Value.AsString()
		}
	}
	parent := ""
	if s.Parent.IsValid() {
		parent = s.Parent.SpanID().String()
	}
	return spanOf{s.Name, s.SpanKind, parent, attrs, s.Status.Code, s.Status.Description}
}

// TestSpanPerCall pins each call's span (docs/running.md, "Traces"): its
// name, kind, parent and exact attribute set, through the real server with
// the SDK's in-memory exporter, on REST, /model, /files and /mcp; the
// caller's traceparent is the parent (an MCP call's _meta over the
// header), and the trace id in the access log and the audit line is the
// span's, a new one when the caller sent none.
func TestSpanPerCall(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	var logs syncBuffer
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "unread.txt"), []byte("old\n"), 0o644))
	cfg := server.Config{Root: root, Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second, Audit: audit.Settings{Path: auditPath},
		Telemetry: telemetry.Settings{Exporter: spans}, Version: "v9.8.7"}
	cfg.Sessions.Default = "default"
	cfg.Checkpoints.Enabled = true
	// A window larger than a streamed read's chunks (256 KiB).
	cfg.Tools.ReadLimit, cfg.Tools.ReadMaxBytes = 100000, 4<<20
	s, err := server.New(cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NoError(t, err)
	hs := httptest.NewServer(s.Handler)
	t.Cleanup(func() { hs.Close(); s.Shutdown(context.Background()) })

	const (
		headerTrace = "0af7651916cd43dd8448eb211c80319c"
		metaTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "b7ad6b7169203331"
		// telemetry.SessionDigest("s1"): the name of s1's history log.
		s1 = "e8bc163c82eee18733288c7d4ac636db"
	)
	tp := func(trace string) string { return "00-" + trace + "-" + callerSpan + "-01" }
	rest := func(id, method, path, body string, headers ...string) answer {
		h := append([]string{"X-Request-Id", id, "X-Session-ID", "s1", "Content-Type", "application/json"}, headers...)
		return send(t, method, hs.URL+path, "", body, h...)
	}
	mcpWrite := func(id, file, meta string, headers ...string) answer {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","arguments":{"file_path":"` + file + `","content":"hello"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}` + meta + `}}}`
		h := append([]string{"X-Request-Id", id, "X-Session-ID", "s1", "Content-Type", "application/json", "Accept", "application/json, text/event-stream",
			"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "write"}, headers...)
		return send(t, http.MethodPost, hs.URL+"/mcp", "", body, h...)
	}

	a := rest("r-write", http.MethodPost, "/tools/write", `{"file_path":"a.txt","content":"hello"}`, "traceparent", tp(headerTrace))
	require.Equal(t, http.StatusOK, a.status, a.body)
	a = rest("r-read", http.MethodPost, "/tools/read", `{"file_path":"a.txt"}`)
	require.Equal(t, http.StatusOK, a.status, a.body)
	a = rest("r-edit", http.MethodPost, "/tools/edit", `{"file_path":"unread.txt","old_string":"old","new_string":"new"}`, "traceparent", tp(headerTrace))
	require.Equal(t, http.StatusConflict, a.status, a.body)
	a = rest("r-model", http.MethodPost, "/model/read", `{"file_path":"a.txt","limit":1}`)
	require.Equal(t, http.StatusOK, a.status, a.body)
	a = rest("r-upload", http.MethodPut, "/files/up.bin", "12345678")
	require.Equal(t, http.StatusCreated, a.status, a.body)
	a = mcpWrite("r-mcp", "m.txt", `,"traceparent":"`+tp(metaTrace)+`"`, "traceparent", tp(headerTrace))
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.NotContains(t, a.body, `"isError":true`)
	a = mcpWrite("r-mcp-new", "n.txt", "")
	require.Equal(t, http.StatusOK, a.status, a.body)

	got := spans.GetSpans()
	require.Len(t, got, 7)
	spans.Reset()
	byName := func(i int) spanOf { return summary(got[i]) }
	rest200 := func(tool string, more map[string]any) map[string]any {
		m := map[string]any{telemetry.AttrTransport: "rest", telemetry.AttrTool: tool, telemetry.AttrCode: "OK", telemetry.AttrSession: s1, telemetry.AttrHTTPStatus: int64(200)}
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	assert.Equal(t, spanOf{"toolfs.write", trace.SpanKindServer, callerSpan,
		rest200("write", map[string]any{"toolfs.bytes_written": int64(5)}), codes.Unset, ""}, byName(0))
	assert.Equal(t, spanOf{"toolfs.read", trace.SpanKindServer, "",
		rest200("read", map[string]any{"toolfs.bytes_read": int64(5)}), codes.Unset, ""}, byName(1))
	assert.Equal(t, spanOf{"toolfs.edit", trace.SpanKindServer, callerSpan,
		map[string]any{"toolfs.transport": "rest", "toolfs.tool": "edit", "toolfs.code": "FS_NOT_OBSERVED", "toolfs.session": s1, "http.response.status_code": int64(409)},
		codes.Error, "FS_NOT_OBSERVED"}, byName(2))
	assert.Equal(t, spanOf{"toolfs.read", trace.SpanKindServer, "",
		rest200("read", map[string]any{"toolfs.bytes_read": int64(5)}), codes.Unset, ""}, byName(3))
	assert.Equal(t, spanOf{"toolfs.upload", trace.SpanKindServer, "",
		map[string]any{"toolfs.transport": "rest", "toolfs.tool": "upload", "toolfs.code": "OK", "toolfs.session": s1, "toolfs.bytes_written": int64(8), "http.response.status_code": int64(201)},
		codes.Unset, ""}, byName(4))
	// MCP: no HTTP status (the request may carry other messages).
	mcpAttrs := map[string]any{"toolfs.transport": "mcp", "toolfs.tool": "write", "toolfs.code": "OK", "toolfs.session": s1, "toolfs.bytes_written": int64(5)}
	assert.Equal(t, spanOf{"toolfs.write", trace.SpanKindServer, callerSpan, mcpAttrs, codes.Unset, ""}, byName(5))
	assert.Equal(t, spanOf{"toolfs.write", trace.SpanKindServer, "", mcpAttrs, codes.Unset, ""}, byName(6))

	traceOf := func(i int) string { return got[i].SpanContext.TraceID().String() }
	assert.Equal(t, headerTrace, traceOf(0))
	assert.Equal(t, headerTrace, traceOf(2))
	assert.Equal(t, metaTrace, traceOf(5), "the call's _meta wins over the header")
	for _, i := range []int{1, 3, 4, 6} {
		assert.NotContains(t, []string{headerTrace, metaTrace}, traceOf(i), "a new trace")
	}

	// The same trace ids in the logs: the access log line is the HTTP
	// request's (the header's, else the span's own), the audit line the
	// call's.
	require.Eventually(t, func() bool { return len(logs.field("request", "trace_id")) >= 7 }, 5*time.Second, 10*time.Millisecond)
	access := logs.field("request", "trace_id")
	b, err := os.ReadFile(auditPath)
	require.NoError(t, err)
	audited := linesBy(b, "", "trace_id")
	for id, want := range map[string][2]any{
		"r-write":   {headerTrace, headerTrace},
		"r-read":    {traceOf(1), nil}, // a read has no audit line
		"r-edit":    {headerTrace, nil},
		"r-model":   {traceOf(3), nil},
		"r-upload":  {traceOf(4), traceOf(4)},
		"r-mcp":     {headerTrace, metaTrace},
		"r-mcp-new": {traceOf(6), traceOf(6)},
	} {
		assert.Equal(t, want[0], access[id], "access log of %s", id)
		assert.Equal(t, want[1], audited[id], "audit line of %s", id)
	}

	// The resource: the service's name and the build's version.
	res := map[string]string{}
	for _, kv := range got[0].Resource.Attributes() {
		res[string(kv.Key)] = kv.Value.String()
	}
	assert.Equal(t, "toolfs-api", res["service.name"])
	assert.Equal(t, "v9.8.7", res["service.version"])

	// The session digest names s1's history log and nothing else of s1.
	assert.FileExists(t, filepath.Join(root, ".toolfs-api", "checkpoints", "sessions", s1+".log"), "the digest is the name of the session's history log")
	assert.Equal(t, s1, telemetry.SessionDigest("s1"))

	// A streamed read (Accept: text/plain) counts every line it sent,
	// the same bytes as the JSON answer of the same window.
	var big strings.Builder
	for i := range 40000 {
		fmt.Fprintf(&big, "line %05d of a file larger than one chunk of the stream\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "big.txt"), []byte(big.String()), 0o644))
	a = rest("r-json", http.MethodPost, "/tools/read", `{"file_path":"big.txt"}`)
	require.Equal(t, http.StatusOK, a.status)
	a = rest("r-stream", http.MethodPost, "/tools/read", `{"file_path":"big.txt"}`, "Accept", "text/plain")
	require.Equal(t, http.StatusOK, a.status)
	got = spans.GetSpans()
	require.Len(t, got, 2)
	json, stream := summary(got[0]).Attrs["toolfs.bytes_read"], summary(got[1]).Attrs["toolfs.bytes_read"]
	assert.Equal(t, int64(40000*56), json, "the whole file's lines, 56 bytes each without their newline")
	assert.Equal(t, json, stream)

	// The sessions routes are calls too: the history and a revert.
	spans.Reset()
	a = rest("r-changes", http.MethodGet, "/sessions/s1/changes", "")
	require.Equal(t, http.StatusOK, a.status, a.body)
	a = rest("r-revert", http.MethodPost, "/sessions/s1/revert", `{"to":0,"dry_run":true}`, "traceparent", tp(headerTrace))
	require.Equal(t, http.StatusOK, a.status, a.body)
	got = spans.GetSpans()
	require.Len(t, got, 2)
	assert.Equal(t, spanOf{"toolfs.changes", trace.SpanKindServer, "", rest200("changes", nil), codes.Unset, ""}, byName(0))
	assert.Equal(t, spanOf{"toolfs.revert", trace.SpanKindServer, callerSpan, rest200("revert", nil), codes.Unset, ""}, byName(1))
	assert.Equal(t, headerTrace, got[1].SpanContext.TraceID().String())
}

// TestSpanOverStdio: a call served by ServeMCP (--stdio's path: no HTTP,
// no headers) is a span too, a child of its _meta traceparent, with no
// HTTP status.
func TestSpanOverStdio(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	cfg := server.Config{Root: root, Policy: policy.Settings{Enabled: false, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, Stdio: true, Telemetry: telemetry.Settings{Exporter: spans}}
	cfg.Sessions.Default = "default"
	s, err := server.New(cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	ct, st := sdk.NewInMemoryTransports()
	go s.ServeMCP(st)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "trace-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "write", Arguments: map[string]any{"file_path": "s.txt", "content": "abc"},
		Meta: sdk.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	got := spans.GetSpans()
	require.Len(t, got, 1)
	assert.Equal(t, spanOf{"toolfs.write", trace.SpanKindServer, "00f067aa0ba902b7",
		map[string]any{"toolfs.transport": "mcp", "toolfs.tool": "write", "toolfs.code": "OK", "toolfs.session": telemetry.SessionDigest("default"), "toolfs.bytes_written": int64(3)},
		codes.Unset, ""}, summary(got[0]))
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", got[0].SpanContext.TraceID().String())
	assert.True(t, strings.HasPrefix(got[0].Name, telemetry.SpanPrefix))
}
