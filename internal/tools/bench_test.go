package tools_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// BenchmarkDeepWindow reads a window at line 10,000,000 of a generated log
// (default 1 GiB, TOOLFS_BENCH_BIG_BYTES to change; generated once in
// TOOLFS_BENCH_DIR, default the system temp folder, and kept), with the
// caches off (the baseline: every read scans the file from the top) and
// with them on, after one first read that builds the line index; each
// iteration asks for another offset, so every read misses the window
// cache and goes through the index (docs/performance.md, "Caches"):
//
//	go test -run '^$' -bench DeepWindow -benchtime 20x -count 6 ./internal/tools
func BenchmarkDeepWindow(b *testing.B) {
	size := int64(1 << 30)
	if s := os.Getenv("TOOLFS_BENCH_BIG_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	dir := os.Getenv("TOOLFS_BENCH_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("toolfs-bench-%d.log", size)
	lines := bigLog(b, filepath.Join(root, name), size)
	target := min(10_000_000, lines-2100)
	args := func(offset int) []byte {
		return fmt.Appendf(nil, `{"file_path":%q,"offset":%d}`, name, offset)
	}
	read := func(x *tools.Executor, offset int) {
		rd, terr := x.Read(context.Background(), tools.Call{Transport: "bench"}, args(offset))
		if terr != nil {
			b.Fatal(tools.Output(terr))
		}
		res, terr := rd.Window(context.Background())
		if terr != nil {
			b.Fatal(tools.Output(terr))
		}
		if res.Window.TotalLines != lines || res.Window.Lines[0].Number != offset {
			b.Fatalf("window at %d of %d lines: %+v", res.Window.Lines[0].Number, res.Window.TotalLines, res.Window.Footer)
		}
	}
	for _, tc := range []struct {
		name  string
		cache tools.CacheConfig
	}{
		{"cache=off", tools.CacheConfig{}},
		{"cache=on", tools.CacheConfig{Bytes: 64 << 20}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			x, _, _ := cachedExecutor(b, root, tc.cache)
			read(x, 1) // the first read: builds the index when the cache is on
			i := 0
			for b.Loop() {
				read(x, target+i%2000)
				i++
			}
		})
	}
}

// bigLog writes a log of about size bytes at p unless it is there, and
// returns its line count.
func bigLog(b *testing.B, p string, size int64) int {
	line := func(i int) string {
		return fmt.Sprintf("%09d 2026-12-01T06:00:00Z INFO request served path=/a/b/c status=200\n", i)
	}
	per := int64(len(line(1)))
	lines := int(size / per)
	if st, err := os.Stat(p); err == nil && st.Size() == int64(lines)*per {
		return lines
	}
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range lines {
		w.WriteString(line(i + 1))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %s: %d lines", p, lines)
	return lines
}
