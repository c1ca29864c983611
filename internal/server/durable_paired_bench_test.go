package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// BenchmarkDurablePaired measures SPEC §28's ratios on a loaded machine:
// each writer sends the same call, alternately, to a server that records
// nothing and to one that records (rec=ckpt, audit or both), with the
// journal on or off (--journal=false, the sync per record), so load that
// drifts during the run falls on both sides alike. It reports x-vs-none,
// the recording server's time over the bare one's, besides its time per
// call. Both servers are warmed first (pairedWarmCalls). Compare with
// benchstat -col /journal on the x-vs-none column.
func BenchmarkDurablePaired(b *testing.B) {
	for _, writers := range []int{1, 32} {
		for _, tool := range []string{"write", "edit"} {
			for _, rec := range []string{"ckpt", "audit", "both"} {
				for _, journal := range []bool{true, false} {
					b.Run(fmt.Sprintf("writers=%d/%s/rec=%s/journal=%v", writers, tool, rec, journal), func(b *testing.B) {
						benchPaired(b, writers, tool, rec, journal)
					})
				}
			}
		}
	}
}

func benchPaired(b *testing.B, writers int, tool, rec string, journal bool) {
	bare := servertest.Start(b, server.Config{Sessions: tools.SessionSettings{Default: "bench"}, Checkpoints: checkpoint.Settings{Enabled: false}})
	cfg := server.Config{Checkpoints: checkpoint.Settings{Enabled: rec == "ckpt" || rec == "both"}, Sessions: tools.SessionSettings{Default: "bench"}, NoJournal: !journal}
	if rec == "audit" || rec == "both" {
		cfg.Audit.Path = filepath.Join(b.TempDir(), "audit.log")
	}
	recording := servertest.Start(b, cfg)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	defer hc.CloseIdleConnections()
	body := strings.Repeat(strings.Repeat("x", 63)+"\n", (60<<10)/64)
	for _, root := range []string{bare.Root, recording.Root} {
		for w := 1; w <= writers; w++ {
			if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("w%d.txt", w)), []byte(fmt.Sprintf("%010d\n", 0)+body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	var ids atomic.Int64
	var tBare, tRec atomic.Int64
	call := func(base, path string, i int) time.Duration {
		var args map[string]any
		prev, now := fmt.Sprintf("%010d\n", i), fmt.Sprintf("%010d\n", i+1)
		if tool == "write" {
			args = map[string]any{"file_path": path, "content": now + body}
		} else {
			args = map[string]any{"file_path": path, "old_string": prev, "new_string": now}
		}
		start := time.Now()
		if err := postTool(hc, base, tool, args); err != nil {
			b.Error(err)
		}
		return time.Since(start)
	}
	loop := func(next func() bool) {
		path := fmt.Sprintf("w%d.txt", ids.Add(1))
		for i := 0; next(); i++ {
			if i%2 == 0 {
				tBare.Add(int64(call(bare.URL, path, i)))
				tRec.Add(int64(call(recording.URL, path, i)))
			} else {
				tRec.Add(int64(call(recording.URL, path, i)))
				tBare.Add(int64(call(bare.URL, path, i)))
			}
		}
	}
	// Warm both servers as a running server is: with checkpoints, its
	// journal past its first seals (docs/journal.md, "Bounds").
	for i := range pairedWarmCalls {
		for _, base := range []string{bare.URL, recording.URL} {
			if err := postTool(hc, base, "write", map[string]any{"file_path": "warm.txt", "content": fmt.Sprintf("%010d\n", i) + body}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	if writers == 1 {
		n := 0
		loop(func() bool { n++; return n <= b.N })
	} else {
		b.SetParallelism(writers / max(1, testingProcs()))
		b.RunParallel(func(pb *testing.PB) { loop(pb.Next) })
	}
	b.StopTimer()
	b.ReportMetric(float64(tRec.Load())/float64(max(1, tBare.Load())), "x-vs-none")
	b.ReportMetric(float64(tRec.Load())/float64(b.N), "rec-ns/call")
	b.ReportMetric(float64(tBare.Load())/float64(b.N), "none-ns/call")
}

// pairedWarmCalls is how many 60 KiB writes each server of a pair takes
// before it is timed: 18 MiB of kept contents, two seals of a
// checkpointed server's 8 MiB segments.
const pairedWarmCalls = 300

// postTool calls tool on base and reads the answer to its end: a
// connection whose answer was left unread is not reused (a new one per
// call would add the same cost to both sides and hide the ratio).
func postTool(hc *http.Client, base, tool string, args map[string]any) error {
	raw, _ := json.Marshal(args)
	resp, err := hc.Post(base+"/tools/"+tool, "application/json", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d", tool, resp.StatusCode)
	}
	return nil
}
