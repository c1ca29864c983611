package search

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The benchmarks grep a generated tree of 20,000 files (200 folders of 100,
// one file in ten holding the needle: 2,000 matches, over the 250 cap) and
// compare Searcher.Grep with running rg directly with the same arguments.
// Baseline: BenchmarkGrepRgDirect; the overhead ratio is
// BenchmarkGrep / BenchmarkGrepRgDirect (see docs/search.md). Wall time
// on a shared machine is noisy, so each benchmark also reports CPU time per
// op of this process (self-ms/op: supervision, parsing, rendering) and of
// its children (rg-ms/op), which contention does not inflate.
//
//	go test -run '^$' -bench 'Grep' -benchtime 20x ./internal/search

var (
	benchTreeOnce sync.Once
	benchTreeDir  string
	benchTreeErr  error
)

// benchTree builds the tree once per process, outside any timing.
func benchTree(b *testing.B) string {
	benchTreeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "search-bench-")
		if err != nil {
			benchTreeErr = err
			return
		}
		benchTreeDir, benchTreeErr = filepath.EvalSymlinks(dir)
		body := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit\n", 20)
		for d := range 200 {
			sub := filepath.Join(benchTreeDir, fmt.Sprintf("pkg%03d", d))
			if benchTreeErr = os.MkdirAll(sub, 0o755); benchTreeErr != nil {
				return
			}
			for f := range 100 {
				content := body
				if f%10 == 0 {
					content += "func needle() {}\n"
				}
				name := filepath.Join(sub, fmt.Sprintf("file%03d.go", f))
				if benchTreeErr = os.WriteFile(name, []byte(content), 0o644); benchTreeErr != nil {
					return
				}
			}
		}
	})
	require.NoError(b, benchTreeErr)
	return benchTreeDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTreeDir != "" {
		os.RemoveAll(benchTreeDir)
	}
	os.Exit(code)
}

func BenchmarkGrep(b *testing.B) {
	requireRg(b)
	root := benchTree(b)
	w := workspaceAt(b, root)
	s := New(Config{})
	cwd := w.cwd("")
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		res, err := s.Grep(context.Background(), w.fsys, cwd, "needle", nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.HasPrefix(res.Output, "Found 250 of 2000 matches") {
			b.Fatalf("unexpected output %.80q", res.Output)
		}
	}
}

func BenchmarkGrepRgDirect(b *testing.B) {
	requireRg(b)
	root := benchTree(b)
	rg, err := exec.LookPath("rg")
	require.NoError(b, err)
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		cmd := exec.Command(rg, append([]string{"--no-config"}, grepArgs(privateGlobs(workspaceAt(b, root).fsys), "needle", "", "")...)...)
		cmd.Dir = root
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, out); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU starts measuring CPU time; the returned func reports it per op.
func reportCPU(b *testing.B) func() {
	self0, children0 := cpuTimes(b)
	return func() {
		self1, children1 := cpuTimes(b)
		n := float64(b.N)
		b.ReportMetric(float64((self1-self0).Microseconds())/1000/n, "self-ms/op")
		b.ReportMetric(float64((children1-children0).Microseconds())/1000/n, "rg-ms/op")
	}
}

// cpuTimes is the user+system CPU time of this process and of its reaped
// children.
func cpuTimes(b *testing.B) (self, children time.Duration) {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	children = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return self, children
}

// BenchmarkSandbox measures what the Landlock sandbox costs per search: the
// re-exec of the server binary that confines itself before it execs rg
// (docs/search.md, "Confinement"). Baseline: the same Searcher without the
// sandbox. "small" greps a 10-file folder, where the fixed cost of starting
// rg dominates; "tree" the 20,000-file tree above.
//
//	go test -run '^$' -bench Sandbox -benchtime 200x -count 5 ./internal/search
func BenchmarkSandbox(b *testing.B) {
	requireRg(b)
	requireLandlock(b)
	small := b.TempDir()
	for i := range 10 {
		require.NoError(b, os.WriteFile(filepath.Join(small, fmt.Sprintf("f%d.txt", i)), []byte("a needle here\n"), 0o644))
	}
	for _, tree := range []struct {
		name, root, want string
	}{
		{"small", small, "Found 10 matches"},
		{"tree", benchTree(b), "Found 250 of 2000 matches"},
	} {
		for _, mode := range []struct {
			name string
			s    *Searcher
		}{
			{"confined", New(Config{})},
			{"unconfined", newSearcher(Config{})},
		} {
			b.Run(tree.name+"/"+mode.name, func(b *testing.B) {
				w := workspaceAt(b, tree.root)
				cwd := w.cwd("")
				defer reportCPU(b)()
				for b.Loop() {
					res, err := mode.s.Grep(context.Background(), w.fsys, cwd, "needle", nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					if !strings.HasPrefix(res.Output, tree.want) {
						b.Fatalf("unexpected output %.80q", res.Output)
					}
				}
			})
		}
	}
}
