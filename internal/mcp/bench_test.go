package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// Per-call latency of read, write and edit of one ~60 KiB, 2,000-line file
// over real loopback HTTP, policy on, one session: through /mcp with the Go
// SDK's client (the sessionless 2026-07-28 and the stateful 2025-11-25),
// and the baseline, the same calls through REST with a keep-alive
// http.Client. docs/performance.md, "MCP over HTTP", has the figures.
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
		Policy:       true,
		SessionTTL:   time.Hour,
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
