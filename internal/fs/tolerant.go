package fs

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/textnorm"
	"github.com/zeebo/xxh3"
)

// The levels at which an edit finds old_string (SPEC §25, docs/edits.md,
// "Tolerant edits"), tried in this order; the first that finds a place
// decides. Only LevelLiteral and LevelEndings (§4's CRLF retry, one way)
// exist in the original profile.
const (
	LevelLiteral  = 0 // the bytes as sent
	LevelEndings  = 1 // line endings adapted to the file's, both ways
	LevelPrefixes = 2 // line-number prefixes a read tool shows removed
	LevelTrailing = 3 // whole lines, trailing whitespace ignored
	LevelIndent   = 4 // whole lines, surrounding whitespace ignored, re-indented
	LevelEscapes  = 5 // \n \t \" \' \\ written literally read as what they name
	LevelPunct    = 6 // typographic quotes, dashes and spaces read as ASCII
)

// located is where one edit applies in a text: the level that found it,
// how many places (non-overlapping, left to right), the first and last
// line (1-based) of the first HintMaxLines+1 of them, and the text with
// them replaced (nil unless the edit applies: one place, or replace_all).
type located struct {
	level  int
	count  int
	places [][2]int
	out    []byte
	grew   bool // the replaced text would pass BatchMaxBytes: nothing applied
}

// seeker yields a level's places in text, left to right and
// non-overlapping, each with the bytes that replace it, until yield says
// stop.
type seeker func(yield func(start, end int, repl []byte) bool)

// endings is what kinds of line ending a text has.
type endings struct{ crlf, lf bool }

func endingsOf(text []byte) endings {
	// Counting is a vector pass where walking the lines is a call per line.
	crlf := bytes.Count(text, []byte("\r\n"))
	return endings{crlf: crlf > 0, lf: bytes.Count(text, []byte{'\n'}) > crlf}
}

// endingsAfter is endingsOf for a piece of a text, prevCR saying whether
// the byte before it is "\r".
func endingsAfter(text []byte, prevCR bool) endings {
	var k endings
	for i := 0; ; {
		j := bytes.IndexByte(text[i:], '\n')
		if j < 0 {
			return k
		}
		i += j
		if i > 0 && text[i-1] == '\r' || i == 0 && prevCR {
			k.crlf = true
		} else {
			k.lf = true
		}
		if k.crlf && k.lf {
			return k
		}
		i++
	}
}

// fitEndings makes repl's line endings the file's when the file has one
// kind: in a CRLF file every bare "\n" becomes "\r\n" (not a leading one
// when the matched needle itself starts with "\n": the file's "\r" is
// before it), in an LF file every "\r\n" becomes "\n" (CRs before a
// "\n" all go: "\r\r\n" would otherwise leave one). A file with both
// kinds, or none, keeps repl as it is.
func fitEndings(repl []byte, k endings, needleStartsLF bool) []byte {
	switch {
	case k.crlf && !k.lf:
		var b []byte
		for i, c := range repl {
			bare := c == '\n' && (i == 0 && !needleStartsLF || i > 0 && repl[i-1] != '\r')
			if bare && b == nil {
				b = append(make([]byte, 0, len(repl)+8), repl[:i]...)
			}
			if b != nil {
				if bare {
					b = append(b, '\r')
				}
				b = append(b, c)
			}
		}
		if b != nil {
			return b
		}
	case k.lf && !k.crlf:
		if !bytes.Contains(repl, []byte("\r\n")) {
			break
		}
		// Every CR before a "\n" goes: "\r\r\n" would otherwise leave one.
		b := make([]byte, 0, len(repl))
		for i := 0; i < len(repl); {
			j := i
			for j < len(repl) && repl[j] == '\r' {
				j++
			}
			if j == i {
				b = append(b, repl[i])
				i++
				continue
			}
			if j == len(repl) || repl[j] != '\n' {
				b = append(b, repl[i:j]...)
			}
			i = j
		}
		return b
	}
	return repl
}

// locate finds where e applies in text, trying the levels from `from` on
// (LevelLiteral for a batch item; LevelPrefixes after a single edit's
// streamed pass found nothing at 0 and 1). Without tolerant only levels 0
// and 1 exist, and 1 only as §4's CRLF retry: exactly the original's rules.
// It is pure and bounded: each level reads text a bounded number of times
// (line levels hash each line once and run a KMP over the line hashes,
// their checks of candidates within seekBudget), and holds at most text,
// the replaced text and old_string's lines.
func locate(text []byte, e Edit, tolerant bool, from int, work *int) located {
	return locateWith(text, e, tolerant, from, work, anchorMax)
}

// locateWith is locate with the line levels' anchorMax given (0: always
// the full pass), so a test can compare the two ways.
func locateWith(text []byte, e Edit, tolerant bool, from int, work *int, anchors int) located {
	l := &locator{text: text, e: e, tolerant: tolerant, budget: seekBudget(len(text)), work: work, anchors: anchors}
	if from <= LevelEndings && l.literal(LevelLiteral, text, e.OldString, e.NewString, nil) {
		return l.res
	}
	if !tolerant {
		return l.res
	}
	if old, repl, ok := stripPrefixes(e.OldString, e.NewString); ok && l.literal(LevelPrefixes, text, old, repl, nil) {
		return l.res
	}
	if l.try(LevelTrailing, l.lines(LevelTrailing, false)) ||
		l.try(LevelIndent, l.lines(LevelIndent, false)) ||
		l.try(LevelIndent, l.lines(LevelIndent, true)) {
		return l.done()
	}
	if old, repl, ok := unescapeEdit(text, e.OldString, e.NewString); ok && l.literal(LevelEscapes, text, old, repl, nil) {
		return l.res
	}
	if punctCandidate(text, e.OldString) && l.charge() {
		if hay, old, ok := punctForms(text, e.OldString); ok && l.literal(LevelPunct, hay, old, e.NewString, punctMapper(text)) {
			return l.res
		}
	}
	return l.done()
}

// TolerantWork is how many bytes the tolerant levels (2-6) of one call may
// read in their heavy passes (hashing every line, normalizing punctuation),
// across a batch's items: a pass is charged its text's size. Once it is
// spent no tolerant level claims a place (the edit is a miss, with its
// hint): 16 such passes over a 64 MiB file (docs/edits.md, "Bounds").
const TolerantWork = 1 << 30

// charge takes one pass over the text from the call's work; false (and
// no tolerant level may claim a place) when it is spent.
func (l *locator) charge() bool {
	if l.work == nil {
		return true
	}
	if *l.work < len(l.text) {
		l.spent = true
		return false
	}
	*l.work -= len(l.text)
	return true
}

// seekBudget is how many bytes the line levels may compare checking
// candidates beyond the first of each place: a file built so that every
// line starts a candidate the indentation check refuses would otherwise
// cost its size times old_string's.
func seekBudget(size int) int { return 8*size + 1<<20 }

// locator is one locate call's state.
type locator struct {
	text     []byte
	e        Edit
	tolerant bool
	k        *endings
	res      located
	budget   int
	work     *int // the call's TolerantWork left; nil: unbounded (tests)
	anchors  int  // anchorMax
	spent    bool // a budget ran out: no tolerant level may claim a place
}

func (l *locator) kind() endings {
	if l.k == nil {
		v := endingsOf(l.text)
		l.k = &v
	}
	return *l.k
}

func (l *locator) try(level int, s seeker) bool {
	if s == nil || l.spent {
		return false
	}
	l.res = run(l.text, s, l.e.ReplaceAll, level)
	if l.spent { // a count cut short is no count
		l.res = located{}
		return false
	}
	return l.res.count > 0
}

// done is the result once every level was tried.
func (l *locator) done() located {
	if l.spent {
		return located{}
	}
	return l.res
}

// literal tries old in hay as sent, then with its line endings adapted
// (to CRLF when the file has CRLF, as §4; to LF when it has bare LF, only
// when tolerant), each with repl adapted the same way and fitted to the
// file's endings. Positions in hay map to text through toOrig (nil: hay is
// text). An adapted try of LevelLiteral is LevelEndings.
func (l *locator) literal(level int, hay []byte, old, repl string, toOrig func() func(int) int) bool {
	if old == "" {
		return false
	}
	adapted := max(level, LevelEndings)
	fit := func(r string, needle string) []byte {
		if !l.tolerant {
			return []byte(r)
		}
		return fitEndings([]byte(r), l.kind(), needle[0] == '\n')
	}
	if l.try(level, mapped(literalSeek(hay, []byte(old), fit(repl, old)), toOrig)) {
		return true
	}
	if a := crlfAdapt(old); a != old && l.kind().crlf {
		if l.try(adapted, mapped(literalSeek(hay, []byte(a), fit(crlfAdapt(repl), a)), toOrig)) {
			return true
		}
	}
	if a := NormalizeLF(old); l.tolerant && a != old && l.kind().lf {
		if l.try(adapted, mapped(literalSeek(hay, []byte(a), fit(NormalizeLF(repl), a)), toOrig)) {
			return true
		}
	}
	return false
}

// mapped is s with its positions mapped through a fresh toOrig (nil: as
// they are).
func mapped(s seeker, toOrig func() func(int) int) seeker {
	if toOrig == nil {
		return s
	}
	return func(yield func(int, int, []byte) bool) {
		m := toOrig()
		s(func(start, end int, repl []byte) bool { return yield(m(start), m(end), repl) })
	}
}

// run counts s's places in text and, when the edit applies (one place, or
// replace_all), builds the replaced text, stopping at BatchMaxBytes.
func run(text []byte, s seeker, replaceAll bool, level int) located {
	res := located{level: level}
	var out []byte
	var first struct {
		start, end int
		repl       []byte
	}
	prev, line, lineAt := 0, 1, 0
	s(func(start, end int, repl []byte) bool {
		res.count++
		if len(res.places) <= HintMaxLines {
			line += bytes.Count(text[lineAt:start], []byte{'\n'})
			lineAt = start
			last := line
			if end > start {
				last += bytes.Count(text[start:end-1], []byte{'\n'})
			}
			res.places = append(res.places, [2]int{line, last})
		}
		switch {
		case res.count == 1 && !replaceAll:
			first.start, first.end, first.repl = start, end, repl
		case replaceAll && !res.grew:
			if out == nil {
				out = make([]byte, 0, len(text))
			}
			if int64(len(out))+int64(start-prev)+int64(len(repl)) > BatchMaxBytes {
				res.grew = true
				out = nil
				break
			}
			out = append(append(out, text[prev:start]...), repl...)
			prev = end
		}
		return true
	})
	switch {
	case res.count == 0 || res.count > 1 && !replaceAll:
	case replaceAll:
		if !res.grew {
			if int64(len(out))+int64(len(text)-prev) > BatchMaxBytes {
				res.grew = true
			} else {
				res.out = append(out, text[prev:]...)
			}
		}
	default:
		n := int64(len(text)) - int64(first.end-first.start) + int64(len(first.repl))
		if n > BatchMaxBytes {
			res.grew = true
			break
		}
		res.out = make([]byte, 0, n)
		res.out = append(append(append(res.out, text[:first.start]...), first.repl...), text[first.end:]...)
	}
	return res
}

func literalSeek(text, needle, repl []byte) seeker {
	return func(yield func(int, int, []byte) bool) {
		for pos := 0; pos <= len(text); {
			j := bytes.Index(text[pos:], needle)
			if j < 0 {
				return
			}
			j += pos
			if !yield(j, j+len(needle), repl) {
				return
			}
			pos = j + len(needle)
		}
	}
}

// Line-number prefixes (LevelPrefixes): the forms read tools show before a
// line's text, each after optional spaces: ours "<n>: " (and "<n>#<tag>: "
// in the anchors dialect, a tag being two capital letters: docs/edits.md,
// "Anchored lines"), and "<n> | ", "<n>\t", "<n>→". A line whose text is
// empty may lack the prefix's trailing space.
var prefixSeps = []string{": ", " | ", "\t", "→"}

// stripPrefixes removes old's line-number prefixes when every one of its
// lines carries the same form with consecutive numbers, and new's when
// every non-empty line of new carries that form (any numbers); a new that
// carries it on some lines only is not stripped and the level does not
// apply.
func stripPrefixes(old, repl string) (string, string, bool) {
	lines := splitKeepCR(old)
	if len(lines) == 0 {
		return "", "", false
	}
	sep := ""
	for _, s := range prefixSeps {
		if _, _, ok := cutPrefix(lines[0], s); ok {
			sep = s
			break
		}
	}
	if sep == "" {
		return "", "", false
	}
	var b []byte
	want := -1
	for i, l := range lines {
		n, rest, ok := cutPrefix(l, sep)
		if !ok || want >= 0 && n != want {
			return "", "", false
		}
		want = n + 1
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, rest...)
	}
	if old[len(old)-1] == '\n' {
		b = append(b, '\n')
	}
	newLines := splitKeepCR(repl)
	var nb []byte
	carried, plain := 0, 0
	for i, l := range newLines {
		_, rest, ok := cutPrefix(l, sep)
		switch {
		case ok:
			carried++
		case l != "" && l != "\r":
			plain++
			rest = l
		default:
			rest = l
		}
		if i > 0 {
			nb = append(nb, '\n')
		}
		nb = append(nb, rest...)
	}
	switch {
	case carried == 0:
		return string(b), repl, true
	case plain > 0:
		return "", "", false
	}
	if repl != "" && repl[len(repl)-1] == '\n' {
		nb = append(nb, '\n')
	}
	return string(b), string(nb), true
}

// splitKeepCR splits s into lines on "\n" (a final "\n" starts no line),
// keeping each line's "\r".
func splitKeepCR(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return out
}

// cutPrefix parses "<spaces><n><sep><rest>" (sep without its trailing
// space when rest is empty or just "\r"); n has at most 9 digits.
func cutPrefix(l, sep string) (int, string, bool) {
	i := 0
	for i < len(l) && l[i] == ' ' {
		i++
	}
	j := i
	for j < len(l) && j-i < 10 && l[j] >= '0' && l[j] <= '9' {
		j++
	}
	if j == i || j-i > 9 {
		return 0, "", false
	}
	n, _ := strconv.Atoi(l[i:j])
	rest := l[j:]
	if sep == ": " && len(rest) >= 3 && rest[0] == '#' && isCapital(rest[1]) && isCapital(rest[2]) {
		rest = rest[3:] // an anchored read's "<n>#<tag>: "
	}
	switch {
	case len(rest) >= len(sep) && rest[:len(sep)] == sep:
		return n, rest[len(sep):], true
	case sep[len(sep)-1] == ' ' && (rest == sep[:len(sep)-1] || rest == sep[:len(sep)-1]+"\r"):
		return n, rest[len(sep)-1:], true
	}
	return 0, "", false
}

func isCapital(c byte) bool { return c >= 'A' && c <= 'Z' }

// Line levels (LevelTrailing, LevelIndent) compare whole lines: old's
// lines against as many consecutive lines of the file, each without its
// line ending and with the whitespace the level ignores removed. The span
// replaced runs from the first line's start to the last line's end, its
// line ending included when old_string ends with a newline.

// lineSpace is the whitespace a line level ignores.
func lineSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

func trimRight(l []byte) []byte {
	for len(l) > 0 && lineSpace(l[len(l)-1]) {
		l = l[:len(l)-1]
	}
	return l
}

func trimLeft(l []byte) []byte {
	for len(l) > 0 && lineSpace(l[0]) {
		l = l[1:]
	}
	return l
}

var utf8BOM = []byte("\ufeff")

// lineOf is one line of the file: where it starts, where its text ends
// (before "\r\n" or "\n") and where the next line starts.
type lineOf struct{ start, textEnd, end int }

// lines is the seeker of a line level. With dropLeading, old's leading
// blank lines are left out (a model's spurious first blank line, Aider's
// issue #25) and as many of new's leading blank lines with them; it is nil
// when there is nothing to drop, or nothing would be left.
func (l *locator) lines(level int, dropLeading bool) seeker {
	text, k := l.text, l.kind()
	oldLines := bytes.Split([]byte(l.e.OldString), []byte{'\n'})
	endsNL := len(oldLines) > 1 && len(oldLines[len(oldLines)-1]) == 0
	if endsNL {
		oldLines = oldLines[:len(oldLines)-1]
	}
	newText := []byte(l.e.NewString)
	if dropLeading {
		d := 0
		for d < len(oldLines) && len(trimLeft(oldLines[d])) == 0 {
			d++
		}
		if d == 0 || d == len(oldLines) {
			return nil
		}
		oldLines = oldLines[d:]
		for ; d > 0; d-- {
			nl := bytes.IndexByte(newText, '\n')
			if nl < 0 || len(trimLeft(newText[:nl])) > 0 {
				break
			}
			newText = newText[nl+1:]
		}
	}
	norm := func(b []byte) []byte {
		b = trimRight(b)
		if level == LevelIndent {
			b = trimLeft(b)
		}
		return b
	}
	// Each old line, normalized, is part of a file line: when its longest
	// occurs nowhere in the file, no place can (one fast search instead of
	// hashing every line).
	var longest []byte
	for _, ol := range oldLines {
		if n := norm(ol); len(n) > len(longest) {
			longest = n
		}
	}
	if len(longest) > 0 && !bytes.Contains(text, longest) {
		return nil
	}
	// check is one candidate place, the lines cand: the bytes, the level's
	// own conditions, within the budget; its span and replacement.
	check := func(cand []lineOf) (int, int, []byte, bool) {
		last := cand[len(cand)-1]
		l.budget -= last.end - cand[0].start + len(l.e.OldString) + len(newText)
		if l.budget < 0 {
			l.spent = true
			return 0, 0, nil, false
		}
		repl, ok := placeRepl(text, cand, oldLines, newText, level, norm)
		if !ok || endsNL && last.end == last.textEnd { // old_string ends with a newline the file lacks here
			return 0, 0, nil, false
		}
		end := last.textEnd
		if endsNL {
			end = last.end
		}
		return cand[0].start, end, fitEndings(repl, k, false), true
	}
	if hits := anchorHits(text, longest, l.anchors); hits != nil && l.anchors > 0 {
		return l.anchored(hits, longest, oldLines, norm, check)
	}
	keys := make([]uint64, len(oldLines))
	for i, ol := range oldLines {
		keys[i] = xxh3.Hash(norm(ol))
	}
	fail := textnorm.KMPTable(keys)
	return func(yield func(int, int, []byte) bool) {
		if !l.charge() {
			return
		}
		ring := make([]lineOf, len(keys)) // the last len(keys) lines read
		cand := make([]lineOf, len(keys))
		state := 0 // KMP state over the line hashes
		pos := 0
		if bytes.HasPrefix(text, utf8BOM) {
			pos = len(utf8BOM) // not part of the first line, as read shows it
		}
		for n := 0; pos < len(text); n++ {
			fl := lineFrom(text, pos)
			pos = fl.end
			ring[n%len(ring)] = fl
			h := xxh3.Hash(norm(text[fl.start:fl.textEnd]))
			for state > 0 && keys[state] != h {
				state = fail[state-1]
			}
			if keys[state] == h {
				state++
			}
			if state < len(keys) {
				continue
			}
			// A candidate: old's lines end at line n. Check the bytes (a
			// hash can collide) and the level's own conditions, within the
			// budget.
			first := n - len(keys) + 1
			for i := range cand {
				cand[i] = ring[(first+i)%len(ring)]
			}
			start, end, repl, ok := check(cand)
			if l.spent {
				return
			}
			if !ok {
				state = fail[state-1]
				continue
			}
			if !yield(start, end, repl) {
				return
			}
			state = 0 // non-overlapping: the next place starts after this one
		}
	}
}

// anchorMax is how many occurrences of old's longest line a line level
// checks one by one before it hashes every line of the file instead.
const anchorMax = 64

// anchorHits are the offsets of needle in text, at most one per line; nil
// when there are more than max (or needle is empty).
func anchorHits(text, needle []byte, max int) []int {
	if len(needle) == 0 {
		return nil
	}
	hits := []int{}
	for pos := 0; ; {
		j := bytes.Index(text[pos:], needle)
		if j < 0 {
			return hits
		}
		if len(hits) == max {
			return nil
		}
		hits = append(hits, pos+j)
		pos += j + len(needle)
		if nl := bytes.IndexByte(text[pos:], '\n'); nl >= 0 {
			pos += nl + 1 // the next hit is on another line
		} else {
			return hits
		}
	}
}

// anchored is a line level's seeker when old's longest line occurs in few
// places: each place is checked around its lines (each line of old equal to
// the anchor may be where it is), and the places found are given left to
// right, non-overlapping, as the full pass would give them.
func (l *locator) anchored(hits []int, anchor []byte, oldLines [][]byte, norm func([]byte) []byte, check func([]lineOf) (int, int, []byte, bool)) seeker {
	text := l.text
	first := 0 // where the first line starts
	if bytes.HasPrefix(text, utf8BOM) {
		first = len(utf8BOM)
	}
	startOf := func(p int) int { return max(bytes.LastIndexByte(text[:p], '\n')+1, first) }
	var at []int // old's lines the anchor may be
	for j, ol := range oldLines {
		if bytes.Equal(norm(ol), anchor) {
			at = append(at, j)
		}
	}
	return func(yield func(int, int, []byte) bool) {
		type place struct {
			start, end, stop int // stop: where the line after the place starts
			repl             []byte
		}
		var places []place
		cand := make([]lineOf, len(oldLines))
		for _, p := range hits {
			if p < first {
				continue
			}
			for _, j := range at {
				s, ok := startOf(p), true
				for u := 0; u < j && ok; u++ {
					if ok = s > first; ok {
						s = startOf(s - 1)
					}
				}
				for i := 0; i < len(cand) && ok; i++ {
					if ok = s < len(text) || i == 0 && s == len(text) && len(text) == first; ok {
						cand[i] = lineFrom(text, s)
						s = cand[i].end
					}
				}
				if !ok {
					continue
				}
				start, end, repl, found := check(cand)
				if l.spent {
					return
				}
				if found {
					places = append(places, place{start, end, cand[len(cand)-1].end, repl})
				}
			}
		}
		slices.SortFunc(places, func(a, b place) int { return a.start - b.start })
		stop := -1
		for _, pl := range places {
			if pl.start < stop {
				continue // overlaps the place before (or is it)
			}
			if !yield(pl.start, pl.end, pl.repl) {
				return
			}
			stop = pl.stop
		}
	}
}

// lineFrom is the line of text that starts at pos.
func lineFrom(text []byte, pos int) lineOf {
	l := lineOf{start: pos}
	nl := bytes.IndexByte(text[pos:], '\n')
	if nl < 0 {
		l.textEnd, l.end = len(text), len(text)
		return l
	}
	l.textEnd, l.end = pos+nl, pos+nl+1
	if nl > 0 && text[pos+nl-1] == '\r' {
		l.textEnd--
	}
	return l
}

// placeRepl checks a candidate place of a line level (each line equal once
// normalized; at LevelIndent, one indentation change on every non-blank
// line) and gives what replaces it: new as sent, or at LevelIndent
// re-indented by that change. When new's first non-blank line already has
// the file's indentation there and not old's, new is taken as already
// indented (docs/edits.md). A line of new whose indentation does not start
// with the part the change removes cannot be re-indented: no place.
func placeRepl(text []byte, lines []lineOf, oldLines [][]byte, repl []byte, level int, norm func([]byte) []byte) ([]byte, bool) {
	var removed, added []byte
	seen := false
	var oldFirst, fileFirst []byte
	for i, l := range lines {
		fl, ol := text[l.start:l.textEnd], oldLines[i]
		if !bytes.Equal(norm(fl), norm(ol)) {
			return nil, false
		}
		if level != LevelIndent || len(trimLeft(fl)) == 0 {
			continue
		}
		oi, fi := textnorm.IndentOf(ol), textnorm.IndentOf(fl)
		c := 0 // their common suffix
		for c < len(oi) && c < len(fi) && oi[len(oi)-1-c] == fi[len(fi)-1-c] {
			c++
		}
		r, a := oi[:len(oi)-c], fi[:len(fi)-c]
		if !seen {
			removed, added, seen = r, a, true
			oldFirst, fileFirst = oi, fi
		} else if !bytes.Equal(r, removed) || !bytes.Equal(a, added) {
			return nil, false
		}
	}
	if level != LevelIndent || bytes.Equal(removed, added) {
		return repl, true
	}
	newLines := bytes.Split(repl, []byte{'\n'})
	for _, l := range newLines {
		if len(trimLeft(l)) > 0 {
			ni := textnorm.IndentOf(l)
			if !bytes.Equal(ni, oldFirst) && bytes.Equal(ni, fileFirst) {
				return repl, true
			}
			break
		}
	}
	// A change between tabs and spaces re-indents only to indentations the
	// place itself has: deeper lines of new would come out half tabs, half
	// spaces ("\t" for four spaces, then "    " more), a guess at the unit.
	var known map[string]bool
	if kinds := string(removed) + string(added); strings.ContainsRune(kinds, ' ') && strings.ContainsRune(kinds, '\t') {
		known = map[string]bool{}
		for _, l := range lines {
			known[string(textnorm.IndentOf(text[l.start:l.textEnd]))] = true
		}
	}
	out := make([]byte, 0, len(repl)+len(newLines)*len(added))
	for i, l := range newLines {
		if i > 0 {
			out = append(out, '\n')
		}
		if len(trimLeft(l)) == 0 {
			out = append(out, l...)
			continue
		}
		if !bytes.HasPrefix(l, removed) {
			return nil, false
		}
		at := len(out)
		out = append(append(out, added...), l[len(removed):]...)
		if known != nil && !known[string(textnorm.IndentOf(out[at:]))] {
			return nil, false
		}
	}
	return out, true
}

// escapes are the sequences LevelEscapes reads, by the byte after "\".
var escapes = map[byte]byte{'n': '\n', 't': '\t', '"': '"', '\'': '\'', '\\': '\\'}

// unescapeEdit reads the escapes old and new carry as the characters they
// name, when old carries at least one and none of the kinds it carries
// occurs written out anywhere in text (then the model may have meant them
// literally). new is read the same way: a model that escaped one escaped
// both.
func unescapeEdit(text []byte, old, repl string) (string, string, bool) {
	u, used := unescape(old)
	if len(used) == 0 {
		return "", "", false
	}
	for c := range used {
		if bytes.Contains(text, []byte{'\\', c}) {
			return "", "", false
		}
	}
	r, _ := unescape(repl)
	return u, r, true
}

// unescape reads s left to right, each "\" followed by one of escapes'
// keys becoming the character it names; it also says which kinds it read.
func unescape(s string) (string, map[byte]bool) {
	var used map[byte]bool
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			if c, ok := escapes[s[i+1]]; ok {
				if used == nil {
					used = map[byte]bool{}
					b = append(make([]byte, 0, len(s)), s[:i]...)
				}
				used[s[i+1]] = true
				b = append(b, c)
				i++
				continue
			}
		}
		if b != nil {
			b = append(b, s[i])
		}
	}
	if b == nil {
		return s, nil
	}
	return string(b), used
}

// punctCandidate says whether LevelPunct could find old in text: the
// longest run of old without a character that normalization touches (or
// makes: quotes, dashes, spaces; and line endings, which the level
// adapts) must occur in text as it is.
func punctCandidate(text []byte, old string) bool {
	var longest string
	for run := range strings.FieldsFuncSeq(old, func(r rune) bool {
		_, typographic := textnorm.PunctASCII(r)
		return typographic || strings.ContainsRune("'\"- \r\n", r)
	}) {
		if len(run) > len(longest) {
			longest = run
		}
	}
	return longest == "" || bytes.Contains(text, []byte(longest))
}

// punctForms are text and old with typographic punctuation as its ASCII
// form, for LevelPunct to find old in; not ok when neither has any. new
// is written as sent.
func punctForms(text []byte, old string) ([]byte, string, bool) {
	nOld, oldHas := textnorm.NormalizePunct([]byte(old))
	nText, textHas := textnorm.NormalizePunct(text)
	if !oldHas && !textHas {
		return nil, "", false
	}
	return nText, string(nOld), true
}

// punctMapper maps positions in text's punctForms back to text, for
// ascending positions, by walking both in step: a typographic rune is one
// byte of the normalized form, any other byte is itself.
func punctMapper(text []byte) func() func(int) int {
	return func() func(int) int {
		np, op := 0, 0
		return func(p int) int {
			for np < p {
				size := 1
				if text[op] >= utf8.RuneSelf {
					r, n := utf8.DecodeRune(text[op:])
					if _, ok := textnorm.PunctASCII(r); ok {
						size = n
					}
				}
				op += size
				np++
			}
			return op
		}
	}
}
