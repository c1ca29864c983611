package render

import (
	"hash/maphash"
	"strconv"
	"strings"
)

// Diff is one hunk of a write or edit: its lines before and after, context
// included, joined with "\n". OldText is nil for an insertion into empty
// content.
type Diff struct {
	Path    string  `json:"path"`
	OldText *string `json:"oldText"`
	NewText string  `json:"newText"`
}

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// Bounds on the line diff's search: beyond them the changed region is
// reported as one hunk, so a pathological pair of 10 MiB texts costs well
// under a second.
const (
	maxDiffEdits = 2000     // edit distance, in lines
	maxDiffWork  = 50 << 20 // diagonal steps and line comparisons
)

// Diffs returns one Diff per hunk between before and after (LF-normalized
// texts), with 3 lines of context on both sides, in file order. Lines keep
// their newline for comparison, so "a" and "a\n" differ, but no
// "\ No newline at end of file" marker is shown. It returns an empty,
// non-nil slice when nothing changed. The diff is minimal up to an edit
// distance of 2000 lines; past that (or past its work budget) the region
// between the common head and tail becomes one hunk. Two 10 MiB texts whose
// lines all differ cost about 50 ms and 40 MB. The texts are substrings of
// before and after.
func Diffs(path, before, after string) []Diff {
	a, b, _, ok := changedRegion(before, after)
	if !ok {
		return []Diff{}
	}
	return hunks(path, a, b)
}

// LineChange is one changed run of lines between two texts: the 0-based
// lines [A0, A1) of before became the lines [B0, B1) of after; an insertion
// has A0 == A1, a deletion B0 == B1.
type LineChange struct{ A0, A1, B0, B1 int }

// LineChanges lists the changed runs of lines from before to after in file
// order, with the bounds of Diffs (minimal up to an edit distance of 2000
// lines, else the region between the common head and tail is one run); nil
// when the texts are equal. Lines outside every run are unchanged, shifted
// by the runs before them (docs/diagnostics.md, "Only what the change
// introduced").
func LineChanges(before, after string) []LineChange {
	a, b, skipped, ok := changedRegion(before, after)
	if !ok {
		return nil
	}
	var out []LineChange
	for _, blk := range changedBlocks(a, b) {
		out = append(out, LineChange{blk.a0 + skipped, blk.a1 + skipped, blk.b0 + skipped, blk.b1 + skipped})
	}
	return out
}

// LineCounts counts the lines a change from before to after (LF-normalized
// texts) added and removed, as Diffs' hunks show them: a line whose only
// change is its final newline counts as one removed and one added. Past the
// line diff's bounds (see Diffs) the whole changed region counts.
func LineCounts(before, after string) (added, removed int) {
	a, b, _, ok := changedRegion(before, after)
	if !ok {
		return 0, 0
	}
	return countLines(changedBlocks(a, b))
}

// DiffsCounted is Diffs and LineCounts from one line diff.
func DiffsCounted(path, before, after string) (diffs []Diff, added, removed int) {
	a, b, _, ok := changedRegion(before, after)
	if !ok {
		return []Diff{}, 0, 0
	}
	blocks := changedBlocks(a, b)
	added, removed = countLines(blocks)
	return hunksOf(path, a, b, blocks), added, removed
}

func countLines(blocks []block) (added, removed int) {
	for _, blk := range blocks {
		removed += blk.a1 - blk.a0
		added += blk.b1 - blk.b0
	}
	return added, removed
}

// changedRegion is the lines of before and after that hold every change
// and its context, and the number of lines before them; !ok when the texts
// are equal.
func changedRegion(before, after string) (a, b lines, skipped int, ok bool) {
	// A BOM is not shown on read, so the diff card does not show it either.
	before = strings.TrimPrefix(before, "\uFEFF")
	after = strings.TrimPrefix(after, "\uFEFF")
	if before == after {
		return lines{}, lines{}, 0, false
	}
	// Only the changed middle, widened by the context lines, is split into
	// lines: an edit in a 10 MiB file costs two fast scans, not two line
	// arrays. head and the tail start on line boundaries in both texts.
	head := commonPrefix(before, after)
	head = strings.LastIndexByte(before[:head], '\n') + 1
	tail := commonSuffix(before[head:], after[head:])
	if k := strings.IndexByte(before[len(before)-tail:], '\n'); k >= 0 {
		tail -= k + 1
	} else {
		tail = 0
	}
	start := linesBack(before, head, diffContext)
	endA := linesForward(before, len(before)-tail, diffContext)
	endB := len(after) - (len(before) - endA)
	return splitLines(before[start:endA]), splitLines(after[start:endB]), strings.Count(before[:start], "\n"), true
}

// hunkGroups is the changed blocks between a and b, grouped into hunks:
// blocks whose gap of unchanged lines fits both contexts share one.
func hunkGroups(blocks []block) [][]block {
	var out [][]block
	for i := 0; i < len(blocks); {
		j := i
		for j+1 < len(blocks) && blocks[j+1].a0-blocks[j].a1 <= 2*diffContext {
			j++
		}
		out = append(out, blocks[i:j+1])
		i = j + 1
	}
	return out
}

// hunks groups the changes between the lines a and b into Diffs.
func hunks(path string, a, b lines) []Diff { return hunksOf(path, a, b, changedBlocks(a, b)) }

// hunksOf groups the changed blocks between the lines a and b into Diffs.
func hunksOf(path string, a, b lines, blocks []block) []Diff {
	out := []Diff{}
	for _, g := range hunkGroups(blocks) {
		first, last := g[0], g[len(g)-1]
		lead := min(diffContext, first.a0)
		trail := min(diffContext, a.len()-last.a1)
		d := Diff{Path: path, NewText: b.text(first.b0-lead, last.b1+trail)}
		if a0, a1 := first.a0-lead, last.a1+trail; a0 < a1 {
			s := a.text(a0, a1)
			d.OldText = &s
		}
		out = append(out, d)
	}
	return out
}

// UnifiedDiff is the change from before to after (LF-normalized texts) as a
// unified diff: "--- <p>" and "+++ <p>" (p is display), then one
// "@@ -a,b +c,d @@" hunk per Diffs hunk, with the same 3 lines of context,
// lines prefixed " ", "-" or "+". Both counts are always written; an empty
// side names the line before it with a count of 0, as diff -u does. No
// "\ No newline at end of file" marker is written, and the text does not
// end with a newline.
func UnifiedDiff(display, before, after string) string {
	var sb strings.Builder
	sb.WriteString("--- " + display + "\n+++ " + display)
	a, b, skipped, ok := changedRegion(before, after)
	if !ok {
		return sb.String()
	}
	line := func(prefix byte, s string) {
		sb.WriteByte('\n')
		sb.WriteByte(prefix)
		sb.WriteString(strings.TrimSuffix(s, "\n"))
	}
	for _, g := range hunkGroups(changedBlocks(a, b)) {
		first, last := g[0], g[len(g)-1]
		lead := min(diffContext, first.a0)
		trail := min(diffContext, a.len()-last.a1)
		a0, a1, b0, b1 := first.a0-lead, last.a1+trail, first.b0-lead, last.b1+trail
		sb.WriteString("\n@@ -" + hunkRange(skipped+a0, a1-a0) + " +" + hunkRange(skipped+b0, b1-b0) + " @@")
		at := a0
		for _, blk := range g {
			for ; at < blk.a0; at++ {
				line(' ', a.line(at))
			}
			for i := blk.a0; i < blk.a1; i++ {
				line('-', a.line(i))
			}
			for j := blk.b0; j < blk.b1; j++ {
				line('+', b.line(j))
			}
			at = blk.a1
		}
		for ; at < a1; at++ {
			line(' ', a.line(at))
		}
	}
	return sb.String()
}

// hunkRange is a unified diff's "start,count" for count lines after the
// first skipped ones.
func hunkRange(skipped, count int) string {
	if count == 0 {
		return strconv.Itoa(skipped) + ",0"
	}
	return strconv.Itoa(skipped+1) + "," + strconv.Itoa(count)
}

// block is a maximal run of changed lines: a[a0:a1] became b[b0:b1].
type block struct{ a0, a1, b0, b1 int }

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n, i := min(len(a), len(b)), 0
	for i+4096 <= n && a[i:i+4096] == b[i:i+4096] {
		i += 4096
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b.
func commonSuffix(a, b string) int {
	n, i := min(len(a), len(b)), 0
	for i+4096 <= n && a[len(a)-i-4096:len(a)-i] == b[len(b)-i-4096:len(b)-i] {
		i += 4096
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

// linesBack moves the line start i back by up to n lines.
func linesBack(s string, i, n int) int {
	for ; n > 0 && i > 0; n-- {
		i = strings.LastIndexByte(s[:i-1], '\n') + 1
	}
	return i
}

// linesForward moves the line start i forward by up to n lines.
func linesForward(s string, i, n int) int {
	for ; n > 0 && i < len(s); n-- {
		k := strings.IndexByte(s[i:], '\n')
		if k < 0 {
			return len(s)
		}
		i += k + 1
	}
	return i
}

// lines is a text split into lines that keep their "\n" (a last line
// without one included; "" has none): line i is s[off[i]:off[i+1]]. Offsets
// cost half of what strings would, and any run of lines is a substring of
// s, so a hunk's text is never copied.
type lines struct {
	s   string
	off []int
}

func splitLines(s string) lines {
	off := make([]int, 1, strings.Count(s, "\n")+2)
	for i := 0; i < len(s); {
		k := strings.IndexByte(s[i:], '\n')
		if k < 0 {
			i = len(s)
		} else {
			i += k + 1
		}
		off = append(off, i)
	}
	return lines{s: s, off: off}
}

func (l lines) len() int { return len(l.off) - 1 }

func (l lines) line(i int) string { return l.s[l.off[i]:l.off[i+1]] }

// sub is lines i to j-1.
func (l lines) sub(i, j int) lines { return lines{s: l.s, off: l.off[i : j+1]} }

// text is lines i to j-1 joined, without the last newline.
func (l lines) text(i, j int) string {
	return strings.TrimSuffix(l.s[l.off[i]:l.off[j]], "\n")
}

// changedBlocks lists the changed runs between a and b in order.
func changedBlocks(a, b lines) []block {
	n, m := a.len(), b.len()
	head := 0
	for head < n && head < m && a.line(head) == b.line(head) {
		head++
	}
	tail := 0
	for tail < n-head && tail < m-head && a.line(n-1-tail) == b.line(m-1-tail) {
		tail++
	}
	am, bm := a.sub(head, n-tail), b.sub(head, m-tail)
	whole := []block{{head, n - tail, head, m - tail}}
	if am.len() == 0 || bm.len() == 0 {
		return whole
	}
	ops, ok := myers(newLineSeqs(am, bm), maxDiffEdits, maxDiffWork)
	if !ok {
		return whole
	}
	var blocks []block
	i, j := 0, 0
	for k := 0; k < len(ops); {
		if ops[k] == opEqual {
			i, j, k = i+1, j+1, k+1
			continue
		}
		blk := block{a0: head + i, b0: head + j}
		for ; k < len(ops) && ops[k] != opEqual; k++ {
			if ops[k] == opDelete {
				i++
			} else {
				j++
			}
		}
		blk.a1, blk.b1 = head+i, head+j
		blocks = append(blocks, blk)
	}
	return blocks
}

// lineSeqs are the two line sequences Myers compares: by hash first, then
// by text, so a hash collision can never hide a change.
type lineSeqs struct {
	a, b   lines
	ha, hb []uint64
}

func newLineSeqs(a, b lines) lineSeqs {
	seed := maphash.MakeSeed()
	hash := func(l lines) []uint64 {
		out := make([]uint64, l.len())
		for i := range out {
			out[i] = maphash.String(seed, l.line(i))
		}
		return out
	}
	return lineSeqs{a: a, b: b, ha: hash(a), hb: hash(b)}
}

func (s lineSeqs) equal(x, y int) bool {
	return s.ha[x] == s.hb[y] && s.a.line(x) == s.b.line(y)
}

type op byte

const (
	opEqual op = iota
	opDelete
	opInsert
)

// myers returns a shortest edit script from a to b (Myers' greedy O(ND)
// algorithm), or false when it would exceed maxEdits edits or maxWork steps.
func myers(s lineSeqs, maxEdits, maxWork int) ([]op, bool) {
	n, m := s.a.len(), s.b.len()
	limit := min(n+m, maxEdits)
	// v[k+off] is the furthest x on diagonal k; trace[d] keeps v[-d..d]
	// after step d for the walk back.
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int32
	work := 0
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[k-1+off] < v[k+1+off]) {
				x = v[k+1+off]
			} else {
				x = v[k-1+off] + 1
			}
			y := x - k
			start := x
			for x < n && y < m && s.equal(x, y) {
				x, y = x+1, y+1
			}
			work += x - start + 1
			if work > maxWork {
				return nil, false
			}
			v[k+off] = x
			if x >= n && y >= m {
				trace = append(trace, snapshot(v, d, off))
				return backtrack(trace, n, m), true
			}
		}
		trace = append(trace, snapshot(v, d, off))
	}
	return nil, false
}

func snapshot(v []int, d, off int) []int32 {
	s := make([]int32, 2*d+1)
	for k := -d; k <= d; k++ {
		s[k+d] = int32(v[k+off])
	}
	return s
}

// backtrack walks the trace from (n, m) back to (0, 0) and returns the ops
// in forward order.
func backtrack(trace [][]int32, n, m int) []op {
	ops := make([]op, 0, n+m)
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		prev := trace[d-1] // v[-(d-1)..d-1] after step d-1
		at := func(k int) int { return int(prev[k+d-1]) }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			ops = append(ops, opEqual)
			x, y = x-1, y-1
		}
		if x == px {
			ops = append(ops, opInsert)
		} else {
			ops = append(ops, opDelete)
		}
		x, y = px, py
	}
	for ; x > 0; x-- {
		ops = append(ops, opEqual) // the snake of step 0
	}
	for i, j := 0, len(ops)-1; i < j; i, j = i+1, j-1 {
		ops[i], ops[j] = ops[j], ops[i]
	}
	return ops
}
