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

// BenchmarkMoveCost is a move through the whole server against a write of
// the same bytes, the baseline, in one run (docs/files.md, "Move, delete
// and mkdir"): policy off, checkpoints off and on (a file's move keeps the
// source's content for its revert). Each iteration moves the file back and
// forth. Compare with benchstat -col /op.
func BenchmarkMoveCost(b *testing.B) {
	for _, size := range []int{60 << 10, 10 << 20} {
		for _, on := range []bool{false, true} {
			for _, op := range []string{"write", "move"} {
				b.Run(fmt.Sprintf("size=%dKiB/ckpt=%v/op=%s", size>>10, on, op), func(b *testing.B) { benchMove(b, op, size, on) })
			}
		}
	}
}

func benchMove(b *testing.B, op string, size int, on bool) {
	srv := servertest.Start(b, server.Config{Checkpoints: checkpoint.Settings{Enabled: on}, Sessions: tools.SessionSettings{Default: "bench"}})
	line := strings.Repeat("x", 63) + "\n"
	body := strings.Repeat(line, size/len(line))
	if err := os.WriteFile(filepath.Join(srv.Root, "a.txt"), []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		args := map[string]any{"file_path": "a.txt", "content": fmt.Sprintf("%010d\n", i) + body}
		if op == "move" {
			from, to := "a.txt", "b.txt"
			if i%2 == 1 {
				from, to = to, from
			}
			args = map[string]any{"from": from, "to": to}
		}
		raw, _ := json.Marshal(args)
		resp, err := http.Post(srv.URL+"/tools/"+op, "application/json", bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", op, resp.StatusCode)
		}
	}
}
