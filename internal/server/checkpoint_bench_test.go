package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// BenchmarkCheckpointCost is what the checkpoints add to a write and an
// edit through the whole server (docs/checkpoints.md, "Cost"): the same
// call over HTTP with --checkpoints on and off, each iteration replacing
// different bytes (no deduplication). Compare with benchstat -col /ckpt.
func BenchmarkCheckpointCost(b *testing.B) {
	for _, size := range []int{60 << 10, 10 << 20} {
		for _, tool := range []string{"write", "edit"} {
			for _, on := range []bool{false, true} {
				name := fmt.Sprintf("%s=%dKiB/ckpt=%v", tool, size>>10, on)
				b.Run(name, func(b *testing.B) { benchMutation(b, tool, size, on) })
			}
		}
	}
}

func benchMutation(b *testing.B, tool string, size int, on bool) {
	srv := servertest.Start(b, server.Config{Checkpoints: checkpoint.Settings{Enabled: on}, Sessions: tools.SessionSettings{Default: "bench"}})
	line := strings.Repeat("x", 63) + "\n"
	body := strings.Repeat(line, size/len(line))
	path := filepath.Join(srv.Root, "f.txt")
	if err := os.WriteFile(path, []byte("0000000000\n"+body), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		var args map[string]any
		prev, next := fmt.Sprintf("%010d\n", i), fmt.Sprintf("%010d\n", i+1)
		if tool == "write" {
			args = map[string]any{"file_path": "f.txt", "content": next + body}
		} else {
			args = map[string]any{"file_path": "f.txt", "old_string": prev, "new_string": next}
		}
		raw, _ := json.Marshal(args)
		resp, err := http.Post(srv.URL+"/tools/"+tool, "application/json", bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", tool, resp.StatusCode)
		}
	}
}
