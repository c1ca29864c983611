package fs

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Bounds of the similarity search (docs/edits.md, "Hints"): it costs one
// pass over the file plus at most simMaxCandidates windows scored within
// simWorkBudget character comparisons, so a miss on a 10 MiB file costs
// milliseconds.
const (
	simMinScore      = 0.6     // the mean line similarity a window needs
	simMaxCandidates = 16      // windows scored, the most anchored first
	simMaxVotes      = 1 << 16 // candidate windows tracked
	simMaxNeedle     = 1000    // needle lines anchored and scored
	simLineCmp       = 256     // bytes of a line compared character by character
	simWorkBudget    = 8 << 20 // character comparisons per search
)

// withHint adds an fault.Hint to a miss or an ambiguous edit when the edit
// asked for one and the file is small enough to search (BatchMaxBytes).
func (l *Local) withHint(ctx context.Context, o *opened, err error, edit EditRequest) error {
	var fe *fault.Error
	if !edit.Hints || !errors.As(err, &fe) || fe.Code != fault.CodeEditNotFound && fe.Code != fault.CodeAmbiguousEdit || o.st.Size > BatchMaxBytes {
		return err
	}
	buf := make([]byte, 0, o.st.Size)
	if rerr := readChunks(ctx, o.f, func(chunk []byte) error {
		if len(buf)+len(chunk) > BatchMaxBytes {
			return errChanged
		}
		buf = append(buf, chunk...)
		return nil
	}); rerr != nil {
		return err
	}
	fe.Hint = hintFor(buf, fe.Code, edit.OldString)
	return fe
}

// hintFor is the hint of a miss (the most similar region) or of an
// ambiguous edit (the matches' first lines) of old in text; nil when there
// is none.
func hintFor(text []byte, code fault.Code, old string) *fault.Hint {
	switch code {
	case fault.CodeEditNotFound:
		start, end, ok := Similar(text, old)
		if !ok {
			return nil
		}
		return &fault.Hint{StartLine: start + 1, EndLine: end, Lines: hintLines(text, start, end)}
	case fault.CodeAmbiguousEdit:
		// The needle that matched: as sent, or adapted as level 1 adapts it
		// (to CRLF, or for a tolerant edit to LF).
		needle := []byte(old)
		for _, a := range []string{crlfAdapt(old), NormalizeLF(old)} {
			if bytes.Contains(text, needle) {
				break
			}
			needle = []byte(a)
		}
		return &fault.Hint{MatchLines: matchLines(text, needle, HintMaxLines+1)}
	}
	return nil
}

// matchLines is the 1-based line of each of the first max non-overlapping
// occurrences of needle in text.
func matchLines(text, needle []byte, max int) []int {
	var out []int
	line, prev := 1, 0
	for pos := 0; len(out) < max && len(needle) > 0; {
		j := bytes.Index(text[pos:], needle)
		if j < 0 {
			break
		}
		j += pos
		line += bytes.Count(text[prev:j], []byte{'\n'})
		prev = j
		out = append(out, line)
		pos = j + len(needle)
	}
	return out
}

// hintLines are the lines [start, end) of text, without line endings, each
// cut to HintLineMaxBytes on a character boundary.
func hintLines(text []byte, start, end int) []string {
	var out []string
	line := 0
	for pos := 0; pos <= len(text) && line < end; line++ {
		nl := bytes.IndexByte(text[pos:], '\n')
		var l []byte
		if nl < 0 {
			l, nl = text[pos:], len(text)-pos
		} else {
			l = text[pos : pos+nl]
		}
		if line >= start {
			l = bytes.TrimSuffix(l, []byte{'\r'})
			if len(l) > HintLineMaxBytes {
				cut := HintLineMaxBytes
				for cut > 0 && !utf8.RuneStart(l[cut]) {
					cut--
				}
				l = l[:cut]
			}
			out = append(out, string(l))
		}
		pos += nl + 1
	}
	return out
}

// Similar finds the region of text most similar to needle: lines
// [start, end) (0-based; lines split on "\n" as read splits them), at most
// HintMaxLines long, and whether one is close enough. Lines are compared
// with every space, tab, CR, VT and FF removed, so whitespace-only and
// line-ending-only differences always score 1; other lines score
// 1 - (edit distance / length) on their first 256 bytes. Candidate windows
// are anchored on file lines equal (so compared) to a needle line; the
// best window whose mean line score reaches 0.6 wins, the earliest on a
// tie. A needle none of whose lines has an equal line in the file (a
// one-line needle with a changed word, say) gets no region.
func Similar(text []byte, needle string) (start, end int, ok bool) {
	nl := splitKeys([]byte(needle))
	if len(nl) > 0 && len(nl[len(nl)-1].stripped) == 0 && bytes.HasSuffix([]byte(needle), []byte{'\n'}) {
		nl = nl[:len(nl)-1] // a final newline starts no line
	}
	if len(nl) == 0 {
		return 0, 0, false
	}
	if len(nl) > simMaxNeedle {
		nl = nl[:simMaxNeedle]
	}
	anchors := map[uint64][]int{} // key -> needle lines
	for j, l := range nl {
		if len(l.stripped) > 0 {
			anchors[l.key] = append(anchors[l.key], j)
		}
	}
	if len(anchors) == 0 {
		return 0, 0, false
	}
	// One pass: every file line's offset and, for lines equal to a needle
	// line, a vote for the window that would align them.
	var offs []int
	votes := map[int]int{}
	pos := 0
	for pos <= len(text) {
		e := bytes.IndexByte(text[pos:], '\n')
		if e < 0 {
			e = len(text) - pos
			if e == 0 && pos > 0 {
				break // a final newline starts no extra line
			}
		}
		i := len(offs)
		offs = append(offs, pos)
		if js, hit := anchors[lineKey(text[pos:pos+e])]; hit {
			for _, j := range js {
				s := i - j
				if _, seen := votes[s]; seen || len(votes) < simMaxVotes {
					votes[s]++
				}
			}
		}
		pos += e + 1
	}
	// pos is where a next line would start: line i is text[offs[i]:offs[i+1]-1].
	offs = append(offs, pos)
	n := len(offs) - 1
	if len(votes) == 0 {
		return 0, 0, false
	}
	cands := make([]int, 0, len(votes))
	for s := range votes {
		cands = append(cands, s)
	}
	slices.SortFunc(cands, func(a, b int) int {
		if votes[a] != votes[b] {
			return votes[b] - votes[a]
		}
		return a - b
	})
	if len(cands) > simMaxCandidates {
		cands = cands[:simMaxCandidates]
	}
	slices.Sort(cands) // the earliest wins a tie
	work := simWorkBudget
	best, bestScore := 0, -1.0
	for _, s := range cands {
		total := 0.0
		for j, l := range nl {
			i := s + j
			if i < 0 || i >= n {
				continue
			}
			fl := text[offs[i]:max(offs[i+1]-1, offs[i])]
			total += lineSimilarity(l, fl, &work)
		}
		if score := total / float64(len(nl)); score > bestScore {
			best, bestScore = s, score
		}
	}
	if bestScore < simMinScore {
		return 0, 0, false
	}
	start, end = max(best, 0), min(best+len(nl), n)
	if end <= start {
		return 0, 0, false
	}
	return start, min(end, start+HintMaxLines), true
}

// needleLine is one line of the needle, whitespace removed, and its key.
type needleLine struct {
	stripped []byte
	key      uint64
}

func splitKeys(b []byte) []needleLine {
	var out []needleLine
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		s := stripSpace(l)
		out = append(out, needleLine{stripped: s, key: keyOf(s)})
	}
	return out
}

// spaces are the bytes a comparison of lines ignores (a table: the hot
// loop of a hint's pass over the file).
var spaces = [256]bool{' ': true, '\t': true, '\r': true, '\v': true, '\f': true}

func isSpace(c byte) bool { return spaces[c] }

func stripSpace(l []byte) []byte {
	out := make([]byte, 0, len(l))
	for _, c := range l {
		if !isSpace(c) {
			out = append(out, c)
		}
	}
	return out
}

func keyOf(s []byte) uint64 {
	h := fnv.New64a()
	h.Write(s)
	return h.Sum64()
}

// lineKey is keyOf(stripSpace(l)) without the copy: FNV-1a over the
// non-space bytes.
func lineKey(l []byte) uint64 {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for _, c := range l {
		if !isSpace(c) {
			h ^= uint64(c)
			h *= prime64
		}
	}
	return h
}

// lineSimilarity scores a needle line against a file line: 1 when equal
// without whitespace, else 1 - distance/length over their first simLineCmp
// bytes, within the remaining work budget (0 once it is spent).
func lineSimilarity(l needleLine, fileLine []byte, work *int) float64 {
	if lineKey(fileLine) == l.key && bytes.Equal(stripSpace(fileLine), l.stripped) {
		return 1
	}
	a, b := l.stripped, stripSpace(fileLine)
	a, b = a[:min(len(a), simLineCmp)], b[:min(len(b), simLineCmp)]
	longest := max(len(a), len(b))
	if longest == 0 {
		return 1
	}
	if *work < len(a)*len(b) {
		return 0
	}
	*work -= len(a) * len(b)
	return 1 - float64(levenshtein(a, b))/float64(longest)
}

// levenshtein is the byte edit distance of a and b, in two rows.
func levenshtein(a, b []byte) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
