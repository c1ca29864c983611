package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	content := bytes.Repeat([]byte("0123456789abcde\n"), 1<<16) // 1 MiB of text
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
		p := filepath.Join(root, "f.txt")
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			baselineWrite(b, p, content)
		}
	})
}

func BenchmarkEdit10MiB(b *testing.B) {
	content := bytes.Repeat([]byte("0123456789abcde\n"), 10<<16) // 10 MiB of text
	copy(content[len(content)/2:], "NEEDLE")
	b.Run("local-guarded", func(b *testing.B) {
		benchEdits(b, content, nil)
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
	edits := [2]EditRequest{{OldString: "NEEDLE", NewString: "PINPIN"}, {OldString: "PINPIN", NewString: "NEEDLE"}}
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
