package mcp_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// benchFiles names each benchmark write's new file, across runs.
var benchFiles atomic.Int64

// What asking the client's user costs the server and the wire: an
// escalated write (a new 2-line file) approved at once by the Go SDK
// client's elicitation handler, on 2026-07-28 (the call, its input_required
// answer with the sealed state, the retry) and on 2025-11-25 (the call, the
// elicitation request on the GET stream and its answer), against the
// baseline in the same run, the same write on an unfenced server.
// docs/sandbox.md, "Approving in the client", has the figures.
//
//	go test -run '^$' -bench EscalatedWrite -benchtime 500x ./internal/mcp
func BenchmarkEscalatedWrite(b *testing.B) {
	plain := &harness{t: b, srv: servertest.Start(b, server.Config{
		Policy: policy.Settings{Enabled: true, TTL: time.Hour}, MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
	})}
	fencedSrv := fenced(b, "", time.Minute)
	for _, tc := range []struct {
		name    string
		h       *harness
		version string
		esc     bool
	}{
		{"unfenced-2026-07-28", plain, "", false},
		{"elicited-2026-07-28", fencedSrv, "", true},
		{"unfenced-2025-11-25", plain, "2025-11-25", false},
		{"elicited-2025-11-25", fencedSrv, "2025-11-25", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.h.connectAsking(tc.version, &asked{answer: answer("approve")}, nil, "X-Session-ID", "bench-"+tc.name)
			for b.Loop() {
				i := benchFiles.Add(1)
				args := map[string]any{"file_path": fmt.Sprintf("%s-%d.txt", tc.name, i), "content": "one\ntwo\n"}
				if tc.esc {
					args = escalated(fmt.Sprintf("%s-%d.txt", tc.name, i), "one\ntwo\n")
				}
				res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: args})
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}
