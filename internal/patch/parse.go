package patch

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// The markers of the grammar (SPEC §25). A marker line may carry
// surrounding whitespace; the path after a file marker is trimmed.
const (
	markBegin  = "*** Begin Patch"
	markEnd    = "*** End Patch"
	markAdd    = "*** Add File:"
	markDelete = "*** Delete File:"
	markUpdate = "*** Update File:"
	markMove   = "*** Move to:"
	markEOF    = "*** End of File"
)

// The reasons of a parse error, after "invalid patch: line <n>: "
// (docs/edits.md, "apply_patch"; pinned by TestParseErrors).
const (
	reasonBegin     = `the patch must start with "*** Begin Patch"`
	reasonEnd       = `the patch must end with "*** End Patch"`
	reasonAfterEnd  = `text after "*** End Patch"`
	reasonNoFile    = `the patch changes no file`
	reasonEmptyPath = `the path is empty`
	reasonNULPath   = `the path contains a NUL byte`
	reasonAddLine   = `a line of an added file must start with "+"`
	reasonNoLines   = `the hunk has no lines`
	reasonEOF       = `"*** End of File" must end a hunk`
	reasonMove      = `"*** Move to:" must directly follow "*** Update File:"`
	reasonTooLarge  = `the patch is larger than ` + "16777216" + ` bytes`
	reasonFiles     = `more than 1000 file operations`
	reasonHunks     = `more than 10000 hunks`
)

func reasonFileOp(found string) string {
	return `expected "*** Add File: <path>", "*** Delete File: <path>" or "*** Update File: <path>", found ` + quote(found)
}

func reasonHunkLine(found string) string {
	return `a hunk line must start with " ", "-" or "+", found ` + quote(found)
}

func reasonEmptyUpdate(p string) string {
	return `the update of ` + quote(p) + ` has neither a hunk nor "*** Move to:"`
}

func reasonTwice(p string) string {
	return quote(p) + ` is named by more than one file operation`
}

// quoteMax is how many characters of a line a parse error quotes.
const quoteMax = 60

// quote is s, cut to quoteMax characters ("..." after a cut), in Go's
// double-quoted form.
func quote(s string) string {
	if utf8.RuneCountInString(s) > quoteMax {
		i := 0
		for n := 0; n < quoteMax; n++ {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		s = s[:i] + "..."
	}
	return strconv.Quote(s)
}

// ParseError is a parse error's message: "invalid patch: line <n>: <reason>".
func parseError(line int, reason string) *fault.Error {
	return fault.New(fault.CodeInvalidArgument, "invalid patch: line "+strconv.Itoa(line)+": "+reason)
}

// line is one line of the patch: its text without "\n" and one "\r"
// before it, and its 1-based number.
type line struct {
	text string
	n    int
}

func (l line) trimmed() string { return strings.TrimSpace(l.text) }

// splitLines splits s on "\n" (a final "\n" starts no line), each line
// without one "\r" before its "\n", numbered from 1.
func splitLines(s string) []line {
	var out []line
	for n := 1; s != ""; n++ {
		i := strings.IndexByte(s, '\n')
		var t string
		if i < 0 {
			t, s = s, ""
		} else {
			t, s = s[:i], s[i+1:]
		}
		out = append(out, line{text: strings.TrimSuffix(t, "\r"), n: n})
	}
	return out
}

// Parse reads a patch in Codex's grammar (SPEC §25). Besides the grammar it
// accepts what Codex's own parser accepts: blank lines around the patch
// and between operations, the patch wrapped in a heredoc (`<<'EOF'` ...
// `EOF`, also after `cat`, `apply_patch` or `applypatch`, the command a
// model copies from a shell call, as opencode accepts), a first hunk
// without "@@", an empty line inside a hunk as empty context. A unified diff's range header (`@@ -1,3 +1,4 @@ text`) counts
// as the header `text`. Its errors are INVALID_ARGUMENT
// `invalid patch: line <n>: <reason>`.
func Parse(input string) (*Patch, error) {
	if len(input) > MaxBytes {
		return nil, parseError(strings.Count(input[:MaxBytes], "\n")+1, reasonTooLarge)
	}
	lines := splitLines(input)
	first, last := 0, len(lines)
	for first < last && lines[first].trimmed() == "" {
		first++
	}
	for last > first && lines[last-1].trimmed() == "" {
		last--
	}
	if first == last {
		return nil, parseError(1, reasonBegin)
	}
	if t := lines[first].trimmed(); t != markBegin && heredocOpen(t) &&
		last-first >= 4 && strings.HasSuffix(lines[last-1].trimmed(), "EOF") {
		first, last = first+1, last-1
		for first < last && lines[first].trimmed() == "" {
			first++
		}
	}
	if lines[first].trimmed() != markBegin {
		return nil, parseError(lines[first].n, reasonBegin)
	}
	p := &parser{lines: lines[first+1 : last], names: map[string]bool{}}
	end, err := p.files()
	if err != nil {
		return nil, err
	}
	if end < 0 {
		return nil, parseError(lines[len(lines)-1].n+1, reasonEnd)
	}
	for _, l := range p.lines[end+1:] {
		if l.trimmed() != "" {
			return nil, parseError(l.n, reasonAfterEnd)
		}
	}
	if len(p.out.Files) == 0 {
		return nil, parseError(p.lines[end].n, reasonNoFile)
	}
	return &p.out, nil
}

// heredocOpen reports whether t opens a heredoc around a patch: <<EOF,
// <<'EOF' or <<"EOF", alone or after one of the commands models write
// before it.
func heredocOpen(t string) bool {
	for _, cmd := range []string{"cat", "apply_patch", "applypatch"} {
		if rest, ok := strings.CutPrefix(t, cmd); ok && rest != strings.TrimLeft(rest, " \t") {
			t = strings.TrimLeft(rest, " \t")
			break
		}
	}
	return t == "<<EOF" || t == "<<'EOF'" || t == `<<"EOF"`
}

// parser is one Parse's state.
type parser struct {
	lines []line
	i     int
	out   Patch
	hunks int
	names map[string]bool // every path named so far, as sameName spells it
}

// files reads file operations up to "*** End Patch" and returns that
// line's index in p.lines, or -1 when the patch ended without it.
func (p *parser) files() (int, error) {
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		t := l.trimmed()
		switch {
		case t == "":
			p.i++
		case t == markEnd:
			return p.i, nil
		case strings.HasPrefix(t, markAdd):
			if err := p.add(l, strings.TrimSpace(t[len(markAdd):])); err != nil {
				return 0, err
			}
		case strings.HasPrefix(t, markDelete):
			if err := p.file(File{Op: OpDelete, Path: strings.TrimSpace(t[len(markDelete):]), Line: l.n}); err != nil {
				return 0, err
			}
			p.i++
		case strings.HasPrefix(t, markUpdate):
			if err := p.update(l, strings.TrimSpace(t[len(markUpdate):])); err != nil {
				return 0, err
			}
		case strings.HasPrefix(t, markMove):
			return 0, parseError(l.n, reasonMove)
		default:
			return 0, parseError(l.n, reasonFileOp(l.text))
		}
	}
	return -1, nil
}

// file records f once its path and the bounds are checked.
func (p *parser) file(f File) error {
	if f.Path == "" {
		return parseError(f.Line, reasonEmptyPath)
	}
	if len(p.out.Files) == MaxFiles {
		return parseError(f.Line, reasonFiles)
	}
	if err := p.name(f.Line, f.Path); err != nil {
		return err
	}
	p.out.Files = append(p.out.Files, f)
	return nil
}

// name claims path for one operation: a file changed twice in one patch
// is refused rather than applied in an order the model may not have meant.
// No path holds a NUL byte (the kernel would cut it there).
func (p *parser) name(n int, path string) error {
	if strings.IndexByte(path, 0) >= 0 {
		return parseError(n, reasonNULPath)
	}
	k := sameName(path)
	if p.names[k] {
		return parseError(n, reasonTwice(path))
	}
	p.names[k] = true
	return nil
}

// add reads an Add File section: its "+" lines up to the next marker.
// Blank lines before the next marker are spacing; a blank line before
// another "+" line is refused, since it has no "+".
func (p *parser) add(head line, path string) error {
	p.i++
	var b strings.Builder
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if strings.HasPrefix(l.text, "+") {
			b.WriteString(l.text[1:])
			b.WriteByte('\n')
			p.i++
			continue
		}
		if l.trimmed() != "" {
			if !isMarker(l) {
				return parseError(l.n, reasonAddLine)
			}
			break
		}
		j := p.i
		for j < len(p.lines) && p.lines[j].trimmed() == "" {
			j++
		}
		if j < len(p.lines) && strings.HasPrefix(p.lines[j].text, "+") {
			return parseError(l.n, reasonAddLine)
		}
		p.i = j
	}
	return p.file(File{Op: OpAdd, Path: path, Line: head.n, Content: b.String()})
}

// isMarker reports whether l ends a section: a line starting with "*"
// (no hunk line does), or a marker with whitespace around it.
func isMarker(l line) bool {
	if strings.HasPrefix(l.text, "*") {
		return true
	}
	t := l.trimmed()
	for _, m := range []string{markAdd, markDelete, markUpdate, markMove} {
		if strings.HasPrefix(t, m) {
			return true
		}
	}
	return t == markEnd || t == markEOF || t == markBegin
}

// update reads an Update File section: an optional "*** Move to:" right
// after it, then its hunks up to the next marker.
func (p *parser) update(head line, path string) error {
	f := File{Op: OpUpdate, Path: path, Line: head.n}
	if f.Path == "" {
		return parseError(head.n, reasonEmptyPath)
	}
	p.i++
	if p.i < len(p.lines) {
		if t := p.lines[p.i].trimmed(); strings.HasPrefix(t, markMove) {
			f.MoveTo = strings.TrimSpace(t[len(markMove):])
			if f.MoveTo == "" {
				return parseError(p.lines[p.i].n, reasonEmptyPath)
			}
			p.i++
		}
	}
	hunks, err := p.section(head.n)
	if err != nil {
		return err
	}
	f.Hunks = hunks
	if f.MoveTo != "" && sameName(f.MoveTo) == sameName(f.Path) {
		f.MoveTo = "" // a move onto itself is an update
	}
	if len(f.Hunks) == 0 && f.MoveTo == "" {
		return parseError(head.n, reasonEmptyUpdate(path))
	}
	if err := p.file(f); err != nil {
		return err
	}
	if f.MoveTo != "" {
		return p.name(head.n+1, f.MoveTo)
	}
	return nil
}

// unifiedRange is a unified diff's hunk header after its "@@": its ranges,
// then what follows the closing "@@" (git's function context).
var unifiedRange = regexp.MustCompile(`^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@(.*)$`)

// section reads hunks from p.i up to the line that ends the section (a
// marker, or the end), through a shared parser of hunk lines. first is
// the line a section without any line is reported at.
func (p *parser) section(first int) ([]Hunk, error) {
	hs := hunkReader{limit: MaxHunks - p.hunks}
	for ; p.i < len(p.lines); p.i++ {
		l := p.lines[p.i]
		if isMarker(l) && l.trimmed() != markEOF && !strings.HasPrefix(l.trimmed(), markMove) {
			break
		}
		if err := hs.read(l); err != nil {
			return nil, err
		}
	}
	hunks, err := hs.close()
	p.hunks += len(hunks)
	return hunks, err
}

// hunkReader reads the lines of an Update's hunks (or an update_file
// operation's diff), one at a time.
type hunkReader struct {
	hunks []Hunk
	open  bool // the last hunk takes more lines
	limit int  // the most hunks it may read
	// errLine formats an error at a line (nil: parseError).
	errLine func(n int, reason string) *fault.Error
}

func (r *hunkReader) fail(n int, reason string) *fault.Error {
	if r.errLine != nil {
		return r.errLine(n, reason)
	}
	return parseError(n, reason)
}

// start opens a new hunk at line n with header h ("": none), after
// checking the one before it has lines; a hunk with no line yet takes h
// as one more header.
func (r *hunkReader) start(n int, h string) error {
	if r.open && len(r.hunks[len(r.hunks)-1].Lines) == 0 {
		if h != "" {
			last := &r.hunks[len(r.hunks)-1]
			last.Headers = append(last.Headers, h)
		}
		return nil
	}
	r.open = false
	if len(r.hunks) == r.limit {
		return r.fail(n, reasonHunks)
	}
	r.hunks = append(r.hunks, Hunk{Line: n})
	if h != "" {
		r.hunks[len(r.hunks)-1].Headers = []string{h}
	}
	r.open = true
	return nil
}

// closeLast checks that the last hunk, if open, has a line.
func (r *hunkReader) closeLast() error {
	if r.open && len(r.hunks[len(r.hunks)-1].Lines) == 0 {
		h := r.hunks[len(r.hunks)-1]
		return r.fail(h.Line, reasonNoLines)
	}
	r.open = false
	return nil
}

func (r *hunkReader) read(l line) error {
	t := l.text
	switch {
	case strings.HasPrefix(t, "@@"):
		h := strings.TrimSpace(t[2:])
		if m := unifiedRange.FindStringSubmatch(h); m != nil {
			h = strings.TrimSpace(m[1])
		}
		return r.start(l.n, h)
	case l.trimmed() == markEOF:
		if !r.open || len(r.hunks[len(r.hunks)-1].Lines) == 0 {
			return r.fail(l.n, reasonEOF)
		}
		r.hunks[len(r.hunks)-1].EOF = true
		r.open = false
		return nil
	case strings.HasPrefix(l.trimmed(), markMove):
		return r.fail(l.n, reasonMove)
	case strings.TrimSpace(t) == "" && (!r.open || t == "" || t[0] != ' '):
		// Spacing between hunks, or inside one an empty line that lost its
		// " " (Codex reads "" as empty context).
		if r.open {
			h := &r.hunks[len(r.hunks)-1]
			h.Lines = append(h.Lines, Line{Kind: ' ', Bare: true})
		}
		return nil
	case t[0] == ' ' || t[0] == '-' || t[0] == '+':
		if !r.open {
			if err := r.start(l.n, ""); err != nil {
				return err
			}
		}
		h := &r.hunks[len(r.hunks)-1]
		h.Lines = append(h.Lines, Line{Kind: t[0], Text: t[1:]})
		return nil
	}
	return r.fail(l.n, reasonHunkLine(t))
}

// close ends the last hunk and returns them all.
func (r *hunkReader) close() ([]Hunk, error) {
	if err := r.closeLast(); err != nil {
		return nil, err
	}
	return r.hunks, nil
}
