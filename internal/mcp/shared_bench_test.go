package mcp_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// What sharing the MCP sessions through Redis costs a call: a read of a
// one-line file (so the transport's share shows) through REST, /mcp on a
// revision with sessions and /mcp on the sessionless 2026-07-28, with the
// memory store and with Redis; and the adoption of a session minted on one
// replica by another (initialize on A, first call on B) against both on A.
// docs/decisions.md, "MCP sessions across replicas", has the figures.
//
//	go test -run '^$' -bench SharedSessions -benchtime 2000x ./internal/mcp
func BenchmarkSharedSessions(b *testing.B) {
	rs := redistest.Start(b)
	root, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	start := func(store string) *servertest.Server {
		return servertest.Start(b, server.Config{Root: root, Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100000}, SessionStore: store,
			MaxBodyBytes: 32 << 20, StreamWriteWindow: 10 * time.Second})
	}
	read := map[string]any{"file_path": "a.txt"}
	for _, store := range []string{"memory", "redis"} {
		url := "memory"
		if store == "redis" {
			url = rs.URL(4)
		}
		srv := start(url)
		h := &harness{t: b, srv: srv}
		for _, tr := range []struct {
			name string
			dial func() caller
		}{
			{"rest", func() caller { return restCaller(srv.URL) }},
			{"mcp-2025-11-25", func() caller { return h.mcpCaller(b, "2025-11-25") }},
			{"mcp-2026-07-28", func() caller { return h.mcpCaller(b, "") }},
		} {
			call := tr.dial()
			call(b, "read", read)
			b.Run(store+"/"+tr.name+"/read", func(b *testing.B) {
				for b.Loop() {
					call(b, "read", read)
				}
			})
		}
	}
	a, other := start(rs.URL(5)), start(rs.URL(5))
	for _, c := range []struct {
		name string
		then *servertest.Server
	}{{"initialize-then-call-same-replica", a}, {"initialize-then-call-other-replica", other}} {
		b.Run("redis/"+c.name, func(b *testing.B) {
			for b.Loop() {
				status, id, body := post(b, a.URL, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`)
				if status != 200 {
					b.Fatal(status, body)
				}
				if status, _, body := post(b, c.then.URL, id, "2025-11-25", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
					b.Fatal(status, body)
				}
				if status, _, body := post(b, c.then.URL, id, "2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != 200 {
					b.Fatal(status, body)
				}
			}
		})
	}
}
