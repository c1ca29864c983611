package render

import (
	"bytes"
	"sort"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// edit_lines's applier (docs/edits.md, "Anchored lines"): a call's edits,
// named by anchors, resolved against a file's bytes and turned into its
// new bytes. Pure: the provider hands it the file under the target's lock
// and publishes what it returns.

// LineOp is what one edit_lines item does.
type LineOp uint8

// The edit_lines operations.
const (
	LineReplace      LineOp = iota + 1 // the lines Start..End become Text
	LineInsertAfter                    // Text goes after the line Start
	LineInsertBefore                   // Text goes before the line Start
)

// ParseLineOp reads an op's name.
func ParseLineOp(s string) (LineOp, bool) {
	switch s {
	case "replace":
		return LineReplace, true
	case "insert_after":
		return LineInsertAfter, true
	case "insert_before":
		return LineInsertBefore, true
	}
	return 0, false
}

// LineRef is an anchor: a line number and the tag of the line it names.
type LineRef struct {
	Number int
	Tag    string
}

// String is the anchor as read shows it.
func (r LineRef) String() string { return Anchor(r.Number, r.Tag) }

// maxLineNumber bounds an anchor's number (no file read here has more
// lines; it keeps the arithmetic far from overflow).
const maxLineNumber = 1 << 40

// ParseAnchor reads "<n>#<tag>". Surrounding spaces are ignored, and so
// is a ":" and anything after it, so a line copied with its text still
// names the line (the tag checks the text anyway).
func ParseAnchor(s string) (LineRef, bool) {
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	num, tag, ok := strings.Cut(s, "#")
	if !ok || !IsTag(tag) || num == "" || len(num) > 13 {
		return LineRef{}, false
	}
	n := 0
	for i := range len(num) {
		if num[i] < '0' || num[i] > '9' {
			return LineRef{}, false
		}
		n = n*10 + int(num[i]-'0')
	}
	if n < 1 || n > maxLineNumber {
		return LineRef{}, false
	}
	return LineRef{Number: n, Tag: tag}, true
}

// LineEdit is one edit_lines item whose arguments passed their checks:
// for LineReplace, the lines Start..End (End = Start for one line); for an
// insert, the line Start (End = Start).
type LineEdit struct {
	Op         LineOp
	Start, End LineRef
	Text       string
}

// refs are the anchors an edit names.
func (e LineEdit) refs() []LineRef {
	if e.Op == LineReplace && e.End != e.Start {
		return []LineRef{e.Start, e.End}
	}
	return []LineRef{e.Start}
}

// gap is the gap between lines an insert fills: g is between the lines g
// and g+1.
func (e LineEdit) gap() int {
	if e.Op == LineInsertBefore {
		return e.Start.Number - 1
	}
	return e.Start.Number
}

// Overlap returns the first two edits (i < j, in argument order of j) that
// overlap: two replaces sharing a line, an insert next to a line another
// edit replaces, two inserts into one gap. Edits refer to one version of
// the file, so their order would otherwise be a guess.
func Overlap(edits []LineEdit) (i, j int, ok bool) {
	for j = range edits {
		for i = range j {
			if overlap(edits[i], edits[j]) {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

func overlap(a, b LineEdit) bool {
	switch {
	case a.Op == LineReplace && b.Op == LineReplace:
		return a.Start.Number <= b.End.Number && b.Start.Number <= a.End.Number
	case a.Op == LineReplace:
		return a.Start.Number <= b.Start.Number && b.Start.Number <= a.End.Number
	case b.Op == LineReplace:
		return b.Start.Number <= a.Start.Number && a.Start.Number <= b.End.Number
	}
	return a.gap() == b.gap()
}

// MsgLineEditsOverlap is the message of two overlapping edits (0-based).
func MsgLineEditsOverlap(i, j int) string {
	return "edits[" + strconv.Itoa(i) + "] and edits[" + strconv.Itoa(j) + "] overlap"
}

// SplitText is text as the lines it holds, as read splits a file: on "\n",
// a "\r" before it dropped, a final newline starting no extra line ("" is
// no line, "\n" one empty line).
func SplitText(text string) []string {
	if text == "" {
		return nil
	}
	text = strings.TrimSuffix(text, "\n")
	out := strings.Split(text, "\n")
	for i, l := range out {
		out[i] = strings.TrimSuffix(l, "\r")
	}
	return out
}

// Relocation bounds (docs/edits.md, "Anchored lines").
const (
	// RelocateWithin is how far anchors that no longer match are sought.
	RelocateWithin = 20
	// StaleContext is how many lines around a stale anchor its error shows
	// on either side.
	StaleContext = 3
	// RegionMaxLines is the most lines of the changed region an answer shows.
	RegionMaxLines = 20
)

// LinesApplied is what ApplyLines did.
type LinesApplied struct {
	// Text is the file's new content.
	Text []byte
	// Shift is how far the anchors were found from where they said: > 0
	// that many lines lower (at larger numbers), < 0 higher; 0 where they
	// said.
	Shift int
	// Region is the changed region in the new file, anchored: at most
	// RegionMaxLines lines from its first; RegionEnd is its last line
	// (beyond Region when it is longer). For a deletion the region is the
	// lines either side of it. Empty when the file is left with no line.
	Region    []Line
	RegionEnd int
}

// fileLine is one line of a file: its text is b[start:textEnd], its
// ending b[textEnd:end] ("\n", "\r\n", or at the end of the file "" or a
// final "\r", which read does not show either).
type fileLine struct{ start, textEnd, end int }

// lineTable is the lines of a file that an edit needs, by number, and how
// many lines the file has. Only the lines within the spans it was built
// for are kept, so memory is bounded by the edits, not by the file (a
// file of 64 MiB of newlines has 64 Mi lines).
type lineTable struct {
	total int
	lines map[int]fileLine
	eol   string // the file's first line ending; "\n" when it has none
}

// indexLines cuts b into lines as read does (a leading BOM is before the
// first line) and keeps those within spans: sorted, non-overlapping,
// inclusive ranges of line numbers.
func indexLines(b []byte, spans [][2]int) lineTable {
	t := lineTable{lines: map[int]fileLine{}, eol: "\n"}
	seenEOL := false
	i := 0
	if bytes.HasPrefix(b, bom) {
		i = len(bom)
	}
	k := 0
	for i < len(b) {
		nl := bytes.IndexByte(b[i:], '\n')
		end, text := len(b), len(b)
		if nl >= 0 {
			end = i + nl + 1
			text = end - 1
		}
		if text > i && b[text-1] == '\r' {
			text--
		}
		t.total++
		if !seenEOL && nl >= 0 {
			t.eol, seenEOL = string(b[text:end]), true
		}
		for k < len(spans) && spans[k][1] < t.total {
			k++
		}
		if k < len(spans) && spans[k][0] <= t.total {
			t.lines[t.total] = fileLine{start: i, textEnd: text, end: end}
		}
		i = end
	}
	return t
}

// merge sorts spans and joins those that overlap or touch.
func merge(spans [][2]int) [][2]int {
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	var out [][2]int
	for _, s := range spans {
		if n := len(out); n > 0 && s[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], s[1])
			continue
		}
		out = append(out, s)
	}
	return out
}

// ending is a line's ending when it is a newline ("" otherwise).
func (l fileLine) ending(b []byte) string {
	if e := b[l.textEnd:l.end]; len(e) > 0 && e[len(e)-1] == '\n' {
		return string(e)
	}
	return ""
}

// ApplyLines applies edits, which passed their argument checks and do not
// overlap, to the file b, all or nothing. Every anchor must match the file
// (its line's tag); when some do not, and every anchor matches at one
// common offset within RelocateWithin lines and at no other, the edits
// apply there. Otherwise the error is fault.CodeEditNotFound, the first
// anchor that does not match and the file's anchored lines around it. New
// lines take the line ending of the line they replace or stand next to
// (the file's first ending when that line has none, "\n" when no line
// has one). Every byte outside the edited lines is kept. maxLine truncates
// the lines the answer and the error show, as read does.
func ApplyLines(b []byte, edits []LineEdit, display string, maxLine int) (LinesApplied, *fault.Error) {
	// The lines any anchor can reach, relocated, and the context of a
	// stale one.
	reach := RelocateWithin + StaleContext
	var spans [][2]int
	for _, e := range edits {
		for _, r := range e.refs() {
			spans = append(spans, [2]int{r.Number - reach, r.Number + reach})
		}
	}
	table := indexLines(b, merge(spans))
	tagAt := tagsOf(b, table.lines)
	shift, ferr := locate(edits, table, tagAt, b, display, maxLine)
	if ferr != nil {
		return LinesApplied{}, ferr
	}
	lines, eol := table.lines, table.eol
	type splice struct {
		from, to   int
		with       []byte
		first, end int // the edit's lines in the old numbering (first..end; end < first for an insert)
		added      int
	}
	splices := make([]splice, 0, len(edits))
	for _, e := range edits {
		news := SplitText(e.Text)
		s, t := e.Start.Number+shift, e.End.Number+shift
		var sp splice
		switch e.Op {
		case LineReplace:
			last := lines[t]
			sp = splice{from: lines[s].start, to: last.end, first: s, end: t}
			// The last new line takes the ending of the last replaced one,
			// so a file without a final newline keeps it that way.
			sp.with = joinLines(news, endingOr(last.ending(b), eol), string(b[last.textEnd:last.end]))
		case LineInsertAfter:
			at := lines[s]
			sp = splice{from: at.end, to: at.end, first: s + 1, end: s}
			if e := at.ending(b); e != "" {
				sp.with = joinLines(news, e, e)
			} else {
				// After a last line without a newline: it gains one, and
				// the new last line goes without.
				sp.with = append([]byte(eol), joinLines(news, eol, "")...)
			}
		case LineInsertBefore:
			at := lines[s]
			e := endingOr(at.ending(b), eol)
			sp = splice{from: at.start, to: at.start, first: s, end: s - 1}
			sp.with = joinLines(news, e, e)
		}
		sp.added = len(news)
		splices = append(splices, sp)
	}
	// Non-overlapping edits sorted by place; an insert before a replace
	// that starts where it stands.
	sort.SliceStable(splices, func(i, j int) bool {
		if splices[i].from != splices[j].from {
			return splices[i].from < splices[j].from
		}
		return splices[i].to < splices[j].to
	})
	size := len(b)
	for _, sp := range splices {
		size += len(sp.with) - (sp.to - sp.from)
	}
	out := bytes.NewBuffer(make([]byte, 0, size))
	at, delta := 0, 0
	first, last := 0, 0 // the changed region in the new numbering
	widen := func(a, z int) {
		if first == 0 || a < first {
			first = a
		}
		last = max(last, z)
	}
	for _, sp := range splices {
		out.Write(b[at:sp.from])
		out.Write(sp.with)
		at = sp.to
		newFirst := sp.first + delta
		if sp.added > 0 {
			widen(newFirst, newFirst+sp.added-1)
		} else {
			widen(max(newFirst-1, 1), newFirst) // the lines either side of a deletion
		}
		delta += sp.added - (sp.end - sp.first + 1)
	}
	out.Write(b[at:])
	res := LinesApplied{Text: out.Bytes(), Shift: shift}
	res.Region, res.RegionEnd = region(res.Text, first, last, maxLine)
	return res, nil
}

// endingOr is e, or eol when e is none.
func endingOr(e, eol string) string {
	if e == "" {
		return eol
	}
	return e
}

// joinLines writes each line followed by eol, the last one by lastEnd;
// an empty last line at the end of a file without a final newline gets
// eol all the same, since it would otherwise be no line at all.
func joinLines(news []string, eol, lastEnd string) []byte {
	var b []byte
	for i, l := range news {
		b = append(b, l...)
		switch {
		case i < len(news)-1:
			b = append(b, eol...)
		case l == "" && !strings.HasSuffix(lastEnd, "\n"):
			b = append(b, eol...)
		default:
			b = append(b, lastEnd...)
		}
	}
	return b
}

// tagsOf returns the tag of a line of lines by its 1-based number,
// computed once.
func tagsOf(b []byte, lines map[int]fileLine) func(n int) string {
	memo := map[int]string{}
	return func(n int) string {
		t, ok := memo[n]
		if !ok {
			l := lines[n]
			t = Tag(b[l.start:l.textEnd])
			memo[n] = t
		}
		return t
	}
}

// locate finds the offset at which every anchor of edits matches: 0, or
// the one other offset within RelocateWithin lines.
func locate(edits []LineEdit, table lineTable, tagAt func(int) string, b []byte, display string, maxLine int) (int, *fault.Error) {
	total := table.total
	matches := func(d int) bool {
		for _, e := range edits {
			for _, r := range e.refs() {
				n := r.Number + d
				if n < 1 || n > total || tagAt(n) != r.Tag {
					return false
				}
			}
		}
		return true
	}
	if matches(0) {
		return 0, nil
	}
	var found []int
	for k := 1; k <= RelocateWithin; k++ {
		for _, d := range []int{k, -k} {
			if matches(d) {
				found = append(found, d)
			}
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	// The first anchor, in argument order, that does not match where it says.
	var stale LineRef
	for _, e := range edits {
		for _, r := range e.refs() {
			if stale.Number == 0 && (r.Number > total || tagAt(r.Number) != r.Tag) {
				stale = r
			}
		}
	}
	msg := "line " + strconv.Itoa(stale.Number) + ` of "` + display + `" is no longer ` + stale.String()
	center := min(stale.Number, total)
	from, to := max(center-StaleContext, 1), min(center+StaleContext, total)
	if _, ok := table.lines[from]; !ok && from <= to {
		// An anchor past the end of the file: its context is the file's
		// last lines, which the first pass did not keep.
		table = indexLines(b, [][2]int{{from, to}})
	}
	var ctx strings.Builder
	for n := from; n <= to; n++ {
		l := table.lines[n]
		text := b[l.start:l.textEnd]
		ctx.WriteString("\n" + Anchor(n, Tag(text)) + ": " + TruncateLine(string(text), maxLine))
	}
	if len(found) > 1 {
		ctx.WriteString("\nThe anchors fit " + strconv.Itoa(len(found)) + " places within " + strconv.Itoa(RelocateWithin) + " lines (" + shifts(found) + "), so none was chosen.")
	}
	return 0, fault.New(fault.CodeEditNotFound, msg+ctx.String())
}

// shifts names offsets as "<k> line(s) lower, <m> line(s) higher", in
// the order found (nearest first).
func shifts(found []int) string {
	parts := make([]string, len(found))
	for i, d := range found {
		parts[i] = ShiftText(d)
	}
	return strings.Join(parts, ", ")
}

// ShiftText is "<k> line(s) lower" for d > 0, "<k> line(s) higher" for d < 0.
func ShiftText(d int) string {
	if d < 0 {
		return strconv.Itoa(-d) + " line(s) higher"
	}
	return strconv.Itoa(d) + " line(s) lower"
}

// region is the lines first..last of b (clamped to the file), anchored, at
// most RegionMaxLines of them, and the region's last line.
func region(b []byte, first, last, maxLine int) ([]Line, int) {
	if first < 1 {
		return nil, 0
	}
	table := indexLines(b, [][2]int{{first, first + RegionMaxLines - 1}})
	last = min(last, table.total)
	if first > last {
		return nil, 0
	}
	out := make([]Line, 0, min(last-first+1, RegionMaxLines))
	for n := first; n <= last && len(out) < RegionMaxLines; n++ {
		l := table.lines[n]
		text := b[l.start:l.textEnd]
		out = append(out, Line{Number: n, Text: TruncateLine(string(text), maxLine), Tag: Tag(text)})
	}
	return out, last
}

// EditLinesOutput is edit_lines's success text: the edit sentence, where
// the anchors were found when they had moved, and the changed region with
// its new anchors (docs/edits.md, "Anchored lines").
func EditLinesOutput(display string, a LinesApplied) string {
	var b strings.Builder
	b.WriteString(EditOutput(display, false))
	if a.Shift != 0 {
		b.WriteString("\nAnchors found " + ShiftText(a.Shift) + ".")
	}
	b.WriteString(RegionText(a))
	return b.String()
}

// RegionText is what follows the sentence of an edit_lines answer: a
// newline and "Lines <a>-<b> now:" with the region's anchored lines, and,
// when the region is longer than shown, where it continues; or a newline
// and "The file has no lines now."
func RegionText(a LinesApplied) string {
	if len(a.Region) == 0 {
		return "\nThe file has no lines now."
	}
	first, shown := a.Region[0].Number, a.Region[len(a.Region)-1].Number
	var b []byte
	b = append(b, "\nLines "...)
	b = strconv.AppendInt(b, int64(first), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(shown), 10)
	b = append(b, " now:"...)
	for _, l := range a.Region {
		b = append(b, '\n')
		b = AppendLinePrefix(b, l)
		b = append(b, l.Text...)
	}
	if a.RegionEnd > shown {
		b = append(b, "\n(The change goes on to line "...)
		b = strconv.AppendInt(b, int64(a.RegionEnd), 10)
		b = append(b, ": read from offset="...)
		b = strconv.AppendInt(b, int64(shown+1), 10)
		b = append(b, " to see the rest.)"...)
	}
	return string(b)
}
