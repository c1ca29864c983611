package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

func TestSimilar(t *testing.T) {
	file := "package main\n\nfunc total(xs []int) int {\n\tsum := 0\n\tfor _, x := range xs {\n\t\tsum += x\n\t}\n\treturn sum\n}\n"
	for _, tc := range []struct {
		name, text, needle string
		start, end         int // 0-based [start, end); end 0 = no region
	}{
		{"indentation", file, "  sum := 0\n  for _, x := range xs {\n", 3, 5},
		{"tabs vs spaces", file, "        sum += x\n    }\n", 5, 7},
		{"trailing spaces", file, "\treturn sum   ", 7, 8},
		{"internal whitespace", file, "func total(xs  []int)  int {", 2, 3},
		{"CRLF needle, LF file", file, "\tsum := 0\r\n\tfor _, x := range xs {\r\n", 3, 5},
		{"LF needle, CRLF file", strings.ReplaceAll(file, "\n", "\r\n"), "\treturn sum\n }\n", 7, 9},
		{"one word in three lines", file, "\tsum := 0\n\tfor _, y := range xs {\n\t\tsum += x\n", 3, 6},
		{"one word, first line", file, "\tsum := 1\n\tfor _, x := range xs {\n\t\tsum += x\n", 3, 6},
		{"before the start", file, "nothing\npackage main\n\n", 0, 2},
		{"mostly before the start", file, "nothing\nnothing\npackage main\n", 0, 0},
		{"nothing close", file, "completely different\nwords entirely\n", 0, 0},
		{"only a brace matches", file, "alpha beta gamma\ndelta epsilon\nzeta eta theta\n}\n", 0, 0},
		{"blank needle", file, "  \n\t\n", 0, 0},
		{"empty text", "", "x", 0, 0},
		{"one changed word on one line", file, "\treturn total", 0, 0}, // documented limitation
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end, ok := Similar([]byte(tc.text), tc.needle)
			if tc.end == 0 {
				assert.False(t, ok, "got lines %d-%d", start, end)
				return
			}
			require.True(t, ok)
			assert.Equal(t, [2]int{tc.start, tc.end}, [2]int{start, end})
		})
	}
}

func TestSimilarAtMost20Lines(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		b.WriteString("line " + strings.Repeat("x", i) + "\n")
	}
	start, end, ok := Similar([]byte(b.String()), strings.ReplaceAll(b.String(), "line", "line "))
	require.True(t, ok)
	assert.Equal(t, [2]int{0, 20}, [2]int{start, end})
}

func TestMatchLinesAndHintLines(t *testing.T) {
	text := []byte("a\nb a\r\nc\n\na")
	assert.Equal(t, []int{1, 2, 5}, matchLines(text, []byte("a"), 21))
	assert.Equal(t, []int{1, 2}, matchLines(text, []byte("a"), 2))
	assert.Equal(t, []string{"b a", "c", ""}, hintLines(text, 1, 4))
	long := []byte(strings.Repeat("é", HintLineMaxBytes))
	got := hintLines(long, 0, 1)
	require.Len(t, got, 1)
	assert.Equal(t, HintLineMaxBytes, len(got[0]), "cut on a character boundary")
}

func TestApplyEditsGrowthBounded(t *testing.T) {
	text := bytes.Repeat([]byte("x"), 1<<20)
	_, _, _, err := applyEdits(text, []Edit{{OldString: "x", NewString: strings.Repeat("y", 65), ReplaceAll: true}}, "/w/a.txt", false, false)
	requireCode(t, err, fault.CodeTooLarge, `cannot edit "/w/a.txt": the edits would make the file larger than 64 MiB, the most a batch of edits holds in memory`)
}

// FuzzSimilar: the finder never panics, stays in bounds, and always finds a
// block of whole lines that differs from the file only in whitespace.
func FuzzSimilar(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), "b\n", uint8(1), uint8(1))
	f.Add([]byte("x\r\n\ty\r\nz"), "  y\n", uint8(0), uint8(2))
	f.Add([]byte(""), "", uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, text []byte, needle string, from, n uint8) {
		start, end, ok := Similar(text, needle)
		lines := bytes.Split(text, []byte{'\n'})
		if ok {
			if start < 0 || end <= start || end > len(lines) || end-start > HintMaxLines {
				t.Fatalf("region %d-%d out of bounds (%d lines)", start, end, len(lines))
			}
			_ = hintLines(text, start, end)
		}
		// A block of whole lines, re-indented, is always found (lines as
		// read splits them: a final newline starts no line).
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if int(from) >= len(lines) || n == 0 {
			return
		}
		block := lines[from:min(len(lines), int(from)+int(n))]
		var b strings.Builder
		anchored := false
		for _, l := range block {
			anchored = anchored || len(stripSpace(l)) > 0
			b.WriteString("  " + strings.TrimLeft(string(l), " \t") + "\n")
		}
		if !anchored {
			return
		}
		if _, _, ok := Similar(text, b.String()); !ok {
			t.Fatalf("block of lines %d+%d not found", from, n)
		}
	})
}

// FuzzEditBatch: a batch gives the same file as its edits applied one by
// one with single edits (the reference), or fails without writing.
func FuzzEditBatch(f *testing.F) {
	f.Add("alpha\nbeta\ngamma\n", "alpha", "A", "beta\n", "B\r\n", "A\nB", "x", false)
	f.Add("a\r\nb\r\nc\r\n", "a\nb", "q\nr", "r", "s", "c", "", true)
	f.Fuzz(func(t *testing.T, content, o1, n1, o2, n2, o3, n3 string, all bool) {
		var edits []Edit
		for _, e := range []Edit{{o1, n1, all}, {o2, n2, false}, {o3, n3, all}} {
			if e.OldString != "" && e.OldString != e.NewString {
				edits = append(edits, e)
			}
		}
		if len(edits) == 0 || strings.IndexByte(content, 0) >= 0 {
			return
		}
		for _, e := range edits { // arguments come from JSON strings: always UTF-8
			if !utf8.ValidString(e.OldString) || !utf8.ValidString(e.NewString) {
				return
			}
		}
		// The same with the extended profile's tolerant edit: a single edit
		// goes through the streamed levels 0 and 1, then the loaded ones; a
		// batch item through locate alone.
		for _, tolerant := range []bool{false, true} {
			fx := newFixture(t, "batch.txt = "+content, "ref.txt = "+content)
			ctx := context.Background()
			run := func(name string, req EditRequest) error {
				tg := fx.resolve(t, "edit", name)
				req.Tolerant = tolerant
				_, err := fx.l.EditText(ctx, tg, req, nil)
				return err
			}
			batchErr := run("batch.txt", EditRequest{Batch: edits})
			var refErr error
			for _, e := range edits {
				if refErr = run("ref.txt", EditRequest{OldString: e.OldString, NewString: e.NewString, ReplaceAll: e.ReplaceAll}); refErr != nil {
					break
				}
			}
			got, err := os.ReadFile(filepath.Join(fx.root, "batch.txt"))
			require.NoError(t, err)
			if refErr != nil {
				require.Error(t, batchErr, "tolerant %v", tolerant)
				assert.Equal(t, fault.CodeOf(refErr), fault.CodeOf(batchErr), "tolerant %v", tolerant)
				assert.Equal(t, content, string(got), "a failed batch writes nothing")
				continue
			}
			require.NoError(t, batchErr, "tolerant %v", tolerant)
			assert.Equal(t, fx.read(t, "ref.txt"), string(got), "tolerant %v", tolerant)
		}
	})
}

// BenchmarkEditMiss10MiB: a miss on a 10 MiB file, plain (original
// profile) and with the hint search (extended). The needle's lines each
// differ from a file line by whitespace only, the case a hint must find.
func BenchmarkEditMiss10MiB(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; buf.Len() < 10<<20; i++ {
		buf.WriteString("\tvalue := compute(")
		buf.WriteString(strings.Repeat("x", i%40))
		buf.WriteString(")\n")
	}
	content := buf.Bytes()
	needle := "    value := compute(xxxxxxxxxx)\n    value := compute(xxxxxxxxxxx)\n"
	// extended is the extended profile's miss: the hint, and first the
	// tolerant levels, none of which finds the needle.
	for _, mode := range []string{"plain", "hint", "extended"} {
		hints, tolerant := mode != "plain", mode == "extended"
		b.Run(mode, func(b *testing.B) {
			l, root := benchFixture(b)
			if err := os.WriteFile(filepath.Join(root, "f.txt"), content, 0o644); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			tg, _ := l.Resolve(ctx, "edit", "f.txt", "")
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				_, err := l.EditText(ctx, tg, EditRequest{OldString: needle, NewString: "y", Hints: hints, Tolerant: tolerant}, nil)
				var fe *fault.Error
				if !asError(err, &fe) || fe.Code != fault.CodeEditNotFound || hints && (fe.Hint == nil || fe.Hint.StartLine != 11) {
					b.Fatalf("want a miss (with hint %v), got %v %+v", hints, err, fe)
				}
			}
		})
	}
}

func asError(err error, target **fault.Error) bool {
	e, ok := err.(*fault.Error)
	*target = e
	return ok
}

// BenchmarkEditBatch10: ten edits of one 1 MiB file as one batch versus as
// ten single edits (each its own lock, scan, staged file and publication).
func BenchmarkEditBatch10(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		buf.WriteString("line of ordinary text, number ")
		buf.WriteString(strings.Repeat("z", i%30))
		buf.WriteString("\n")
	}
	content := buf.Bytes()
	for i := range 10 { // ten unique needles spread over the file
		copy(content[(i*2+1)*len(content)/21:], "NEEDLE"+string(rune('A'+i)))
	}
	swap := func(round int) []Edit {
		edits := make([]Edit, 10)
		for i := range edits {
			a, c := "NEEDLE"+string(rune('A'+i)), "PINPIN"+string(rune('A'+i))
			if round%2 == 1 {
				a, c = c, a
			}
			edits[i] = Edit{OldString: a, NewString: c}
		}
		return edits
	}
	for _, batch := range []bool{true, false} {
		name := "batch"
		if !batch {
			name = "singles"
		}
		b.Run(name, func(b *testing.B) {
			l, root := benchFixture(b)
			if err := os.WriteFile(filepath.Join(root, "f.txt"), content, 0o644); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			tg, _ := l.Resolve(ctx, "edit", "f.txt", "")
			round := 0
			for b.Loop() {
				edits := swap(round)
				if batch {
					if _, err := l.EditText(ctx, tg, EditRequest{Batch: edits}, nil); err != nil {
						b.Fatal(err)
					}
				} else {
					for _, e := range edits {
						if _, err := l.EditText(ctx, tg, EditRequest{OldString: e.OldString, NewString: e.NewString}, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
				round++
			}
		})
	}
}

// BenchmarkReadHash256MiB: what hashing adds to a read's pass over a file
// in the page cache: the OpenText reader (which hashes) versus the same
// reads of the bare file, both into a 256 KiB buffer.
func BenchmarkReadHash256MiB(b *testing.B) {
	l, root := benchFixture(b)
	p := filepath.Join(root, "big.txt")
	if err := os.WriteFile(p, bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrs\n"), 4<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	tg, _ := l.Resolve(ctx, "read", "big.txt", "")
	buf := make([]byte, 256<<10)
	drain := func(r interface{ Read([]byte) (int, error) }) {
		for {
			if _, err := r.Read(buf); err != nil {
				return
			}
		}
	}
	b.Run("hashed", func(b *testing.B) {
		b.SetBytes(256 << 20)
		for b.Loop() {
			r, _, err := l.OpenText(ctx, tg)
			if err != nil {
				b.Fatal(err)
			}
			drain(r)
			if _, ok := r.(ContentHasher).ContentHash(); !ok {
				b.Fatal("no hash at EOF")
			}
			r.Close()
		}
	})
	b.Run("bare", func(b *testing.B) {
		b.SetBytes(256 << 20)
		for b.Loop() {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			drain(f)
			f.Close()
		}
	})
}
