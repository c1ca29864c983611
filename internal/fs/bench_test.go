package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each benchmark carries its baseline: the same work done with plain os
// calls and no confinement, guard or lock.
//
//	go test -run '^$' -bench . -benchmem -count 5 ./internal/fs/

func benchFixture(b *testing.B) (*Local, string) {
	root := b.TempDir()
	l, err := NewLocal(root, LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l, root
}

func BenchmarkStat(b *testing.B) {
	l, root := benchFixture(b)
	p := filepath.Join(root, "a", "b", "c", "f.txt")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("local", func(b *testing.B) {
		ctx := context.Background()
		tg, err := l.Resolve(ctx, "read", "a/b/c/f.txt", "")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := l.Stat(ctx, tg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-os.Stat", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.Stat(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// baselineWrite is the plain atomic write: temp file, fsync, rename.
func baselineWrite(b *testing.B, path string, content []byte) {
	f, err := os.CreateTemp(filepath.Dir(path), ".bench-*")
	if err == nil {
		_, err = f.Write(content)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkWrite1MiB(b *testing.B) {
	content := strings.Repeat("0123456789abcde\n", 1<<16) // 1 MiB of text
	b.Run("local-guarded", func(b *testing.B) {
		l, _ := benchFixture(b)
		ctx := context.Background()
		tg, err := l.Resolve(ctx, "write", "f.txt", "")
		if err != nil {
			b.Fatal(err)
		}
		out, err := l.WriteText(ctx, tg, content, &WriteIntent{Kind: CreateIfAbsent})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			if out, err = l.WriteText(ctx, tg, content, &WriteIntent{Kind: ReplaceIfVersion, Version: out.Version}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline", func(b *testing.B) {
		_, root := benchFixture(b)
		p, raw := filepath.Join(root, "f.txt"), []byte(content)
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			baselineWrite(b, p, raw)
		}
	})
}

func BenchmarkEdit10MiB(b *testing.B) {
	content := bytes.Repeat([]byte("0123456789abcde\n"), 10<<16) // 10 MiB of text
	copy(content[len(content)/2:], "NEEDLE")
	b.Run("local-guarded", func(b *testing.B) {
		benchEdits(b, content, nil)
	})
	// The extended profile's edit (Tolerant) on the same literal match:
	// its cost over local-guarded is the tolerant edit's on the streamed
	// path (docs/performance.md).
	b.Run("local-guarded-tolerant", func(b *testing.B) {
		benchEditsWith(b, content, [2]EditRequest{
			{OldString: "NEEDLE", NewString: "PINPIN", Tolerant: true}, {OldString: "PINPIN", NewString: "NEEDLE", Tolerant: true}}, nil)
	})
	// An edit found at the indentation level (4): the file is loaded and
	// the levels after 1 run over it. Baseline: local-guarded.
	b.Run("tolerant-level-4", func(b *testing.B) {
		indented := bytes.Clone(content)
		copy(indented[len(indented)/2:], "  NEEDLE\n  NEEDLE\n")
		benchEditsWith(b, indented, [2]EditRequest{
			{OldString: "NEEDLE\nNEEDLE", NewString: "PINPIN\nPINPIN", Tolerant: true}, {OldString: "PINPIN\nPINPIN", NewString: "NEEDLE\nNEEDLE", Tolerant: true}},
			func(out EditOutcome) {
				if len(out.Tolerances) != 1 || out.Tolerances[0].Level != LevelIndent {
					b.Fatalf("not found at level 4: %+v", out.Tolerances)
				}
			})
	})
	b.Run("baseline", func(b *testing.B) {
		_, root := benchFixture(b)
		p := filepath.Join(root, "f.txt")
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			baselineWrite(b, p, content)
		}
	})
}

// BenchmarkEditDiffBasis9MiB is an edit just below the diff-basis limit:
// the provider also keeps the LF-normalized text before and after (for the
// hunks). Its baseline is BenchmarkEdit10MiB's, which keeps none.
func BenchmarkEditDiffBasis9MiB(b *testing.B) {
	content := bytes.Repeat([]byte("0123456789abcde\n"), 9<<16) // 9 MiB of text
	copy(content[len(content)/2:], "NEEDLE")
	b.ReportAllocs()
	benchEdits(b, content, func(out EditOutcome) {
		if out.Before == nil || len(*out.Before) != len(content) {
			b.Fatal("no diff basis below the limit")
		}
	})
}

// benchEdits times guarded edits of content that swap one unique needle back
// and forth, so every edit has the same size; check, if set, sees each outcome.
func benchEdits(b *testing.B, content []byte, check func(EditOutcome)) {
	benchEditsWith(b, content, [2]EditRequest{{OldString: "NEEDLE", NewString: "PINPIN"}, {OldString: "PINPIN", NewString: "NEEDLE"}}, check)
}

// benchEditsWith is benchEdits with the two edits given.
func benchEditsWith(b *testing.B, content []byte, edits [2]EditRequest, check func(EditOutcome)) {
	l, root := benchFixture(b)
	if err := os.WriteFile(filepath.Join(root, "f.txt"), content, 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	tg, err := l.Resolve(ctx, "edit", "f.txt", "")
	if err != nil {
		b.Fatal(err)
	}
	info, err := l.Stat(ctx, tg)
	if err != nil {
		b.Fatal(err)
	}
	v := info.Version
	b.SetBytes(int64(len(content)))
	i := 0
	for b.Loop() {
		out, err := l.EditText(ctx, tg, edits[i%2], &v)
		if err != nil {
			b.Fatal(err)
		}
		if check != nil {
			check(out)
		}
		v, i = out.Version, i+1
	}
}

// BenchmarkResolveDotDot resolves the CPU-amplification path of
// TestResolveDotDotBounded (1,900 nested folders, a link repeating "a/.."
// 800 times). Baseline, measured on the code that re-walked the path from
// the root at every "..": 1.07 s/op.
func BenchmarkResolveDotDot(b *testing.B) {
	l, root := benchFixture(b)
	p := dotDotTree(b, root, 1900, 800)
	ctx := context.Background()
	for b.Loop() {
		if _, err := l.Resolve(ctx, "read", p, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLock is what a mutation pays for its locks: in-process only
// (the baseline), and with the cross-process flock on a bucket file in
// <root>/.toolfs-api/locks. Measured before, with the lock files opened by
// path under $TMPDIR: 0.51 µs in-process, 3.1 µs with the lock file.
func BenchmarkLock(b *testing.B) {
	eachLockSetting(b, func(b *testing.B, l *Local, tg Target) {
		for b.Loop() {
			unlock, err := l.lockTarget(context.Background(), tg.Key)
			if err != nil {
				b.Fatal(err)
			}
			unlock()
		}
	})
}

// eachLockSetting runs body on a fresh provider per lock setting (in-process
// only, the baseline; and shared), with the target f.txt resolved.
func eachLockSetting(b *testing.B, body func(b *testing.B, l *Local, tg Target)) {
	for _, tt := range []struct {
		name string
		opts LocalOptions
	}{
		{"in-process-only", LocalOptions{InProcessLocksOnly: true}},
		{"shared", LocalOptions{}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			l, err := NewLocal(b.TempDir(), tt.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			tg, err := l.Resolve(context.Background(), "write", "f.txt", "")
			if err != nil {
				b.Fatal(err)
			}
			body(b, l, tg)
		})
	}
}

// BenchmarkWriteSmall is a whole 1 KiB write with each lock setting, so the
// lock's share of a write shows (the fsyncs dominate).
func BenchmarkWriteSmall(b *testing.B) {
	content := strings.Repeat("0123456789abcde\n", 64)
	eachLockSetting(b, func(b *testing.B, l *Local, tg Target) {
		for b.Loop() {
			if _, err := l.WriteText(context.Background(), tg, content, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
