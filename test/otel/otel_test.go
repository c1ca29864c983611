// Package otel tests the traces against a real OTLP receiver
// (docs/running.md, "Traces"): the OpenTelemetry Collector that
// test/otelcol/build.sh builds, named by TOOLFS_OTELCOL_BIN, and the real
// toolfs-api binary sending it spans. Without TOOLFS_OTELCOL_BIN it skips.
package otel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// collectorBin is the collector test/otelcol/build.sh built ("": skip).
var collectorBin = os.Getenv("TOOLFS_OTELCOL_BIN")

// serverBin is the toolfs-api binary TestMain built.
var serverBin string

func TestMain(m *testing.M) {
	if collectorBin == "" {
		os.Exit(m.Run()) // every test skips: no binary to build
	}
	os.Exit(servertest.RunWithBinary(m, &serverBin))
}

// collector is a running collector: its OTLP ports and the file its file
// exporter writes every batch to, one OTLP JSON line each.
type collector struct {
	httpPort, grpcPort int
	spans              string
}

// startCollector runs the collector on free loopback ports until the test
// ends, and waits until both receivers listen.
func startCollector(t *testing.T) collector {
	t.Helper()
	dir := t.TempDir()
	c := collector{httpPort: servertest.FreePort(t), grpcPort: servertest.FreePort(t), spans: filepath.Join(dir, "spans.jsonl")}
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
      grpc:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %s
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, c.httpPort, c.grpcPort, c.spans)
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	logf, err := os.Create(filepath.Join(dir, "collector.log"))
	require.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(collectorBin, "--config="+path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("collector log:\n%s", b)
		}
	})
	for _, port := range []int{c.httpPort, c.grpcPort} {
		require.Eventually(t, func() bool {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				conn.Close()
			}
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "the collector listens on %d", port)
	}
	return c
}

// span is an exported span as the collector's file holds it (OTLP JSON),
// with its resource's attributes.
type span struct {
	TraceID, SpanID, ParentSpanID, Name string
	Kind                                int
	Attrs, Resource                     map[string]any
	Status                              map[string]any
}

func attrs(list []struct {
	Key   string                     `json:"key"`
	Value map[string]json.RawMessage `json:"value"`
}) map[string]any {
	out := map[string]any{}
	for _, kv := range list {
		for typ, raw := range kv.Value {
			var v any
			json.Unmarshal(raw, &v)
			if typ == "intValue" { // OTLP JSON writes 64-bit integers as strings
				var n json.Number
				json.Unmarshal(raw, &n)
				v = "int:" + strings.Trim(n.String(), `"`)
			}
			out[kv.Key] = v
		}
	}
	return out
}

// read parses every span in the collector's file so far.
func (c collector) read(t *testing.T) map[string]span {
	b, err := os.ReadFile(c.spans)
	if err != nil {
		return nil
	}
	type kvs = []struct {
		Key   string                     `json:"key"`
		Value map[string]json.RawMessage `json:"value"`
	}
	out := map[string]span{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var doc struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes kvs `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []struct {
						TraceID      string         `json:"traceId"`
						SpanID       string         `json:"spanId"`
						ParentSpanID string         `json:"parentSpanId"`
						Name         string         `json:"name"`
						Kind         int            `json:"kind"`
						Attributes   kvs            `json:"attributes"`
						Status       map[string]any `json:"status"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &doc))
		for _, rs := range doc.ResourceSpans {
			res := attrs(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out[s.TraceID] = span{s.TraceID, s.SpanID, s.ParentSpanID, s.Name, s.Kind, attrs(s.Attributes), res, s.Status}
				}
			}
		}
	}
	return out
}

// toolfs is a running toolfs-api process.
type toolfs struct {
	cmd       *exec.Cmd
	base, log string
	auditPath string
	exited    chan struct{}
}

func startToolfs(t *testing.T, env ...string) *toolfs {
	t.Helper()
	root, dir := t.TempDir(), t.TempDir()
	p := &toolfs{log: filepath.Join(dir, "server.log"), auditPath: filepath.Join(dir, "audit.jsonl"), exited: make(chan struct{})}
	logf, err := os.Create(p.log)
	require.NoError(t, err)
	defer logf.Close()
	p.cmd = exec.Command(serverBin, "--root", root, "--addr", "127.0.0.1:0", "--log-format", "json", "--audit-log", p.auditPath)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.exited })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	_, addr, ok := strings.Cut(strings.TrimSpace(line), " on ")
	require.True(t, ok, line)
	p.base = addr
	go io.Copy(io.Discard, out)
	return p
}

// stop ends the process as an operator does (SIGTERM), which flushes the
// spans still queued.
func (p *toolfs) stop(t *testing.T) {
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("toolfs-api did not stop")
	}
}

func (p *toolfs) post(t *testing.T, path, body string, headers ...string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, p.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.NotContains(t, string(b), `"isError":true`)
	return string(b)
}

// byRequest is a JSON-lines file's field of each line with a request_id
// (and msg, when msg is not "").
func byRequest(t *testing.T, path, msg, field string) map[string]any {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]any{}
	for _, line := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && (msg == "" || m["msg"] == msg) {
			if id, ok := m["request_id"].(string); ok {
				out[id] = m[field]
			}
		}
	}
	return out
}

// TestTracesReachACollector: the real binary, pointed at a real collector
// by OTEL_EXPORTER_OTLP_ENDPOINT over each protocol, sends the span of a
// REST write whose traceparent header names the caller's span and of an
// MCP tools/call whose _meta.traceparent does: each span is the caller's
// span's child with the call's attributes, and the access log and the
// audit line carry the same trace id.
func TestTracesReachACollector(t *testing.T) {
	if collectorBin == "" {
		t.Skip("TOOLFS_OTELCOL_BIN is not set: build the collector with TOOLFS_OTELCOL_BIN=$(bash test/otelcol/build.sh)")
	}
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			col := startCollector(t)
			endpoint := fmt.Sprintf("http://127.0.0.1:%d", col.httpPort)
			if protocol == "grpc" {
				endpoint = fmt.Sprintf("http://127.0.0.1:%d", col.grpcPort)
			}
			p := startToolfs(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL="+protocol,
				"OTEL_SERVICE_NAME=toolfs-otel-test", "OTEL_BSP_SCHEDULE_DELAY=100")

			const (
				restTrace, restParent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
				mcpTrace, mcpParent   = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
				// telemetry.SessionDigest("s1")
				s1 = "e8bc163c82eee18733288c7d4ac636db"
			)
			p.post(t, "/tools/write", `{"file_path":"a.txt","content":"hello"}`,
				"X-Request-Id", "r-rest", "X-Session-ID", "s1", "traceparent", "00-"+restTrace+"-"+restParent+"-01")
			p.post(t, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","arguments":{"file_path":"m.txt","content":"hi mcp"},`+
				`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"traceparent":"00-`+mcpTrace+`-`+mcpParent+`-01"}}}`,
				"X-Request-Id", "r-mcp", "X-Session-ID", "s1", "Accept", "application/json, text/event-stream",
				"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "write")
			p.stop(t)

			var got map[string]span
			require.Eventually(t, func() bool {
				got = col.read(t)
				return len(got[restTrace].Name) > 0 && len(got[mcpTrace].Name) > 0
			}, 15*time.Second, 100*time.Millisecond, "both spans reach the collector's file")

			rest, mcp := got[restTrace], got[mcpTrace]
			assert.Equal(t, restParent, rest.ParentSpanID, "the header's span is the parent")
			assert.Equal(t, mcpParent, mcp.ParentSpanID, "the _meta's span is the parent")
			assert.Equal(t, "toolfs.write", rest.Name)
			assert.Equal(t, "toolfs.write", mcp.Name)
			assert.Equal(t, 2, rest.Kind, "SPAN_KIND_SERVER")
			assert.Equal(t, map[string]any{"toolfs.transport": "rest", "toolfs.tool": "write", "toolfs.code": "OK", "toolfs.session": s1,
				"toolfs.bytes_written": "int:5", "http.response.status_code": "int:200"}, rest.Attrs)
			assert.Equal(t, map[string]any{"toolfs.transport": "mcp", "toolfs.tool": "write", "toolfs.code": "OK", "toolfs.session": s1,
				"toolfs.bytes_written": "int:6"}, mcp.Attrs)
			assert.Equal(t, "toolfs-otel-test", rest.Resource["service.name"])
			assert.NotEmpty(t, rest.Resource["service.version"])

			access := byRequest(t, p.log, "request", "trace_id")
			audited := byRequest(t, p.auditPath, "", "trace_id")
			assert.Equal(t, restTrace, access["r-rest"])
			assert.Equal(t, restTrace, audited["r-rest"])
			assert.Equal(t, mcpTrace, access["r-mcp"])
			assert.Equal(t, mcpTrace, audited["r-mcp"])
		})
	}
}
