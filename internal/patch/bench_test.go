package patch

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchFile is a 200,000-line file (about 9 MiB) and a patch of 20 hunks
// spread over it, each 3 lines of context around one changed line; with
// pad, the patch's lines carry trailing spaces the file lacks, so every
// hunk is found only at LevelTrailing.
func benchFile(pad string) ([]byte, []Hunk, [][2]string) {
	var b strings.Builder
	for i := range 200000 {
		fmt.Fprintf(&b, "\tvalue%d := compute(%d, \"line %d\")\n", i, i, i)
	}
	var body strings.Builder
	var pairs [][2]string
	for k := range 20 {
		at := 5000 + k*9700
		line := func(i int) string { return fmt.Sprintf("\tvalue%d := compute(%d, \"line %d\")", i, i, i) }
		body.WriteString("@@\n")
		for i := at - 3; i < at; i++ {
			body.WriteString(" " + line(i) + pad + "\n")
		}
		body.WriteString("-" + line(at) + pad + "\n+" + line(at) + " // changed\n")
		for i := at + 1; i <= at+3; i++ {
			body.WriteString(" " + line(i) + pad + "\n")
		}
		pairs = append(pairs, [2]string{line(at) + "\n", line(at) + " // changed\n"})
	}
	p, err := Parse("*** Begin Patch\n*** Update File: f\n" + body.String() + "*** End Patch")
	if err != nil {
		panic(err)
	}
	return []byte(b.String()), p.Files[0].Hunks, pairs
}

// BenchmarkApply measures one file's patch: found exactly, found with
// trailing whitespace ignored, and the baseline of the same 20 changes
// made as literal replacements (what a batch edit of 20 items does: find
// each, splice it in).
func BenchmarkApply(b *testing.B) {
	content, exact, pairs := benchFile("")
	_, trailing, _ := benchFile("  ")
	b.Run("literal baseline", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			out := content
			for _, p := range pairs {
				i := bytes.Index(out, []byte(p[0]))
				if i < 0 || bytes.Contains(out[i+len(p[0]):], []byte(p[0])) {
					b.Fatal("not unique")
				}
				out = append(append(append(make([]byte, 0, len(out)+16), out[:i]...), p[1]...), out[i+len(p[0]):]...)
			}
		}
	})
	for _, c := range []struct {
		name  string
		hunks []Hunk
	}{{"exact", exact}, {"trailing", trailing}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				if _, err := Apply(content, c.hunks, "f"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
