package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// Per-call latency of read, write and edit of one ~60 KiB, 2,000-line file
// over real loopback HTTP, policy on, one session: through /mcp with the Go
// SDK's client (the sessionless 2026-07-28 and the stateful 2025-11-25),
// and the baseline, the same calls through REST with a keep-alive
// http.Client. docs/performance.md, "MCP at the speed of REST", has the figures.
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/mcp

func benchFile() string {
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&b, "\tv%04d := compute(a, b) * %04d // %s\n", i, i%97, strings.Repeat("x", 2))
	}
	return b.String()
}

// caller runs one tool call and fails the benchmark on a tool error.
type caller func(b *testing.B, tool string, args map[string]any)

func BenchmarkCall(b *testing.B) {
	srv := servertest.Start(b, server.Config{
		Policy:       policy.Settings{Enabled: true, TTL: time.Hour},
		MaxBodyBytes: 32 << 20, StreamWriteWindow: 10 * time.Second,
	})
	content := benchFile()
	require.NoError(b, os.WriteFile(filepath.Join(srv.Root, "src.go"), []byte(content), 0o644))
	h := &harness{t: b, srv: srv}

	transports := []struct {
		name string
		dial func() caller
	}{
		{"rest", func() caller { return restCaller(srv.URL) }},
		{"mcp-2026-07-28", func() caller { return h.mcpCaller(b, "") }},
		{"mcp-2025-11-25", func() caller { return h.mcpCaller(b, "2025-11-25") }},
	}
	for _, tr := range transports {
		call := tr.dial()
		call(b, "read", map[string]any{"file_path": "src.go"})
		b.Run(tr.name+"/read", func(b *testing.B) {
			for b.Loop() {
				call(b, "read", map[string]any{"file_path": "src.go"})
			}
		})
		b.Run(tr.name+"/write", func(b *testing.B) {
			for b.Loop() {
				call(b, "write", map[string]any{"file_path": "src.go", "content": content})
			}
		})
		b.Run(tr.name+"/edit", func(b *testing.B) {
			i := 0
			for b.Loop() {
				from, to := "v1000 :=", "w1000 :="
				if i%2 == 1 {
					from, to = to, from
				}
				call(b, "edit", map[string]any{"file_path": "src.go", "old_string": from, "new_string": to})
				i++
			}
		})
	}
}

// mcpCaller connects one MCP client with the session header "bench".
func (h *harness) mcpCaller(b *testing.B, version string) caller {
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: h.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: plain{http.Header{"X-Session-Id": {"bench"}}}}, DisableStandaloneSSE: true,
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(b, err)
	b.Cleanup(func() { cs.Close() })
	return func(b *testing.B, tool string, args map[string]any) {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatal(res.Content[0].(*sdk.TextContent).Text)
		}
	}
}

// restCaller posts each call to /tools/<tool> with the session header
// "bench" over one keep-alive client, and decodes the answer as a client
// would.
func restCaller(base string) caller {
	client := &http.Client{}
	return func(b *testing.B, tool string, args map[string]any) {
		body, err := json.Marshal(args)
		if err != nil {
			b.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, base+"/tools/"+tool, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-ID", "bench")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			Output string `json:"output"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatal(resp.StatusCode, err, r.Output)
		}
	}
}

// plain adds headers without recording bodies.
type plain struct{ header http.Header }

func (p plain) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range p.header {
		req.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(req)
}

// BenchmarkWire is BenchmarkCall with the client's own work taken out: each
// call is one POST of bytes encoded once up front, its answer read and
// checked for the tool's success marker but not decoded, so the figures
// are the server's (and loopback HTTP's) for REST and for /mcp alike.
// docs/performance.md, "MCP at the speed of REST", has them.
//
//	go test -run '^$' -bench BenchmarkWire -benchtime 300x ./internal/mcp
func BenchmarkWire(b *testing.B) {
	srv := servertest.Start(b, server.Config{
		Policy:       policy.Settings{Enabled: true, TTL: time.Hour},
		MaxBodyBytes: 32 << 20, StreamWriteWindow: 10 * time.Second,
	})
	content := benchFile()
	require.NoError(b, os.WriteFile(filepath.Join(srv.Root, "src.go"), []byte(content), 0o644))
	h := &harness{t: b, srv: srv}
	client := &http.Client{}
	post := func(b *testing.B, path string, body []byte, headers []string, ok string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(ok)) || bytes.Contains(answer, []byte(`"isError":true`)) {
			b.Fatalf("%d %v %.300s", resp.StatusCode, err, answer)
		}
	}
	session := []string{"X-Session-ID", "bench", "Content-Type", "application/json"}
	mcpHeaders := append(append([]string{}, mcpPost...), "X-Session-ID", "bench")
	stateful := append(h.open(b, "2025-11-25"), "X-Session-ID", "bench")
	type wire struct {
		name string
		call func(b *testing.B, tool string, args map[string]any) func(b *testing.B)
	}
	encode := func(v any) []byte { out, _ := json.Marshal(v); return out }
	rpc := func(tool string, args map[string]any, meta bool) []byte {
		params := map[string]any{"name": tool, "arguments": args}
		if meta {
			params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
		}
		return encode(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	}
	wires := []wire{
		{"rest", func(b *testing.B, tool string, args map[string]any) func(b *testing.B) {
			body := encode(args)
			return func(b *testing.B) { post(b, "/tools/"+tool, body, session, `"output"`) }
		}},
		{"mcp-2026-07-28", func(b *testing.B, tool string, args map[string]any) func(b *testing.B) {
			body := rpc(tool, args, true)
			headers := append(append([]string{}, mcpHeaders...), "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool)
			return func(b *testing.B) { post(b, "/mcp", body, headers, `"content"`) }
		}},
		{"mcp-2025-11-25", func(b *testing.B, tool string, args map[string]any) func(b *testing.B) {
			body := rpc(tool, args, false)
			return func(b *testing.B) { post(b, "/mcp", body, stateful, `"content"`) }
		}},
	}
	for _, w := range wires {
		w.call(b, "read", map[string]any{"file_path": "src.go"})(b)
		b.Run(w.name+"/read", func(b *testing.B) {
			call := w.call(b, "read", map[string]any{"file_path": "src.go"})
			reportCPU(b)
			for b.Loop() {
				call(b)
			}
		})
		b.Run(w.name+"/write", func(b *testing.B) {
			call := w.call(b, "write", map[string]any{"file_path": "src.go", "content": content})
			reportCPU(b)
			for b.Loop() {
				call(b)
			}
		})
		b.Run(w.name+"/edit", func(b *testing.B) {
			there := w.call(b, "edit", map[string]any{"file_path": "src.go", "old_string": "v1000 :=", "new_string": "w1000 :="})
			back := w.call(b, "edit", map[string]any{"file_path": "src.go", "old_string": "w1000 :=", "new_string": "v1000 :="})
			i := 0
			reportCPU(b)
			for b.Loop() {
				if i%2 == 0 {
					there(b)
				} else {
					back(b)
				}
				i++
			}
			if i%2 == 1 {
				back(b)
			}
		})
	}
}

// reportCPU reports the process CPU time (user + system, every thread: the
// server's and the client's) per iteration as "cpu-ns/op": on a machine
// shared with other work it stays close to the cost while wall time grows
// with the load. Call it right before the loop.
func reportCPU(b *testing.B) {
	start := cpuNow()
	b.Cleanup(func() {
		if n := b.N; n > 0 {
			b.ReportMetric(float64(cpuNow()-start)/float64(n), "cpu-ns/op")
		}
	})
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
