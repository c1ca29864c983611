package diagnostics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCompare(t *testing.T) {
	lines := func(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }
	for _, tc := range []struct {
		name          string
		before, after []byte
		old, now      []Problem
		introduced    []Problem
		resolved      int
	}{
		{
			name:       "nothing before",
			before:     lines("a"),
			after:      lines("a", "b"),
			now:        []Problem{{2, 1, "bad b"}},
			introduced: []Problem{{2, 1, "bad b"}},
		},
		{
			name:   "an old problem shifted by lines inserted above it is not new",
			before: lines("a", "bad", "c"),
			after:  lines("new 1", "new 2", "a", "bad", "c"),
			old:    []Problem{{2, 1, "bad line"}},
			now:    []Problem{{4, 1, "bad line"}},
		},
		{
			name:       "the same message on another unchanged line is new",
			before:     lines("bad", "x", "bad"),
			after:      lines("bad", "y", "bad"),
			old:        []Problem{{1, 1, "bad line"}},
			now:        []Problem{{1, 1, "bad line"}, {3, 1, "bad line"}},
			introduced: []Problem{{3, 1, "bad line"}},
		},
		{
			name:   "a problem on a line the change rewrote, still there, is not new",
			before: lines("a", "x := 1 +", "c"),
			after:  lines("a", "y := 2 +", "c"),
			old:    []Problem{{2, 9, "expected operand"}},
			now:    []Problem{{2, 9, "expected operand"}},
		},
		{
			name:       "a second such problem in the rewritten lines is new",
			before:     lines("a", "x := 1 +", "c"),
			after:      lines("a", "y := 2 +", "z := 3 +", "c"),
			old:        []Problem{{2, 9, "expected operand"}},
			now:        []Problem{{2, 9, "expected operand"}, {3, 9, "expected operand"}},
			introduced: []Problem{{3, 9, "expected operand"}},
		},
		{
			name:   "code the change moved keeps its problems",
			before: lines("func a() {", "\tbad()", "}", "", "func b() {", "}"),
			after:  lines("func b() {", "}", "", "func a() {", "\tbad()", "}"),
			old:    []Problem{{2, 2, "bad call"}},
			now:    []Problem{{5, 2, "bad call"}},
		},
		{
			name:     "a fix resolves",
			before:   lines("a", "x := 1 +", "c"),
			after:    lines("a", "x := 1", "c"),
			old:      []Problem{{2, 9, "expected operand"}, {3, 1, "other"}},
			now:      []Problem{{3, 1, "other"}},
			resolved: 1,
		},
		{
			name:       "a fix that introduces another problem",
			before:     lines("a", "x := 1 +", "c"),
			after:      lines("a", "x := y", "c"),
			old:        []Problem{{2, 9, "expected operand"}},
			now:        []Problem{{2, 6, "undefined: y"}},
			introduced: []Problem{{2, 6, "undefined: y"}},
			resolved:   1,
		},
		{
			name:   "a problem at the end of file after lines were deleted above it",
			before: lines("a", "b", "c", "func f() {"),
			after:  lines("a", "func f() {"),
			old:    []Problem{{5, 1, "expected '}', found 'EOF'"}},
			now:    []Problem{{3, 1, "expected '}', found 'EOF'"}},
		},
		{
			name:   "repeated identical problems are one",
			before: lines("a"),
			after:  lines("a"),
			old:    []Problem{{1, 1, "x"}},
			now:    []Problem{{1, 1, "x"}, {1, 1, "x"}},
		},
		{
			name:       "file-level problems match by message",
			before:     lines("a"),
			after:      lines("b"),
			old:        []Problem{{0, 0, "no license header"}},
			now:        []Problem{{0, 0, "no license header"}, {0, 0, "file too long"}},
			introduced: []Problem{{0, 0, "file too long"}},
		},
		{
			name:       "introduced in line order",
			before:     lines("a", "b", "c"),
			after:      lines("a", "b", "c"),
			now:        []Problem{{3, 1, "z"}, {1, 5, "y"}, {1, 2, "x"}},
			introduced: []Problem{{1, 2, "x"}, {1, 5, "y"}, {3, 1, "z"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			introduced, resolved := compare(tc.old, tc.now, tc.before, tc.after)
			assert.Equal(t, tc.introduced, introduced)
			assert.Equal(t, tc.resolved, resolved)
		})
	}
}
