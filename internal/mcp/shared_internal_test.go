package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/redistest"
)

// What a request of a shared MCP session adds: one GETEX (touch), against
// the put of its initialize; docs/decisions.md, "MCP sessions across
// replicas".
//
//	go test -run '^$' -bench SharedTouch -benchtime 5000x ./internal/mcp
func BenchmarkSharedTouch(b *testing.B) {
	rs := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: rs.Addr, DB: 6})
	defer c.Close()
	s := &sharedSessions{client: c, prefix: "bench:", ttl: time.Hour}
	ctx := context.Background()
	params := encodeParams(&sdk.InitializeParams{ProtocolVersion: "2025-11-25", Capabilities: &sdk.ClientCapabilities{},
		ClientInfo: &sdk.Implementation{Name: "bench", Version: "1"}})
	if err := s.put(ctx, "ID", params); err != nil {
		b.Fatal(err)
	}
	b.Run("put", func(b *testing.B) {
		for b.Loop() {
			if err := s.put(ctx, "ID", params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("touch", func(b *testing.B) {
		for b.Loop() {
			if _, state, err := s.touch(ctx, "ID"); err != nil || state != sessionLive {
				b.Fatal(state, err)
			}
		}
	})
}

// TestEncodeParamsBounded: initialize params past maxParams are kept as
// their protocol version and (truncated) client name.
func TestEncodeParamsBounded(t *testing.T) {
	p := &sdk.InitializeParams{ProtocolVersion: "2025-06-18", ClientInfo: &sdk.Implementation{Name: strings.Repeat("x", 10000), Version: "1"},
		Capabilities: &sdk.ClientCapabilities{}}
	b := encodeParams(p)
	if len(b) > maxParams {
		t.Fatalf("%d bytes kept", len(b))
	}
	if want := `"protocolVersion":"2025-06-18"`; !strings.Contains(string(b), want) {
		t.Fatalf("%s lacks %s", b, want)
	}
}
