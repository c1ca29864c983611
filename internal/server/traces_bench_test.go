package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/telemetry"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// discardSpans is an exporter that drops every span it is handed.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkTraceCost is what a span per call adds to a read of a 4 KiB
// file through the whole server over loopback HTTP (docs/running.md,
// "Traces"): traces off, and on with every span made, told its outcome and
// handed to an exporter that drops it. Compare with benchstat -col
// /traces.
func BenchmarkTraceCost(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("traces=%v", on), func(b *testing.B) {
			cfg := server.Config{Sessions: tools.SessionSettings{Default: "bench"}}
			if on {
				cfg.Telemetry = telemetry.Settings{Exporter: discardSpans{}}
			}
			srv := servertest.Start(b, cfg)
			if err := os.WriteFile(filepath.Join(srv.Root, "a.txt"), []byte(strings.Repeat(strings.Repeat("x", 63)+"\n", 64)), 0o644); err != nil {
				b.Fatal(err)
			}
			hc := &http.Client{}
			defer hc.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := hc.Post(srv.URL+"/tools/read", "application/json", strings.NewReader(`{"file_path":"a.txt"}`))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("read: %d", resp.StatusCode)
				}
			}
		})
	}
}
