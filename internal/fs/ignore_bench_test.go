package fs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// BenchmarkIgnoreMatch is one entry matched against 1 MiB of rules
// compiled once, by go-git's matcher (the baseline: what listings used
// before docs/files.md's "Ignore rules", where it was also rebuilt for
// every entry) and by ours. Rules of a real file's shapes, and globs no
// table answers. Run:
//
//	go test ./internal/fs -run '^$' -bench BenchmarkIgnoreMatch
func BenchmarkIgnoreMatch(b *testing.B) {
	real := &strings.Builder{}
	for i := 0; real.Len() < 1<<20-100; i++ {
		fmt.Fprintf(real, [...]string{"/gen/out%06d.o\n", "name%06d\n", "*.ext%06d\n", "tmp%06d*\n"}[i%4], i)
	}
	globs := &strings.Builder{}
	for i := 0; globs.Len() < 1<<20; i++ {
		fmt.Fprintf(globs, "*%06x*\n", i)
	}
	for _, rules := range []struct{ name, text string }{{"real-shaped", real.String()}, {"globs", globs.String()[:1<<20]}} {
		path := "src/pkg/main_test.go"
		parts := strings.Split(path, "/")
		b.Run(rules.name+"/go-git", func(b *testing.B) {
			var ps []gitignore.Pattern
			for line := range strings.SplitSeq(rules.text, "\n") {
				if line != "" {
					ps = append(ps, gitignore.ParsePattern(line, nil))
				}
			}
			m := gitignore.NewMatcher(ps)
			b.ResetTimer()
			for b.Loop() {
				m.Match(parts, false)
			}
		})
		b.Run(rules.name+"/compiled", func(b *testing.B) {
			r, _ := compileIgnore(rules.text, 1<<30)
			b.ResetTimer()
			for b.Loop() {
				w := ignoreWork{left: 1 << 62}
				r.match(path, "main_test.go", false, &w)
			}
		})
	}
}
