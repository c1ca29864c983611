// Package render turns raw file bytes into the read window and produces the
// texts of the original tool-fs's tools: read, write and edit outputs, their error
// texts and argument messages, remedies, diffs and the tool catalog. (Texts
// of our own, such as body and session messages, live beside the code that
// raises them in internal/tools; search texts in internal/search.) It is pure: no I/O, no HTTP, and it imports
// nothing else of this module.
package render

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// Caps are the read caps: Limit is the default and maximum number of lines
// of one window, MaxLineLength the code points kept per line, MaxBytes the
// byte budget of the shown lines' texts.
type Caps struct{ Limit, MaxLineLength, MaxBytes int }

// DefaultCaps returns the original tool-fs's read caps: 2000 lines, 2000 code points
// per line, 51200 bytes.
func DefaultCaps() Caps { return Caps{Limit: 2000, MaxLineLength: 2000, MaxBytes: 51200} }

// Line is one shown line: its 1-based number in the file and its text
// (without the line ending, possibly truncated).
type Line struct {
	Number int    `json:"number"`
	Text   string `json:"text"`
	// Tag is the line's tag in an anchored window (Windower.Anchor), from
	// its whole text even when Text is truncated; "" otherwise.
	Tag string `json:"tag,omitempty"`
}

// Footer says what ended a read window.
type Footer int

// The three footers. FooterEOF also covers a window whose limit ends exactly
// at the last line.
const (
	FooterEOF    Footer = iota // the window reaches the end of the file
	FooterLimit                // the line limit ended it; more lines follow
	FooterCapped               // the byte cap ended it; more lines follow
)

// String returns "eof", "limit" or "capped" (the metrics label values).
func (f Footer) String() string {
	switch f {
	case FooterLimit:
		return "limit"
	case FooterCapped:
		return "capped"
	}
	return "eof"
}

// Window is a finished read window. Offset is the requested first line;
// Lines start there; TotalLines counts every line of the file.
type Window struct {
	Offset     int
	Lines      []Line
	TotalLines int
	Footer     Footer
}

// BinarySample is how many leading bytes are searched for a NUL byte.
const BinarySample = 8192

// ErrBinary reports a NUL byte in the first BinarySample bytes. It wins over
// ErrInvalidUTF8 when both apply.
var ErrBinary = errors.New("render: binary file (NUL byte in the first 8192 bytes)")

// ErrInvalidUTF8 reports invalid UTF-8 anywhere in the file, including a
// sequence cut short by the end of the file.
var ErrInvalidUTF8 = errors.New("render: invalid UTF-8 text")

// errClosed is returned by Write after Close.
var errClosed = errors.New("render: write after close")

// OffsetOutOfRangeError reports an offset past the last line. Offset 1 on an
// empty file is not an error.
type OffsetOutOfRangeError struct{ Offset, Total int }

// Error describes the error without the path; MsgOffsetOutOfRange is the
// model-facing text.
func (e *OffsetOutOfRangeError) Error() string {
	return "render: offset " + strconv.Itoa(e.Offset) + " is out of range (" + strconv.Itoa(e.Total) + " lines)"
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// Windower builds one read window from the raw bytes of a file, fed through
// Write in chunks of any size; chunk boundaries never change the result. It
// checks the text as it goes (NUL in the first 8192 bytes, UTF-8 validity)
// and counts every line, so TotalLines is exact. Memory is bounded by the
// window: the selected lines plus at most 4*MaxLineLength bytes of the line
// being read. A Windower is not safe for concurrent use.
type Windower struct {
	offset, limit, maxLine, maxBytes int
	hold                             int    // bytes of a candidate line worth keeping
	suffix                           string // truncation suffix

	pos     int64  // raw bytes seen
	carry   []byte // incomplete UTF-8 sequence at the end of the last chunk
	invalid bool   // invalid UTF-8 seen; reported once the NUL sample is done
	err     error  // sticky result error
	closed  bool
	started bool // the first text byte has been seen (BOM handled)

	lineNo    int  // complete lines so far
	partial   bool // bytes seen after the last newline
	selecting bool
	cur       []byte // held prefix of the candidate line
	curLen    int    // full byte length of the candidate line so far
	curCR     bool   // the candidate line's last byte so far is '\r'
	outBytes  int    // byte-cap cost of the selected lines
	sel       []Line
	taken     int // lines already handed out by Ready

	// The texts of lines selected during one Write are gathered in arena
	// and become one string when the Write ends (seal): one allocation per
	// chunk instead of one per line. unsealed is the first such line.
	arena    strings.Builder // String does not copy
	ends     []int           // end in arena of each unsealed line's text
	unsealed int

	// An anchored window tags each selected line (anchor.go). A line
	// longer than hold is hashed as it streams by (tagger), a trailing
	// '\r' held back until the next byte shows it is not the line's end.
	anchors   bool
	tagger    *xxh3.Hasher
	streaming bool
	pendingCR bool

	win Window
}

// NewWindower starts a window at the 1-based line offset with at most limit
// lines. Values below 1 (offset, limit, and each cap) count as 1; Caps.Limit
// is not used here (the caller validates limit against it).
func NewWindower(offset, limit int, caps Caps) *Windower {
	offset, limit = max(offset, 1), max(limit, 1)
	maxLine, maxBytes := max(caps.MaxLineLength, 1), max(caps.MaxBytes, 1)
	hold := math.MaxInt
	if maxLine <= math.MaxInt/4 {
		hold = 4 * maxLine // a code point is at most 4 bytes
	}
	return &Windower{
		offset:    offset,
		limit:     limit,
		maxLine:   maxLine,
		maxBytes:  maxBytes,
		hold:      hold,
		suffix:    "... (line truncated to " + strconv.Itoa(maxLine) + " chars)",
		selecting: true,
	}
}

// ResumeWindower starts a window like NewWindower, over bytes that begin
// at mark at of a file whose text checks a full read already passed (the
// LineIndex of its version): a BOM is stripped only at byte 0, and the line numbers go on
// from at.Line. Feed it until Selecting is false, then Stop; or to the end
// of the file, then Close.
func ResumeWindower(offset, limit int, caps Caps, at Mark) *Windower {
	w := NewWindower(offset, limit, caps)
	w.started, w.lineNo, w.pos = at.Byte > 0, at.Line, at.Byte
	return w
}

// Anchor makes the window anchored: each selected line carries its Tag
// (the read of the anchors dialect, docs/edits.md). Call it before the
// first Write. It returns w.
func (w *Windower) Anchor() *Windower {
	w.anchors = true
	return w
}

// Write feeds the next bytes of the file. It returns ErrBinary or
// ErrInvalidUTF8 as soon as the outcome is certain (invalid UTF-8 inside the
// NUL sample waits for the sample to end), and keeps returning it. p is not
// retained.
func (w *Windower) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errClosed
	}
	if w.pos < BinarySample {
		sample := p[:min(int64(len(p)), BinarySample-w.pos)]
		if bytes.IndexByte(sample, 0) >= 0 {
			w.err = ErrBinary
			return 0, w.err
		}
	}
	w.pos += int64(len(p))
	if !w.invalid {
		w.text(p)
		w.seal()
	}
	if w.invalid && w.pos >= BinarySample {
		w.err = ErrInvalidUTF8
		return 0, w.err
	}
	return len(p), nil
}

// text validates p as the continuation of a UTF-8 stream and hands whole
// characters on to lines. An incomplete sequence at the end of p is carried.
func (w *Windower) text(p []byte) {
	if len(w.carry) > 0 {
		need := seqLen(w.carry[0]) - len(w.carry)
		take := min(need, len(p))
		w.carry = append(w.carry, p[:take]...)
		p = p[take:]
		if take < need {
			return
		}
		if !utf8.Valid(w.carry) {
			w.invalid = true
			return
		}
		w.lines(w.carry)
		w.carry = w.carry[:0]
	}
	cut := incompleteTail(p)
	if !utf8.Valid(p[:cut]) {
		w.invalid = true
		return
	}
	w.lines(p[:cut])
	w.carry = append(w.carry, p[cut:]...)
}

// seqLen is the length a UTF-8 sequence with lead byte b claims; invalid
// leads claim 1 so that utf8.Valid rejects them.
func seqLen(b byte) int {
	switch {
	case b >= 0xF0 && b < 0xF8:
		return 4
	case b >= 0xE0 && b < 0xF0:
		return 3
	case b >= 0xC0 && b < 0xE0:
		return 2
	}
	return 1
}

// incompleteTail returns where a sequence that p ends in the middle of
// begins, or len(p).
func incompleteTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-3; i-- {
		if utf8.RuneStart(p[i]) {
			if seqLen(p[i]) > len(p)-i {
				return i
			}
			break
		}
	}
	return len(p)
}

// lines consumes validated text that ends on a character boundary.
func (w *Windower) lines(s []byte) {
	if !w.started && len(s) > 0 {
		w.started = true
		s = bytes.TrimPrefix(s, bom)
	}
	if len(s) == 0 {
		return
	}
	w.partial = s[len(s)-1] != '\n'
	for len(s) > 0 {
		switch {
		case !w.selecting:
			w.lineNo += bytes.Count(s, []byte{'\n'})
			return
		case w.lineNo+1 < w.offset:
			need := w.offset - 1 - w.lineNo
			if c := bytes.Count(s, []byte{'\n'}); c < need {
				w.lineNo += c
				return
			}
			for ; need > 0; need-- {
				s = s[bytes.IndexByte(s, '\n')+1:]
				w.lineNo++
			}
		default:
			if w.sel == nil {
				w.reserve(s)
			}
			i := bytes.IndexByte(s, '\n')
			if i < 0 {
				w.keep(s)
				return
			}
			if w.curLen == 0 {
				w.finish(s[:i], i, i > 0 && s[i-1] == '\r')
			} else {
				w.keep(s[:i])
				w.finish(w.cur, w.curLen, w.curCR)
			}
			s = s[i+1:]
		}
	}
}

// keep appends part of the candidate line, holding only what could be shown.
func (w *Windower) keep(seg []byte) {
	if len(seg) == 0 {
		return
	}
	if w.anchors {
		if !w.streaming && w.curLen+len(seg) > w.hold {
			// The line outgrows what is held: its tag is hashed from here
			// on as it streams, starting with the bytes held so far (all of
			// them, since they were within hold).
			if w.tagger == nil {
				w.tagger = xxh3.New()
			}
			w.tagger.Reset()
			w.streaming = true
			w.tagStream(w.cur)
		}
		if w.streaming {
			w.tagStream(seg)
		}
	}
	w.curLen += len(seg)
	w.curCR = seg[len(seg)-1] == '\r'
	if room := w.hold - len(w.cur); room > 0 {
		w.cur = append(w.cur, seg[:min(room, len(seg))]...)
	}
}

// finish ends the candidate line: stored is its held prefix, n its full
// length, cr whether it ends in '\r' (not shown).
func (w *Windower) finish(stored []byte, n int, cr bool) {
	if cr {
		n--
	}
	if len(stored) > n {
		stored = stored[:n]
	}
	w.lineNo++
	var tag string
	if w.anchors {
		if w.streaming {
			tag = tagOf(w.tagger.Sum64()) // a held-back '\r' was the line's end
		} else {
			tag = Tag(stored[:n]) // the whole line is in stored
		}
		w.streaming, w.pendingCR = false, false
	}
	keep, truncated := w.shown(stored, n)
	cost := keep
	if truncated {
		cost += len(w.suffix)
	}
	if len(w.sel) > 0 {
		cost++ // the joining newline
		if w.outBytes+cost > w.maxBytes {
			w.selecting = false
			w.cur, w.curLen, w.curCR = w.cur[:0], 0, false
			return
		}
	}
	w.outBytes += cost
	w.arena.Write(stored[:keep])
	if truncated {
		w.arena.WriteString(w.suffix)
	}
	w.cur, w.curLen, w.curCR = w.cur[:0], 0, false
	w.sel = append(w.sel, Line{Number: w.lineNo, Tag: tag}) // Text is set by seal
	w.ends = append(w.ends, w.arena.Len())
	// Any further line costs at least its joining newline.
	if len(w.sel) >= w.limit || w.outBytes >= w.maxBytes {
		w.selecting = false
	}
}

// tagStream hashes the next bytes of a line too long to hold, all but a
// final '\r', which is hashed only once more bytes follow it.
func (w *Windower) tagStream(seg []byte) {
	if len(seg) == 0 {
		return
	}
	if w.pendingCR {
		w.tagger.Write(crByte)
		w.pendingCR = false
	}
	if seg[len(seg)-1] == '\r' {
		seg, w.pendingCR = seg[:len(seg)-1], true
	}
	w.tagger.Write(seg)
}

var crByte = []byte{'\r'}

// reserve sizes the window's slices once, from the text where selection
// starts: appending line by line to slices that end up holding ~50 KiB
// allocated about four times that (large slices grow by a quarter).
func (w *Windower) reserve(s []byte) {
	head := s[:min(len(s), w.maxBytes)]
	lines := min(w.limit, bytes.Count(head, []byte{'\n'})+1)
	w.sel = make([]Line, 0, lines)
	w.ends = make([]int, 0, lines)
	w.arena.Grow(len(head) + len(w.suffix))
}

// seal turns the texts gathered in arena into one string and points the
// lines selected since the last seal at their parts of it.
func (w *Windower) seal() {
	if w.unsealed == len(w.sel) {
		return
	}
	texts := w.arena.String()
	at := 0
	for i := w.unsealed; i < len(w.sel); i++ {
		end := w.ends[i-w.unsealed]
		w.sel[i].Text = texts[at:end]
		at = end
	}
	w.arena, w.ends, w.unsealed = strings.Builder{}, w.ends[:0], len(w.sel)
}

// shown says what is shown of a line of n bytes whose held prefix is b:
// its first keep bytes, then the truncation suffix if truncated (a line
// longer than maxLine code points keeps maxLine of them).
func (w *Windower) shown(b []byte, n int) (keep int, truncated bool) {
	if n <= w.maxLine {
		return len(b), false
	}
	// b holds at least maxLine whole code points whenever the line is longer
	// than maxLine, so the walk never reaches a cut character.
	i := 0
	for runes := 0; runes < w.maxLine && i < len(b); runes++ {
		if b[i] < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRune(b[i:])
			i += size
		}
	}
	if i >= n {
		return len(b), false
	}
	return i, true
}

// Ready returns the selected lines not yet returned that may be released:
// none until the NUL sample has passed (or Close), then each line once; after
// a successful Close, the remainder. It returns nil after an error. The
// slice must not be modified.
func (w *Windower) Ready() []Line {
	if w.err != nil || w.invalid || (!w.closed && w.pos < BinarySample) {
		return nil
	}
	out := w.sel[w.taken:len(w.sel):len(w.sel)]
	w.taken = len(w.sel)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Selecting reports whether more lines can still join the window. It turns
// false once the limit is reached or the byte cap is hit (counting goes on),
// and after an error or Close.
func (w *Windower) Selecting() bool {
	return w.selecting && w.err == nil && !w.invalid && !w.closed
}

// Stop ends the input of a window that is no longer Selecting, in a file
// of total lines (a LineIndex's Total): the rest of the file is not read.
// It returns what Close would have returned after the whole file.
func (w *Windower) Stop(total int) (Window, error) {
	if w.closed {
		return w.win, w.err
	}
	if w.err == nil && w.invalid {
		w.err = ErrInvalidUTF8
	}
	if w.err == nil && w.selecting {
		w.err = errNotStopped
	}
	w.closed = true
	if w.err != nil {
		return Window{}, w.err
	}
	w.seal()
	return w.finishWindow(total)
}

// errNotStopped is Stop called while lines could still join the window.
var errNotStopped = errors.New("render: stop while selecting")

// Close ends the input and returns the finished Window, or ErrBinary,
// ErrInvalidUTF8 or *OffsetOutOfRangeError. Calling it again returns the
// same result.
func (w *Windower) Close() (Window, error) {
	if w.closed {
		return w.win, w.err
	}
	w.closed = true
	if w.err == nil && (w.invalid || len(w.carry) > 0) {
		w.err = ErrInvalidUTF8
	}
	if w.err != nil {
		return Window{}, w.err
	}
	if w.partial {
		if w.selecting && w.lineNo+1 >= w.offset {
			w.finish(w.cur, w.curLen, w.curCR)
		} else {
			w.lineNo++
		}
	}
	w.seal()
	return w.finishWindow(w.lineNo)
}

// finishWindow checks the offset against the file's total lines and
// chooses the footer.
func (w *Windower) finishWindow(total int) (Window, error) {
	if w.offset > total && !(total == 0 && w.offset == 1) {
		w.err = &OffsetOutOfRangeError{Offset: w.offset, Total: total}
		return Window{}, w.err
	}
	footer := FooterEOF
	if n := len(w.sel); n > 0 && w.sel[n-1].Number < total {
		// More lines follow: below the limit only the byte cap stops a window.
		footer = FooterLimit
		if n < w.limit {
			footer = FooterCapped
		}
	}
	if w.sel == nil {
		w.sel = []Line{} // metadata shows "lines": [], never null
	}
	w.win = Window{Offset: w.offset, Lines: w.sel, TotalLines: total, Footer: footer}
	return w.win, nil
}
