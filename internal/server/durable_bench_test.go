package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// BenchmarkDurableCost is what the durable records cost a 60 KiB write
// and an edit through the whole server (SPEC §28, docs/performance.md
// "One sync per change"): the same calls over loopback HTTP at 1 and 32
// writers (each its own file), with nothing recorded (rec=none, the
// baseline), checkpoints (rec=ckpt), the audit log (rec=audit) and both
// (rec=both). Compare with benchstat -col /rec.
func BenchmarkDurableCost(b *testing.B) {
	for _, writers := range []int{1, 32} {
		for _, tool := range []string{"write", "edit"} {
			for _, rec := range []string{"none", "ckpt", "audit", "both"} {
				b.Run(fmt.Sprintf("writers=%d/%s/rec=%s", writers, tool, rec), func(b *testing.B) {
					benchDurable(b, writers, tool, rec)
				})
			}
		}
	}
}

func benchDurable(b *testing.B, writers int, tool, rec string) {
	cfg := server.Config{Checkpoints: checkpoint.Settings{Enabled: rec == "ckpt" || rec == "both"}, Sessions: tools.SessionSettings{Default: "bench"}}
	if rec == "audit" || rec == "both" {
		cfg.Audit.Path = filepath.Join(b.TempDir(), "audit.log")
	}
	srv := servertest.Start(b, cfg)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	line := strings.Repeat("x", 63) + "\n"
	body := strings.Repeat(line, (60<<10)/len(line))
	for w := 1; w <= writers; w++ {
		if err := os.WriteFile(filepath.Join(srv.Root, fmt.Sprintf("w%d.txt", w)), []byte(fmt.Sprintf("%010d\n", 0)+body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var ids atomic.Int64
	loop := func(next func() bool) {
		w := ids.Add(1)
		path := fmt.Sprintf("w%d.txt", w)
		for i := 0; next(); i++ {
			var args map[string]any
			prev, now := fmt.Sprintf("%010d\n", i), fmt.Sprintf("%010d\n", i+1)
			if tool == "write" {
				args = map[string]any{"file_path": path, "content": now + body}
			} else {
				args = map[string]any{"file_path": path, "old_string": prev, "new_string": now}
			}
			raw, _ := json.Marshal(args)
			resp, err := hc.Post(srv.URL+"/tools/"+tool, "application/json", bytes.NewReader(raw))
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("%s: %d", tool, resp.StatusCode)
				return
			}
		}
	}
	b.ResetTimer()
	if writers == 1 {
		n := 0
		loop(func() bool { n++; return n <= b.N })
		return
	}
	b.SetParallelism(writers / max(1, testingProcs()))
	b.RunParallel(func(pb *testing.PB) { loop(pb.Next) })
}
