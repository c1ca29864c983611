package render

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

const benchChunk = 256 << 10

var (
	bigOnce sync.Once
	bigFile []byte
)

// sourceLike returns about size bytes of source-like text: varied line
// lengths, mostly ASCII with some multi-byte characters.
func sourceLike(size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 256)
	for i := 0; b.Len() < size; i++ {
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, "func handler%d(w http.ResponseWriter, r *http.Request) {\n", i)
		case 1:
			fmt.Fprintf(&b, "\t// Résumé of step %d — naïve café\n", i)
		case 2:
			fmt.Fprintf(&b, "\tif err := process(ctx, %d); err != nil {\n", i)
		case 3:
			b.WriteString("\t\treturn fmt.Errorf(\"process: %w\", err)\n")
		case 4:
			b.WriteString("\t}\n")
		case 5:
			fmt.Fprintf(&b, "\tlog.Printf(\"done %%d 😀\", %d)\n", i)
		default:
			b.WriteString("}\n\n")
		}
	}
	return b.Bytes()
}

func big() []byte {
	bigOnce.Do(func() { bigFile = sourceLike(100 << 20) })
	return bigFile
}

// BenchmarkWindow100MiB windows a 100 MiB file at offset 1 with the default
// caps, fed in 256 KiB chunks. Compare with BenchmarkBaseline100MiB.
func BenchmarkWindow100MiB(b *testing.B) {
	data := big()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		w := NewWindower(1, 2000, DefaultCaps())
		for p := data; len(p) > 0; {
			n := min(benchChunk, len(p))
			if _, err := w.Write(p[:n]); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
		win, err := w.Close()
		if err != nil || win.Footer != FooterCapped {
			b.Fatal(err, win.Footer)
		}
	}
}

// BenchmarkBaseline100MiB is the floor: bytes.Count(data, "\n") plus
// utf8.Valid(data) over the same bytes.
func BenchmarkBaseline100MiB(b *testing.B) {
	data := big()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if bytes.Count(data, []byte{'\n'}) == 0 || !utf8.Valid(data) {
			b.Fatal("bad bench data")
		}
	}
}

// BenchmarkWindowSourceFile windows a typical 2,000-line source file
// (about 55 KiB, so the byte cap ends the window at line 1833) at offset 1
// with the default caps, in one chunk, and renders the output.
func BenchmarkWindowSourceFile(b *testing.B) {
	src := sourceLike(256 << 10)
	src = src[:nthNewline(src, 2000)+1]
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		w := NewWindower(1, 2000, DefaultCaps())
		if _, err := w.Write(src); err != nil {
			b.Fatal(err)
		}
		win, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		_ = ReadOutput("/w/main.go", win)
	}
}

func nthNewline(p []byte, n int) int {
	i := -1
	for range n {
		i += bytes.IndexByte(p[i+1:], '\n') + 1
	}
	return i
}

// BenchmarkDiffsEdit diffs a one-line edit in a 1 MiB file.
func BenchmarkDiffsEdit(b *testing.B) {
	before := string(sourceLike(1 << 20))
	after := strings.Replace(before, "handler700(", "handlerSeven(", 1)
	b.ReportAllocs()
	for b.Loop() {
		if len(Diffs("f.go", before, after)) != 1 {
			b.Fatal("want one hunk")
		}
	}
}

// BenchmarkDiffsWorstCase diffs two 10 MiB texts whose lines all differ:
// the search gives up at its bound and reports one hunk.
func BenchmarkDiffsWorstCase(b *testing.B) {
	var before, after strings.Builder
	for i := 0; before.Len() < 10<<20; i++ {
		fmt.Fprintf(&before, "old line %d\n", i)
		fmt.Fprintf(&after, "new line %d\n", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(Diffs("f", before.String(), after.String())) != 1 {
			b.Fatal("want one hunk")
		}
	}
}

// BenchmarkAnchoredWindow is one default window (51,200 bytes of lines) of
// source-like text, plain and anchored: what an anchor costs a read
// (docs/performance.md, "Anchored reads").
func BenchmarkAnchoredWindow(b *testing.B) {
	data := sourceLike(64 << 10)
	for _, anchored := range []bool{false, true} {
		b.Run(fmt.Sprintf("anchored=%v", anchored), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				w := NewWindower(1, 2000, DefaultCaps())
				if anchored {
					w.Anchor()
				}
				if _, err := w.Write(data); err != nil {
					b.Fatal(err)
				}
				win, err := w.Close()
				if err != nil {
					b.Fatal(err)
				}
				_ = ReadOutput("/w/a.go", win)
			}
		})
	}
}

// BenchmarkTags is the tags of one default window's lines alone (51,200
// bytes of source-like text), what an anchored read adds to a plain one.
func BenchmarkTags(b *testing.B) {
	lines := bytes.Split(sourceLike(51200), []byte{'\n'})
	b.SetBytes(51200)
	for b.Loop() {
		for _, l := range lines {
			_ = Tag(l)
		}
	}
}
