package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tfs "github.com/toolfs/toolfs-api/internal/fs"
)

// The cost of recording a checkpoint: the same write or edit with and
// without a Recording (docs/checkpoints.md, "Cost"):
//
//	go test -run '^$' -bench . -benchmem -count 8 ./internal/checkpoint/ > new.txt
//	benchstat -col /keeper new.txt
//
// Every iteration replaces different bytes, so no kept content is
// deduplicated.
func BenchmarkRecord(b *testing.B) {
	for _, size := range []int{60 << 10, 10 << 20} {
		for _, op := range []string{"write", "edit"} {
			for _, keeper := range []string{"none", "checkpoint"} {
				b.Run(fmt.Sprintf("size=%s/op=%s/keeper=%s", sizeName(size), op, keeper), func(b *testing.B) {
					benchRecord(b, size, op, keeper == "checkpoint")
				})
			}
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func benchRecord(b *testing.B, size int, op string, keep bool) {
	root := b.TempDir()
	line := "some text of a source file, about sixty bytes of it, ok.\n"
	body := strings.Repeat(line, size/len(line)+1)[:size-16]
	head := func(i int) string { return fmt.Sprintf("head %010d\n", i) }
	if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte(head(0)+body), 0o644); err != nil {
		b.Fatal(err)
	}
	l, err := tfs.NewLocal(root, tfs.LocalOptions{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	s, err := Open(context.Background(), Options{FS: l, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tg, err := l.Resolve(ctx, "write", "f.txt", "")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	i := 0
	for b.Loop() {
		i++
		var keeper tfs.Keeper
		if keep {
			keeper = s.Recording("bench", op)
		}
		switch op {
		case "write":
			_, err = l.WriteText(ctx, tg, head(i)+body, &tfs.WriteIntent{Keeper: keeper})
		default:
			_, err = l.EditText(ctx, tg, tfs.EditRequest{OldString: head(i - 1), NewString: head(i), Keeper: keeper}, nil)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if keep {
		st, err := os.Stat(filepath.Join(root, tfs.PrivateDir, "checkpoints", "sessions", logName("bench")))
		if err == nil {
			cs, _ := s.Changes(ctx, "bench")
			if len(cs) > 0 {
				b.ReportMetric(float64(st.Size())/float64(len(cs)), "log-B/change")
			}
		}
	}
}

// BenchmarkSealSyncs: a seal's syncs of 128 kept contents of 60 KiB (an
// 8 MiB segment's), written just before, one after another against
// sealSyncs at once (docs/performance.md, "The seal's syncs side by side
// (issue 45)").
func BenchmarkSealSyncs(b *testing.B) {
	content := []byte(strings.Repeat("0123456789abcdef", 60<<10/16))
	for _, n := range []int{1, sealSyncs} {
		b.Run(fmt.Sprintf("at-once=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			d, err := os.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			names := make([]string, 128)
			for i := range b.N {
				b.StopTimer()
				for k := range names {
					names[k] = fmt.Sprintf("%d-%d", i, k)
					if err := os.WriteFile(filepath.Join(dir, names[k]), content, 0o600); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := syncEach(int(d.Fd()), slices.Values(names), n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
