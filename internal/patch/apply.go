package patch

import (
	"slices"
	"strconv"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Level is how a hunk's context and removed lines were found (SPEC §25),
// numbered as the tolerant edit's levels, whose names the answer shows
// (docs/edits.md).
type Level int

// The levels Apply tries, in this order; the first that finds a place
// decides, and two places there are ambiguous.
const (
	LevelExact    Level = 1 // each line as written (line endings aside)
	LevelTrailing Level = 3 // trailing whitespace ignored
	LevelIndent   Level = 4 // surrounding whitespace ignored, added lines re-indented
	LevelPunct    Level = 6 // and typographic punctuation read as ASCII
)

var levels = [...]Level{LevelExact, LevelTrailing, LevelIndent, LevelPunct}

// maxPlaces is how many places of an ambiguous hunk Apply lists: one more
// than an answer shows, so it can say there were more.
const maxPlaces = 21

// Place is where one hunk applied: its level, the original lines it
// replaced, [Start, End) 0-based (Start == End: lines inserted before line
// Start), and the lines of the result that replaced them, [OutStart,
// OutEnd).
type Place struct {
	Level            Level
	Start, End       int
	OutStart, OutEnd int
}

// Result is one file's patched content and where each hunk applied, in
// hunk order.
type Result struct {
	Content []byte
	Places  []Place
	lines   int // the result's lines, an empty last one without ending too
}

// HunkError is the cause of a refused hunk (the *fault.Error's Err): which
// hunk (0-based) and the lines it sought, for a hint of the most similar
// text.
type HunkError struct {
	Hunk int
	Old  []string
}

func (e *HunkError) Error() string { return "hunk " + strconv.Itoa(e.Hunk+1) + " refused" }

// The messages of Apply (docs/edits.md, "apply_patch"): <i> counts the
// file's hunks from 1, <p> is the display path given.
func msgNotFound(i int, p string) string {
	return "cannot apply hunk " + strconv.Itoa(i+1) + ` to "` + p + `": its lines were not found`
}

func msgAmbiguous(i int, p string) string {
	return "cannot apply hunk " + strconv.Itoa(i+1) + ` to "` + p + `": its lines match more than one place; add context lines to tell them apart`
}

func msgFileTooLarge(p string) string {
	return `cannot apply the patch to "` + p + `": the file is larger than ` + strconv.Itoa(MaxFileBytes) + ` bytes`
}

func msgBudget(p string) string {
	return `cannot apply the patch to "` + p + `": the file is too large to search for this many hunks`
}

var bom = []byte("\ufeff")

// Apply applies one file's hunks to content (SPEC §25): each hunk is
// sought after the previous one, and after the first line equal (trimmed)
// to its header; its context and removed lines exactly, then at each
// weaker Level, the first level with a place deciding and two places there
// refused (FS_AMBIGUOUS_EDIT, the places' first lines in the Hint); EOF
// hunks only at the end. A hunk of only added lines goes after its header
// line, or without one at the end. Every byte outside the replaced lines
// is kept: the BOM, each line's ending, the final newline present or
// absent; context lines keep the file's bytes, added lines take the file's
// line ending. name is the path the messages show.
func Apply(content []byte, hunks []Hunk, name string) (*Result, error) {
	if len(content) > MaxFileBytes {
		return nil, fault.New(fault.CodeTooLarge, msgFileTooLarge(name))
	}
	return apply(content, hunks, name, searchBudget(len(content)))
}

// apply is Apply with the search's byte budget.
func apply(content []byte, hunks []Hunk, name string, budget int) (*Result, error) {
	f := newFile(content)
	f.budget = budget
	type repl struct {
		hunk  int
		lines []Line
		place Place
		shift *indentShift
	}
	rs := make([]repl, 0, len(hunks))
	cursor := 0
	for i := range hunks {
		h := &hunks[i]
		from := cursor
		for k, hd := range h.Headers {
			at, ok := f.header(hd, from)
			if f.spent {
				return nil, fault.New(fault.CodeTooLarge, msgBudget(name))
			}
			if !ok {
				return nil, &fault.Error{Code: fault.CodeEditNotFound, Message: msgNotFound(i, name), Err: &HunkError{Hunk: i, Old: h.Old()}}
			}
			from = at + 1
			// A last header that is also the hunk's first line is that
			// line: the search starts on it, not after it.
			if old := h.Old(); k == len(h.Headers)-1 && len(old) > 0 && trimSpace([]byte(old[0])) == trimSpace([]byte(hd)) {
				from = at
			}
		}
		hasHeader := len(h.Headers) > 0
		lines := h.Lines
		found, places, level, shift := f.seek(lines, from, h, hasHeader)
		if !found && len(places) == 0 {
			if trimmed := trimBare(lines); len(trimmed) != len(lines) {
				lines = trimmed
				found, places, level, shift = f.seek(lines, from, h, hasHeader)
			}
		}
		if f.spent {
			return nil, fault.New(fault.CodeTooLarge, msgBudget(name))
		}
		switch {
		case len(places) > 1:
			ml := make([]int, len(places))
			for k, p := range places {
				ml[k] = p + 1
			}
			return nil, &fault.Error{Code: fault.CodeAmbiguousEdit, Message: msgAmbiguous(i, name),
				Hint: &fault.Hint{MatchLines: ml}, Err: &HunkError{Hunk: i, Old: h.Old()}}
		case !found:
			return nil, &fault.Error{Code: fault.CodeEditNotFound, Message: msgNotFound(i, name), Err: &HunkError{Hunk: i, Old: h.Old()}}
		}
		start := places[0]
		end := start + countOld(lines)
		rs = append(rs, repl{hunk: i, lines: lines, place: Place{Level: level, Start: start, End: end}, shift: shift})
		if end > start || hasHeader && !h.EOF {
			cursor = max(cursor, end)
		}
	}
	// Insertions at the end keep the cursor where it was (as Codex does),
	// so the replacements are put in file order; equal starts keep the
	// patch's order.
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return rs[a].place.Start - rs[b].place.Start })

	w := f.writer()
	prev := 0
	for _, k := range order {
		r := &rs[k]
		w.copyLines(prev, r.place.Start)
		r.place.OutStart = w.lines
		j := r.place.Start
		for _, l := range r.lines {
			switch l.Kind {
			case ' ':
				w.line(f.text(j), f.ending(j))
				j++
			case '-':
				j++
			case '+':
				w.line(r.shift.apply([]byte(l.Text)), f.eol)
			}
		}
		r.place.OutEnd = w.lines
		prev = r.place.End
	}
	w.copyLines(prev, f.n)
	res := &Result{Content: w.finish(), Places: make([]Place, len(hunks)), lines: w.lines}
	for _, r := range rs {
		res.Places[r.hunk] = r.place
	}
	return res, nil
}

// countOld is how many lines of the file lines replace.
func countOld(lines []Line) int {
	n := 0
	for _, l := range lines {
		if l.Kind != '+' {
			n++
		}
	}
	return n
}

// trimBare is lines without the Bare lines at either end.
func trimBare(lines []Line) []Line {
	i, j := 0, len(lines)
	for i < j && lines[i].Bare {
		i++
	}
	for j > i && lines[j-1].Bare {
		j--
	}
	return lines[i:j]
}

// seek finds where the hunk's lines apply from line `from`: found and the
// place's first line (places[0]) at the first level with any place, or
// every place (up to maxPlaces) when there are several; the re-indentation
// the added lines get. Without old lines the place is an insertion: after
// the header (hasHeader, from is the line after it) or at the end.
func (f *file) seek(lines []Line, from int, h *Hunk, hasHeader bool) (bool, []int, Level, *indentShift) {
	var old [][]byte
	for _, l := range lines {
		if l.Kind != '+' {
			old = append(old, []byte(l.Text))
		}
	}
	if len(old) == 0 {
		if hasHeader && !h.EOF {
			return true, []int{from}, LevelExact, nil
		}
		return true, []int{f.n}, LevelExact, nil
	}
	for _, lv := range levels {
		var places []int
		if h.EOF {
			if s := f.n - len(old); s >= from && f.matchAt(lv, old, s) {
				places = []int{s}
			}
		} else {
			places = f.find(lv, old, from)
		}
		if f.spent {
			return false, nil, 0, nil
		}
		switch {
		case len(places) == 1:
			var shift *indentShift
			if lv >= LevelIndent {
				var uneven bool
				if shift, uneven = f.shiftOf(old, places[0], lines); uneven && addsText(lines) {
					continue // no place at this level: where would the added lines go?
				}
			}
			return true, places, lv, shift
		case len(places) > 1:
			return false, places, lv, nil
		}
	}
	return false, nil, 0, nil
}
