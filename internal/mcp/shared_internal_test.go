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
		ClientInfo: &sdk.Implementation{Name: "bench", Version: "1"}}, ownerOf("alice"))
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
// their protocol version and (truncated) client name, with the owner's
// digest; a record reads back its version and owner, and one of an earlier
// release (no owner) says so.
func TestEncodeParamsBounded(t *testing.T) {
	p := &sdk.InitializeParams{ProtocolVersion: "2025-06-18", ClientInfo: &sdk.Implementation{Name: strings.Repeat("x", 10000), Version: "1"},
		Capabilities: &sdk.ClientCapabilities{}, Meta: sdk.Meta{ownerKey: "forged", "TOOLFS/OWNER": "forged"}}
	owner := ownerOf(strings.Repeat("s", 5000))
	for _, b := range [][]byte{encodeParams(p, owner), encodeParams(&sdk.InitializeParams{ProtocolVersion: "2025-06-18", Meta: p.Meta}, owner)} {
		if len(b) > maxParams {
			t.Fatalf("%d bytes kept", len(b))
		}
		if got := readRecord(b); got != (record{version: "2025-06-18", owner: owner, known: true}) {
			t.Fatalf("%s read as %+v", b, got)
		}
	}
	if got := readRecord(minimalParams("", "")); got != (record{version: "2025-03-26", known: true}) {
		t.Fatalf("minimal params read as %+v", got)
	}
	if got := readRecord([]byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)); got != (record{version: "2025-11-25"}) {
		t.Fatalf("an earlier release's record read as %+v", got)
	}
}
