package patch

import (
	"bytes"
	"strings"
	"unicode"

	"github.com/toolfs/toolfs-api/internal/textnorm"
	"github.com/zeebo/xxh3"
)

// file is the content a hunk is sought in: its lines, indexed once (each
// line's start; the BOM is not part of the first line), and the search's
// byte budget.
type file struct {
	b      []byte  // the content after its BOM
	bom    bool    // it had one
	starts []int32 // line i is b[starts[i]:starts[i+1]]; len n+1
	n      int
	final  bool   // the last line ends with a newline
	eol    []byte // the ending added lines take
	budget int    // bytes the search may still read
	spent  bool   // it ran out: no place may be claimed
	// keys are each line's hash at a level, computed on the first scan at
	// that level and kept within keysMax, so the next hunks' scans read
	// 8 bytes a line instead of hashing it again.
	keys map[Level][]uint64
	kept int // bytes the keys hold
}

// keysMax bounds the hashes one file keeps (8 bytes a line and level).
const keysMax = 64 << 20

// keysOf is every line's hash at lv, nil when keeping them would pass
// keysMax (then each scan hashes the lines it reads).
func (f *file) keysOf(lv Level) []uint64 {
	if ks, ok := f.keys[lv]; ok {
		return ks
	}
	if f.keys == nil {
		f.keys = map[Level][]uint64{}
	}
	if f.kept+8*f.n > keysMax {
		f.keys[lv] = nil
		return nil
	}
	ks := make([]uint64, f.n)
	for i := range ks {
		t := f.text(i)
		if !f.spend(len(t)) {
			return nil
		}
		ks[i] = xxh3.Hash(norm(lv, t))
	}
	f.kept += 8 * f.n
	f.keys[lv] = ks
	return ks
}

func newFile(content []byte) *file {
	f := &file{b: content}
	if bytes.HasPrefix(content, bom) {
		f.b, f.bom = content[len(bom):], true
	}
	f.starts = make([]int32, 0, bytes.Count(f.b, []byte{'\n'})+2)
	crlf, lf := 0, 0
	for pos := 0; pos < len(f.b); {
		f.starts = append(f.starts, int32(pos))
		nl := bytes.IndexByte(f.b[pos:], '\n')
		if nl < 0 {
			break
		}
		if nl > 0 && f.b[pos+nl-1] == '\r' {
			crlf++
		} else {
			lf++
		}
		pos += nl + 1
	}
	f.n = len(f.starts)
	f.starts = append(f.starts, int32(len(f.b)))
	f.final = len(f.b) > 0 && f.b[len(f.b)-1] == '\n'
	// A file with one kind of ending keeps it; a mixed one gets its most
	// common (LF on a tie), a file without any, LF.
	f.eol = []byte("\n")
	if crlf > lf {
		f.eol = []byte("\r\n")
	}
	return f
}

// searchBudget is how many bytes of lines one file's hunks may read while
// they are sought: every hunk scans the rest of the file for a second
// place, at up to four levels, so a patch of many hunks on a large file
// would otherwise cost hunks times size.
func searchBudget(size int) int { return 32*size + 64<<20 }

// text is line i without its ending ("\n", or "\r\n").
func (f *file) text(i int) []byte {
	l := f.b[f.starts[i]:f.starts[i+1]]
	if n := len(l); n > 0 && l[n-1] == '\n' {
		l = l[:n-1]
		if n > 1 && l[n-2] == '\r' {
			l = l[:n-2]
		}
	}
	return l
}

// ending is line i's ending ("" for a last line without one).
func (f *file) ending(i int) []byte {
	l := f.b[f.starts[i]:f.starts[i+1]]
	return l[len(f.text(i)):]
}

// spend takes n bytes from the budget and reports whether any were left.
func (f *file) spend(n int) bool {
	f.budget -= n
	if f.budget < 0 {
		f.spent = true
	}
	return !f.spent
}

// header is the first line from `from` on equal to h, both trimmed.
func (f *file) header(h string, from int) (int, bool) {
	want := trimSpace([]byte(h))
	for i := from; i < f.n; i++ {
		t := f.text(i)
		if !f.spend(len(t)) {
			return 0, false
		}
		if trimSpace(t) == want {
			return i, true
		}
	}
	return 0, false
}

// norm is a line as level lv compares it.
func norm(lv Level, l []byte) []byte {
	switch lv {
	case LevelTrailing:
		return bytes.TrimRightFunc(l, unicode.IsSpace)
	case LevelIndent:
		return bytes.TrimFunc(l, unicode.IsSpace)
	case LevelPunct:
		n, _ := textnorm.NormalizePunct(l)
		return bytes.TrimFunc(n, unicode.IsSpace)
	}
	return l
}

func trimSpace(l []byte) string { return string(bytes.TrimFunc(l, unicode.IsSpace)) }

// matchAt reports whether old's lines equal the file's from line s at lv.
func (f *file) matchAt(lv Level, old [][]byte, s int) bool {
	for j, o := range old {
		t := f.text(s + j)
		if !f.spend(len(t)+len(o)) || !bytes.Equal(norm(lv, t), norm(lv, o)) {
			return false
		}
	}
	return true
}

// find is the first lines of old's places at lv from line `from` on,
// overlapping ones included, at most maxPlaces: a KMP over the lines'
// hashes, each candidate checked byte for byte (a hash can collide).
func (f *file) find(lv Level, old [][]byte, from int) []int {
	m := len(old)
	if f.n-from < m {
		return nil
	}
	keys := make([]uint64, m)
	for j, o := range old {
		keys[j] = xxh3.Hash(norm(lv, o))
	}
	fail := textnorm.KMPTable(keys)
	lines := f.keysOf(lv)
	if f.spent {
		return nil
	}
	var places []int
	state := 0
	for i := from; i < f.n; i++ {
		var h uint64
		if lines != nil {
			if !f.spend(8) {
				return nil
			}
			h = lines[i]
		} else {
			t := f.text(i)
			if !f.spend(len(t)) {
				return nil
			}
			h = xxh3.Hash(norm(lv, t))
		}
		for state > 0 && keys[state] != h {
			state = fail[state-1]
		}
		if keys[state] == h {
			state++
		}
		if state < m {
			continue
		}
		if s := i - m + 1; f.matchAt(lv, old, s) {
			if places = append(places, s); len(places) == maxPlaces {
				return places
			}
		}
		if f.spent {
			return nil
		}
		state = fail[m-1]
	}
	return places
}

// indentShift is how a hunk found with its indentation ignored re-indents
// its added lines: the indentation the patch's lines had in front
// (removed) becomes the file's (added). nil changes nothing.
type indentShift struct{ removed, added []byte }

func (s *indentShift) apply(l []byte) []byte {
	if s == nil || len(bytes.TrimSpace(l)) == 0 {
		return l
	}
	return append(append(make([]byte, 0, len(s.added)+len(l)), s.added...), l[len(s.removed):]...)
}

// shiftOf is the re-indentation of a hunk whose old lines matched from
// line s with their indentation ignored: when every non-blank line's
// indentation changed the same way (its common part with the file's kept,
// the same prefix taken away and the same put instead) and every added
// line starts with what is taken away; nil otherwise (added lines as
// written). A patch's added lines are written in the frame of its context
// lines, so they move with them, unless the first added line already has
// the file's indentation of the first removed line and not the patch's
// (as the tolerant edit decides for Gemini CLI's "old_string starts with a
// blank line" case). uneven reports one indentation of the patch's lines
// standing for two of the file's, or two for one, and no line indented as
// the file indents it, where the added lines' indentation would be a
// guess (docs/edits.md, "Finding a hunk").
func (f *file) shiftOf(old [][]byte, s int, lines []Line) (sh *indentShift, uneven bool) {
	type pair struct{ r, a string }
	var seen []pair
	even, kept := true, false
	for j, o := range old {
		t := f.text(s + j)
		if len(bytes.TrimSpace(t)) == 0 {
			continue
		}
		oi, fi := textnorm.IndentOf(o), textnorm.IndentOf(t)
		c := 0
		for c < len(oi) && c < len(fi) && oi[len(oi)-1-c] == fi[len(fi)-1-c] {
			c++
		}
		p := pair{string(oi[:len(oi)-c]), string(fi[:len(fi)-c])}
		for _, q := range seen {
			uneven = uneven || (q.r == p.r) != (q.a == p.a)
			even = even && q == p
		}
		kept = kept || p.r == p.a
		seen = append(seen, p)
	}
	if uneven {
		// Lines the patch indents as the file does put its added lines
		// in the file's frame: written as sent (Roo Code's "mixed
		// indentation styles").
		return nil, !kept
	}
	if len(seen) == 0 || !even || seen[0].r == seen[0].a {
		return nil, false
	}
	sh = &indentShift{removed: []byte(seen[0].r), added: []byte(seen[0].a)}
	// The first removed line, as the patch and the file indent it.
	var removedOld, removedFile []byte
	j := 0
	for _, l := range lines {
		if l.Kind == '-' && len(bytes.TrimSpace([]byte(l.Text))) > 0 {
			removedOld, removedFile = textnorm.IndentOf([]byte(l.Text)), textnorm.IndentOf(f.text(s+j))
			break
		}
		if l.Kind != '+' {
			j++
		}
	}
	first := true
	for _, l := range lines {
		t := []byte(l.Text)
		if l.Kind != '+' || len(bytes.TrimSpace(t)) == 0 {
			continue
		}
		if ti := textnorm.IndentOf(t); first && removedFile != nil && bytes.Equal(ti, removedFile) && !bytes.Equal(ti, removedOld) {
			return nil, false
		}
		first = false
		if !bytes.HasPrefix(t, sh.removed) {
			return nil, false
		}
	}
	return sh, false
}

// addsText reports whether a hunk adds a line that is not blank.
func addsText(lines []Line) bool {
	for _, l := range lines {
		if l.Kind == '+' && strings.TrimSpace(l.Text) != "" {
			return true
		}
	}
	return false
}

// writer assembles the result: whole lines copied from the file or
// written, each line's ending kept, the final newline as the file had it.
type writer struct {
	f     *file
	out   []byte
	lines int
	mid   bool // the last line written has no ending yet
	endN  int  // the length of the last line's ending
}

func (f *file) writer() *writer {
	w := &writer{f: f, out: make([]byte, 0, len(f.b)+len(bom)+len(f.b)/8+64)}
	if f.bom {
		w.out = append(w.out, bom...)
	}
	return w
}

// copyLines copies the file's lines [a, b).
func (w *writer) copyLines(a, b int) {
	if a >= b {
		return
	}
	w.endLine()
	w.out = append(w.out, w.f.b[w.f.starts[a]:w.f.starts[b]]...)
	w.lines += b - a
	end := w.f.ending(b - 1)
	w.mid, w.endN = len(end) == 0, len(end)
}

// line writes one line with its ending.
func (w *writer) line(text, end []byte) {
	w.endLine()
	w.out = append(w.out, text...)
	w.mid = true
	if len(end) > 0 {
		w.end(end)
	}
	w.lines++
}

// endLine gives the last line written the file's ending when a line
// follows it.
func (w *writer) endLine() {
	if w.mid {
		w.end(w.f.eol)
	}
}

// end ends the line written last with end; a line whose text ends with a
// CR gets "\r\n", so the CR stays its text rather than turn into an ending.
func (w *writer) end(end []byte) {
	if len(end) == 1 && len(w.out) > 0 && w.out[len(w.out)-1] == '\r' {
		end = crlf
	}
	w.out = append(w.out, end...)
	w.mid, w.endN = false, len(end)
}

var crlf = []byte("\r\n")

// finish is the result, its final newline as the file had it (an empty
// file's lines end with one).
func (w *writer) finish() []byte {
	switch {
	case w.lines == 0:
	case w.f.final || w.f.n == 0:
		w.endLine()
	case !w.mid:
		w.out = w.out[:len(w.out)-w.endN]
	}
	return w.out
}
