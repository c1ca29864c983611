package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// BenchmarkAuditCost is what --audit-log adds to writes through the whole
// server at 32 concurrent writers (docs/audit.md, "Cost"): each writer
// replaces its own 4 KiB file over loopback HTTP, every write durable
// (staged, fsynced, renamed, folder synced), with the audit log off and
// on, with checkpoints on (the default: their Keep already hashes the
// replaced content) and off (the audit's own Keep hashes it). Compare
// with benchstat -col /audit.
func BenchmarkAuditCost(b *testing.B) {
	for _, ckpt := range []bool{true, false} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("ckpt=%v/audit=%v", ckpt, on), func(b *testing.B) { benchAudit(b, ckpt, on) })
		}
	}
}

func benchAudit(b *testing.B, ckpt, on bool) {
	cfg := server.Config{Checkpoints: checkpoint.Settings{Enabled: ckpt}, Sessions: tools.SessionSettings{Default: "bench"}}
	if on {
		cfg.Audit.Path = filepath.Join(b.TempDir(), "audit.log")
	}
	srv := servertest.Start(b, cfg)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	body := strings.Repeat(strings.Repeat("x", 63)+"\n", 64)
	var writers atomic.Int64
	b.SetParallelism(32 / max(1, testingProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := writers.Add(1)
		path := fmt.Sprintf("w%d.txt", w)
		for i := 0; pb.Next(); i++ {
			raw, _ := json.Marshal(map[string]any{"file_path": path, "content": fmt.Sprintf("%010d\n", i) + body})
			resp, err := hc.Post(srv.URL+"/tools/write", "application/json", bytes.NewReader(raw))
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("write: %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	if on {
		st := srv.AuditStats()
		b.ReportMetric(float64(st.Records)/float64(max(1, st.Syncs)), "records/fsync")
	}
}

// testingProcs is GOMAXPROCS, which RunParallel multiplies the
// parallelism by.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
