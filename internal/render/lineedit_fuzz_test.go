package render

import (
	"bytes"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// refLine is a line as read shows it, with its bytes in the file: the
// oracle's own, simple splitting.
type refLine struct {
	text       string
	start, end int // the line and its ending: b[start:end]
}

func refLines(b []byte) []refLine {
	var out []refLine
	i := 0
	if bytes.HasPrefix(b, bom) {
		i = 3
	}
	for i < len(b) {
		end := len(b)
		if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
			end = i + j + 1
		}
		text := strings.TrimSuffix(strings.TrimSuffix(string(b[i:end]), "\n"), "\r")
		out = append(out, refLine{text: text, start: i, end: end})
		i = end
	}
	return out
}

var fuzzTexts = []string{"", "x", "\n", "a\nb", "a\r\nb\r\n", "new line\n", "\r", "y\n\n"}

// FuzzApplyLines holds ApplyLines to an oracle: a success changes nothing
// outside the edited lines (the bytes before the first and after the last
// are the file's, and the lines between are the file's lines), found where
// every anchor fits, at the one offset that fits; a failure is a stale
// anchor's, and nothing panics.
func FuzzApplyLines(f *testing.F) {
	f.Add([]byte("one\ntwo\nthree\n"), []byte{0, 1, 0, 0, 2, 0})
	f.Add([]byte("a\r\nb\r\nc"), []byte{2, 2, 1, 1, 4, 0, 9})
	f.Add([]byte("\uFEFFa\n\nb\rc\r"), []byte{3, 0, 3, 2, 5, 1, 1, 0, 1, 7})
	f.Add([]byte(tenLines), []byte{1, 0, 4, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, file, plan []byte) {
		if len(file) > 1<<12 || len(plan) > 64 {
			return
		}
		lines := refLines(file)
		next := func() int {
			if len(plan) == 0 {
				return 0
			}
			v := int(plan[0])
			plan = plan[1:]
			return v
		}
		skew := next()%7 - 3 // every number off by skew: stale anchors
		n := next()%4 + 1
		tagOfLine := func(k int) string {
			if k >= 1 && k <= len(lines) {
				return TagString(lines[k-1].text)
			}
			return "KT"
		}
		anchorOf := func(k int, corrupt bool) LineRef {
			tag := tagOfLine(k)
			if corrupt {
				tag = tags[(tagIndex(tag[0])+1)%16]
			}
			return LineRef{Number: max(k+skew, 1), Tag: tag}
		}
		var edits []LineEdit
		for range n {
			op := LineOp(next()%3 + 1)
			k := next()%max(len(lines), 1) + 1
			corrupt := next()%8 == 0
			e := LineEdit{Op: op, Start: anchorOf(k, corrupt), Text: fuzzTexts[next()%len(fuzzTexts)]}
			e.End = e.Start
			if op == LineReplace {
				e.End = anchorOf(min(k+next()%3, max(len(lines), 1)), false)
			}
			if op != LineReplace && len(SplitText(e.Text)) == 0 {
				e.Text = "z" // the executor refuses an empty insert
			}
			edits = append(edits, e)
		}
		if _, _, ok := Overlap(edits); ok {
			return
		}
		got, err := ApplyLines(file, edits, "/p", 2000)
		if err != nil {
			if err.Code != fault.CodeEditNotFound || !strings.HasPrefix(err.Message, "line ") {
				t.Fatalf("unexpected error %s: %s", err.Code, err.Message)
			}
			return
		}
		// Found where every anchor fits, and only there.
		fits := func(d int) bool {
			for _, e := range edits {
				for _, r := range e.refs() {
					if r.Number+d < 1 || r.Number+d > len(lines) || tagOfLine(r.Number+d) != r.Tag {
						return false
					}
				}
			}
			return true
		}
		d := got.Shift
		if !fits(d) {
			t.Fatalf("applied at offset %d where the anchors do not fit", d)
		}
		if d != 0 {
			if fits(0) {
				t.Fatalf("relocated by %d though the anchors fit where they said", d)
			}
			for o := -RelocateWithin; o <= RelocateWithin; o++ {
				if o != d && o != 0 && fits(o) {
					t.Fatalf("relocated by %d though %d fits too", d, o)
				}
			}
		}
		// The oracle: the expected lines, and the bytes outside the edits.
		type place struct {
			from, to   int // bytes of the file the edit stands for
			line, dead int // the first old line it replaces or precedes, and how many it replaces
			news       []string
		}
		var places []place
		for _, e := range edits {
			s, t := e.Start.Number+d, e.End.Number+d
			p := place{news: SplitText(e.Text)}
			switch e.Op {
			case LineReplace:
				p.from, p.to, p.line, p.dead = lines[s-1].start, lines[t-1].end, s, t-s+1
			case LineInsertAfter:
				p.from, p.to, p.line = lines[s-1].end, lines[s-1].end, s+1
			case LineInsertBefore:
				p.from, p.to, p.line = lines[s-1].start, lines[s-1].start, s
			}
			places = append(places, p)
		}
		sort.SliceStable(places, func(i, j int) bool { return places[i].line < places[j].line })
		var want []string
		at := 1
		for _, p := range places {
			for ; at < p.line; at++ {
				want = append(want, lines[at-1].text)
			}
			want = append(want, p.news...)
			at += p.dead
		}
		for ; at <= len(lines); at++ {
			want = append(want, lines[at-1].text)
		}
		var have []string
		for _, l := range refLines(got.Text) {
			have = append(have, l.text)
		}
		if !slices.Equal(want, have) {
			t.Fatalf("lines %q, want %q", have, want)
		}
		from, to := len(file), 0
		for _, p := range places {
			from, to = min(from, p.from), max(to, p.to)
		}
		if !bytes.HasPrefix(got.Text, file[:from]) || !bytes.HasSuffix(got.Text, file[to:]) {
			t.Fatalf("bytes outside the edited lines changed: %q -> %q", file, got.Text)
		}
	})
}
