package render

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line%d\n", i)
	}
	return b.String()
}

func ptr(s string) *string { return &s }

func TestDiffs(t *testing.T) {
	tests := []struct {
		name          string
		before, after string
		want          []Diff
	}{
		{"original snapshot", "mode=DEBUG\nlevel=info\n", "mode=RELEASE\nlevel=info\n",
			[]Diff{{Path: "f.txt", OldText: ptr("mode=DEBUG\nlevel=info"), NewText: "mode=RELEASE\nlevel=info"}}},
		{"single change with context", numbered(8), strings.Replace(numbered(8), "line4\n", "CHANGED\n", 1),
			[]Diff{{Path: "f.txt", OldText: ptr("line1\nline2\nline3\nline4\nline5\nline6\nline7"), NewText: "line1\nline2\nline3\nCHANGED\nline5\nline6\nline7"}}},
		{"three lines of context each side", numbered(20), strings.Replace(numbered(20), "line10\n", "CHANGED\n", 1),
			[]Diff{{Path: "f.txt", OldText: ptr("line7\nline8\nline9\nline10\nline11\nline12\nline13"), NewText: "line7\nline8\nline9\nCHANGED\nline11\nline12\nline13"}}},
		{"scattered changes are separate hunks", numbered(20), strings.NewReplacer("line3\n", "A\n", "line16\n", "B\n").Replace(numbered(20)),
			[]Diff{
				{Path: "f.txt", OldText: ptr("line1\nline2\nline3\nline4\nline5\nline6"), NewText: "line1\nline2\nA\nline4\nline5\nline6"},
				{Path: "f.txt", OldText: ptr("line13\nline14\nline15\nline16\nline17\nline18\nline19"), NewText: "line13\nline14\nline15\nB\nline17\nline18\nline19"},
			}},
		{"six unchanged lines between changes merge", numbered(12), strings.NewReplacer("line3\n", "A\n", "line10\n", "B\n").Replace(numbered(12)),
			[]Diff{{Path: "f.txt", OldText: ptr(strings.TrimSuffix(numbered(12), "\n")), NewText: "line1\nline2\nA\nline4\nline5\nline6\nline7\nline8\nline9\nB\nline11\nline12"}}},
		{"seven unchanged lines between changes split", numbered(12), strings.NewReplacer("line2\n", "A\n", "line10\n", "B\n").Replace(numbered(12)),
			[]Diff{
				{Path: "f.txt", OldText: ptr("line1\nline2\nline3\nline4\nline5"), NewText: "line1\nA\nline3\nline4\nline5"},
				{Path: "f.txt", OldText: ptr("line7\nline8\nline9\nline10\nline11\nline12"), NewText: "line7\nline8\nline9\nB\nline11\nline12"},
			}},
		{"no-op", "same\n", "same\n", []Diff{}},
		{"both empty", "", "", []Diff{}},
		{"insertion into empty content", "", "brand new\n", []Diff{{Path: "f.txt", OldText: nil, NewText: "brand new"}}},
		{"delete everything", "gone\n", "", []Diff{{Path: "f.txt", OldText: ptr("gone"), NewText: ""}}},
		{"no newline marker dropped", "x", "y", []Diff{{Path: "f.txt", OldText: ptr("x"), NewText: "y"}}},
		{"adding the final newline", "a\nb", "a\nb\n", []Diff{{Path: "f.txt", OldText: ptr("a\nb"), NewText: "a\nb"}}},
		{"pure insertion keeps context", "a\nb\nc\n", "a\nb\nNEW\nc\n", []Diff{{Path: "f.txt", OldText: ptr("a\nb\nc"), NewText: "a\nb\nNEW\nc"}}},
		{"blank lines", "a\n\n\nb\n", "a\n\nb\n", []Diff{{Path: "f.txt", OldText: ptr("a\n\n\nb"), NewText: "a\n\nb"}}},
		{"original replaced snapshot", "original contents", "replaced", []Diff{{Path: "f.txt", OldText: ptr("original contents"), NewText: "replaced"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Diffs("f.txt", tt.before, tt.after))
		})
	}
}

func TestDiffsJSON(t *testing.T) {
	got, err := json.Marshal(map[string]any{"diffs": Diffs("config.txt", "mode=DEBUG\nlevel=info\n", "mode=RELEASE\nlevel=info\n")})
	require.NoError(t, err)
	assert.JSONEq(t, `{"diffs":[{"path":"config.txt","oldText":"mode=DEBUG\nlevel=info","newText":"mode=RELEASE\nlevel=info"}]}`, string(got))

	got, err = json.Marshal(Diffs("a", "", "x"))
	require.NoError(t, err)
	assert.Equal(t, `[{"path":"a","oldText":null,"newText":"x"}]`, string(got))

	got, err = json.Marshal(Diffs("a", "x", "x"))
	require.NoError(t, err)
	assert.Equal(t, `[]`, string(got))
}

// lcsLen is the textbook dynamic-programming LCS length.
func lcsLen(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			switch {
			case a[i] == b[j]:
				cur[j+1] = prev[j] + 1
			case prev[j+1] > cur[j]:
				cur[j+1] = prev[j+1]
			default:
				cur[j+1] = cur[j]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// linesOf makes each string one line.
func linesOf(ss []string) lines {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString(s + "\n")
	}
	return splitLines(b.String())
}

func TestSplitLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n", []string{"\n"}},
		{"a\n\n", []string{"a\n", "\n"}},
		{"a\nb", []string{"a\n", "b"}},
		{"a\r\nb\n", []string{"a\r\n", "b\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			l := splitLines(tt.in)
			var got []string
			for i := range l.len() {
				got = append(got, l.line(i))
			}
			assert.Equal(t, tt.want, got)
			if l.len() > 0 {
				assert.Equal(t, strings.TrimSuffix(tt.in, "\n"), l.text(0, l.len()))
			}
		})
	}
}

func TestMyersIsMinimalAndCorrect(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		gen := func() []string {
			n := rng.IntN(12)
			out := make([]string, n)
			for i := range out {
				out[i] = string(rune('a' + rng.IntN(3)))
			}
			return out
		}
		a, b := gen(), gen()
		ops, ok := myers(newLineSeqs(linesOf(a), linesOf(b)), maxDiffEdits, maxDiffWork)
		require.True(t, ok)
		var got []string
		i, j, equal := 0, 0, 0
		for _, o := range ops {
			switch o {
			case opEqual:
				require.Equal(t, a[i], b[j], "iter %d", iter)
				got = append(got, b[j])
				i, j, equal = i+1, j+1, equal+1
			case opDelete:
				i++
			case opInsert:
				got = append(got, b[j])
				j++
			}
		}
		require.Equal(t, len(a), i, "iter %d: all of a consumed", iter)
		require.Equal(t, strings.Join(b, ""), strings.Join(got, ""), "iter %d: ops rebuild b", iter)
		require.Equal(t, lcsLen(a, b), equal, "iter %d: %q -> %q is minimal", iter, a, b)
	}
}

// TestDiffsRebuildAfter checks, on random edits, that the hunks' new sides
// cover every change: replacing each hunk's old text in before by its new
// text yields after.
func TestDiffsRebuildAfter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 300 {
		before := strings.Split(strings.TrimSuffix(numbered(rng.IntN(60)+1), "\n"), "\n")
		after := append([]string(nil), before...)
		for range rng.IntN(6) + 1 {
			k := rng.IntN(len(after) + 1)
			switch rng.IntN(3) {
			case 0:
				after = append(after[:k], append([]string{fmt.Sprintf("new%d", rng.IntN(5))}, after[k:]...)...)
			case 1:
				if k < len(after) {
					after = append(after[:k], after[k+1:]...)
				}
			default:
				if k < len(after) {
					after[k] = "changed"
				}
			}
		}
		if len(after) == 0 {
			continue
		}
		b, a := strings.Join(before, "\n")+"\n", strings.Join(after, "\n")+"\n"
		// Numbered lines are unique, so each old side (which holds at least
		// one of them) occurs once; "\n" anchors whole lines.
		rebuilt := "\n" + b
		for _, d := range Diffs("f", b, a) {
			require.NotNil(t, d.OldText)
			old, repl := "\n"+*d.OldText+"\n", "\n"+d.NewText+"\n"
			if d.NewText == "" {
				repl = "\n"
			}
			require.Equal(t, 1, strings.Count(rebuilt, old), "iter %d", iter)
			rebuilt = strings.Replace(rebuilt, old, repl, 1)
		}
		require.Equal(t, "\n"+a, rebuilt, "iter %d", iter)
	}
}

// TestDiffsWindowMatchesWholeFile checks that splitting only the changed
// middle (plus context) gives the hunks of a diff over every line.
func TestDiffsWindowMatchesWholeFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	gen := func() string {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = "ab\n"[rng.IntN(3)]
		}
		return string(b)
	}
	for iter := range 20000 {
		before, after := gen(), gen()
		if rng.IntN(2) == 0 { // mostly-equal pairs: a small edit
			k := rng.IntN(len(before) + 1)
			ins := gen()
			after = before[:k] + ins[:min(len(ins), rng.IntN(3))] + before[min(len(before), k+rng.IntN(3)):]
		}
		want := []Diff{}
		if before != after {
			want = hunks("f", splitLines(before), splitLines(after))
		}
		require.Equal(t, want, Diffs("f", before, after), "iter %d: %q -> %q", iter, before, after)
	}
}

func TestDiffsBoundedOnPathologicalInput(t *testing.T) {
	var before, after strings.Builder
	for i := range 100_000 { // ~1.2 MiB each, every line different
		fmt.Fprintf(&before, "old line %d\n", i)
		fmt.Fprintf(&after, "new line %d\n", i)
	}
	start := time.Now()
	got := Diffs("f", "keep\n"+before.String()+"tail\n", "keep\n"+after.String()+"tail\n")
	elapsed := time.Since(start)
	require.Len(t, got, 1, "past the budget the changed region is one hunk")
	assert.True(t, strings.HasPrefix(*got[0].OldText, "keep\nold line 0\n"))
	assert.True(t, strings.HasSuffix(got[0].NewText, "new line 99999\ntail"))
	assert.Less(t, elapsed, 10*time.Second)
}

func TestMyersGivesUpPastItsBudget(t *testing.T) {
	s := newLineSeqs(linesOf(strings.Fields("a b c d e f")), linesOf(strings.Fields("a x c y e z")))
	_, ok := myers(s, 6, 1000)
	assert.True(t, ok, "6 edits fit")
	_, ok = myers(s, 5, 1000)
	assert.False(t, ok, "6 edits exceed an edit limit of 5")
	_, ok = myers(s, 100, 3)
	assert.False(t, ok, "the work budget runs out")
}

func TestDiffsManyScatteredChangesStayExact(t *testing.T) {
	before := numbered(5000)
	after := before
	for i := 10; i <= 5000; i += 10 {
		after = strings.Replace(after, fmt.Sprintf("\nline%d\n", i), fmt.Sprintf("\nLINE%d\n", i), 1)
	}
	got := Diffs("f", before, after)
	require.Len(t, got, 500, "500 edits with 9 unchanged lines between them stay 500 hunks")
	assert.Equal(t, "line7\nline8\nline9\nline10\nline11\nline12\nline13", *got[0].OldText)
	assert.Equal(t, "line7\nline8\nline9\nLINE10\nline11\nline12\nline13", got[0].NewText)
}

func TestDiffsHideBOM(t *testing.T) {
	got := Diffs("a.txt", "\uFEFFone\ntwo\n", "\uFEFFone\n2\n")
	require.Len(t, got, 1)
	assert.Equal(t, "one\ntwo", *got[0].OldText)
	assert.Equal(t, "one\n2", got[0].NewText)
}

// LineChanges numbers lines in the whole texts, not in the diff's region.
func TestLineChanges(t *testing.T) {
	before := numbered(20)
	after := strings.Replace(before, "line5\n", "line5\nnew a\nnew b\n", 1)
	after = strings.Replace(after, "line15\n", "", 1)
	after = strings.Replace(after, "line18\n", "changed 18\n", 1)
	assert.Equal(t, []LineChange{{5, 5, 5, 7}, {14, 15, 16, 16}, {17, 18, 18, 19}}, LineChanges(before, after))
	assert.Nil(t, LineChanges(before, before))
	assert.Equal(t, []LineChange{{0, 0, 0, 1}}, LineChanges("", "x\n"))
}

// LineCounts counts what Diffs shows: added and removed lines, a changed
// final newline included, a BOM not.
func TestLineCounts(t *testing.T) {
	tests := []struct {
		name           string
		before, after  string
		added, removed int
	}{
		{"equal", "a\nb\n", "a\nb\n", 0, 0},
		{"create", "", "a\nb\nc", 3, 0},
		{"empty the file", "a\nb\n", "", 0, 2},
		{"one line changed", "a\nb\nc\n", "a\nB\nc\n", 1, 1},
		{"lines inserted", "a\nc\n", "a\nb1\nb2\nc\n", 2, 0},
		{"final newline added", "a\nb", "a\nb\n", 1, 1},
		{"two separate changes", numbered(20), strings.Replace(strings.Replace(numbered(20), "line2\n", "", 1), "line18\n", "x\ny\n", 1), 2, 2},
		{"bom only", "\uFEFFa\n", "a\n", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			added, removed := LineCounts(tt.before, tt.after)
			assert.Equal(t, tt.added, added, "added")
			assert.Equal(t, tt.removed, removed, "removed")
		})
	}
}

// DiffsCounted is Diffs and LineCounts at once.
func TestDiffsCounted(t *testing.T) {
	before, after := numbered(40), strings.Replace(strings.Replace(numbered(40), "line3\n", "", 1), "line30\n", "x\ny\n", 1)
	diffs, added, removed := DiffsCounted("p", before, after)
	assert.Equal(t, Diffs("p", before, after), diffs)
	wa, wr := LineCounts(before, after)
	assert.Equal(t, []int{wa, wr}, []int{added, removed})
	assert.Equal(t, []int{2, 2}, []int{added, removed})
	diffs, added, removed = DiffsCounted("p", "a", "a")
	assert.Equal(t, []Diff{}, diffs)
	assert.Zero(t, added+removed)
}
