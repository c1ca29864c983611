package patch

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// oline is one line of a text as the oracle splits it.
type oline struct{ text, end string }

// olines splits s after its BOM into lines with their endings.
func olines(s string) (bool, []oline) {
	b := strings.HasPrefix(s, "\ufeff")
	s = strings.TrimPrefix(s, "\ufeff")
	var out []oline
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, oline{text: s})
			break
		}
		t, end := s[:i], "\n"
		if strings.HasSuffix(t, "\r") {
			t, end = t[:len(t)-1], "\r\n"
		}
		out = append(out, oline{text: t, end: end})
		s = s[i+1:]
	}
	return b, out
}

// checkOracle holds what SPEC §25 promises of a successful Apply, from
// the outside: the BOM and every line outside the hunks' places kept
// byte for byte (a line's ending may only change where the file's end
// moved: the old last line gains one when lines follow it, a line that
// became last loses it when the file had no final newline); the final
// newline as the file had it; each place holds lines equal to the hunk's
// old lines at its level, and the result's lines there are its context
// lines as the file had them and its added lines.
func checkOracle(t testing.TB, in []byte, hunks []Hunk, r *Result) {
	t.Helper()
	inBOM, ins := olines(string(in))
	outBOM, outs := olines(string(r.Content))
	// A last line that is empty and has no ending (the file had no final
	// newline) is no text at all: the line Apply counted is there.
	if r.lines == len(outs)+1 {
		outs = append(outs, oline{})
	}
	if inBOM != outBOM {
		t.Fatalf("BOM %v became %v", inBOM, outBOM)
	}
	if len(r.Places) != len(hunks) {
		t.Fatalf("%d places for %d hunks", len(r.Places), len(hunks))
	}
	for i, o := range outs {
		if o.end == "" && i != len(outs)-1 {
			t.Fatalf("line %d of the result has no ending", i+1)
		}
	}
	if len(outs) > 0 {
		finalIn := len(ins) == 0 || ins[len(ins)-1].end != ""
		if finalOut := outs[len(outs)-1].end != ""; finalIn != finalOut {
			t.Fatalf("final newline %v became %v", finalIn, finalOut)
		}
	}
	order := make([]int, len(hunks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return r.Places[a].Start - r.Places[b].Start })
	same := func(a, b int, oa, ob int) {
		if b-a != ob-oa {
			t.Fatalf("lines %d-%d became %d lines", a+1, b, ob-oa)
		}
		for k := 0; k < b-a; k++ {
			x, y := ins[a+k], outs[oa+k]
			lastIn, lastOut := a+k == len(ins)-1, oa+k == len(outs)-1
			if x.text != y.text || x.end != y.end && !(lastIn && x.end == "") && !(lastOut && y.end == "") {
				t.Fatalf("line %d %q became line %d %q", a+k+1, x, oa+k+1, y)
			}
		}
	}
	prev, oprev := 0, 0
	for _, k := range order {
		p := r.Places[k]
		same(prev, p.Start, oprev, p.OutStart)
		checkPlace(t, hunks[k], p, ins, outs)
		prev, oprev = p.End, p.OutEnd
	}
	same(prev, len(ins), oprev, len(outs))
}

// checkPlace holds one hunk's place: its lines (those of the hunk as
// written, or without the Bare lines at its ends) against the file's and
// the result's.
func checkPlace(t testing.TB, h Hunk, p Place, ins, outs []oline) {
	t.Helper()
	fits := func(lines []Line) bool {
		var old, nw []Line
		for _, l := range lines {
			if l.Kind != '+' {
				old = append(old, l)
			}
			if l.Kind != '-' {
				nw = append(nw, l)
			}
		}
		if len(old) != p.End-p.Start || len(nw) != p.OutEnd-p.OutStart {
			return false
		}
		for j, l := range old {
			if !bytes.Equal(norm(p.Level, []byte(ins[p.Start+j].text)), norm(p.Level, []byte(l.Text))) {
				return false
			}
		}
		j, o := p.Start, p.OutStart
		for _, l := range lines {
			switch l.Kind {
			case ' ':
				if outs[o].text != ins[j].text {
					return false
				}
				j, o = j+1, o+1
			case '-':
				j++
			case '+':
				got := outs[o].text
				if got != l.Text && (p.Level < LevelIndent || strings.TrimLeft(got, " \t") != strings.TrimLeft(l.Text, " \t")) {
					return false
				}
				o++
			}
		}
		return true
	}
	if !fits(h.Lines) && !fits(trimBare(h.Lines)) {
		t.Fatalf("hunk %+v does not fit its place %+v", h, p)
	}
}

// render writes p back in the grammar (every line ending "\r\n", so a
// text ending with "\r" keeps it).
func render(p *Patch) string {
	var b strings.Builder
	w := func(s string) { b.WriteString(s + "\r\n") }
	w(markBegin)
	for _, f := range p.Files {
		switch f.Op {
		case OpAdd:
			w(markAdd + " " + f.Path)
			for _, l := range strings.SplitAfter(f.Content, "\n") {
				if l != "" {
					w("+" + strings.TrimSuffix(l, "\n"))
				}
			}
		case OpDelete:
			w(markDelete + " " + f.Path)
		case OpUpdate:
			w(markUpdate + " " + f.Path)
			if f.MoveTo != "" {
				w(markMove + " " + f.MoveTo)
			}
			for _, h := range f.Hunks {
				if len(h.Headers) == 0 {
					w("@@")
				}
				for _, hd := range h.Headers {
					w("@@ " + hd)
				}
				for _, l := range h.Lines {
					if l.Bare {
						w("")
					} else {
						w(string(l.Kind) + l.Text)
					}
				}
				if h.EOF {
					w(markEOF)
				}
			}
		}
	}
	w(markEnd)
	return b.String()
}

// FuzzParse: Parse never panics, every error is INVALID_ARGUMENT "invalid
// patch: line <n>: ...", and a parsed patch is within the grammar and its
// bounds and reads back the same once written out again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"*** Begin Patch\n*** Add File: a\n+x\n*** Delete File: b\n*** Update File: c\n*** Move to: d\n@@ h\n a\n-b\n+c\n\n*** End of File\n*** End Patch\n",
		"<<'EOF'\n *** Begin Patch \n*** Update File: f\n x\n-y\n*** End Patch\nEOF",
		"*** Begin Patch\n*** Update File: f\n@@ -1,2 +1,2 @@ ctx\n-a\r\n+b\r\n*** End Patch",
		"*** Begin Patch\n*** End Patch",
		"*** Begin Patch\n*** Add File: a\n+x\n\n+y\n*** End Patch",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(in)
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Code != fault.CodeInvalidArgument || !strings.HasPrefix(fe.Message, "invalid patch: line ") {
				t.Fatalf("err = %v", err)
			}
			return
		}
		if len(p.Files) == 0 || len(p.Files) > MaxFiles {
			t.Fatalf("%d files", len(p.Files))
		}
		for _, fl := range p.Files {
			if fl.Path == "" || fl.Op < OpAdd || fl.Op > OpUpdate {
				t.Fatalf("file %+v", fl)
			}
			if fl.Op == OpUpdate && len(fl.Hunks) == 0 && fl.MoveTo == "" {
				t.Fatalf("an empty update %+v", fl)
			}
			for _, h := range fl.Hunks {
				if len(h.Lines) == 0 {
					t.Fatalf("a hunk without lines %+v", h)
				}
				for _, hd := range h.Headers {
					if unifiedRange.MatchString(hd) {
						return // the range form is read once, not again
					}
				}
			}
		}
		again, err := Parse(render(p))
		if err != nil {
			t.Fatalf("written out again: %v\n%q", err, render(p))
		}
		for i := range again.Files {
			again.Files[i].Line = p.Files[i].Line
			for j := range again.Files[i].Hunks {
				again.Files[i].Hunks[j].Line = p.Files[i].Hunks[j].Line
			}
		}
		if !reflect.DeepEqual(again.Files, p.Files) {
			t.Fatalf("read back\n%+v\nwant\n%+v", again.Files, p.Files)
		}
	})
}

// FuzzApply: Apply never panics, refuses only with its codes, and what it
// applies holds the oracle: no byte outside the hunks' places changes.
func FuzzApply(f *testing.F) {
	for _, s := range [][2]string{
		{"a\nb\nc\n", "@@\n a\n-b\n+B\n c"},
		{"\ufeffa\r\nb  \r\nc", "@@\n-a\n b\n+x\n*** End of File"},
		{"  x\n\ty\n z", "@@ x\n-y\n+    w"},
		{"“q” – r\n\u00a0s\n", "@@\n-\"q\" - r\n+t\n@@\n+u"},
		{"a\na\na", "@@\n-a\n-a"},
		{"", "@@\n+a"},
		{"h\n\nx\n", "@@ h\n\n-x\n\n"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, content, body string) {
		p, err := Parse("*** Begin Patch\n*** Update File: f\n" + body + "\n*** End Patch\n")
		if err != nil || len(p.Files) != 1 || len(p.Files[0].Hunks) == 0 {
			return
		}
		hs := p.Files[0].Hunks
		r, err := Apply([]byte(content), hs, "f")
		if err != nil {
			switch fault.CodeOf(err) {
			case fault.CodeEditNotFound, fault.CodeAmbiguousEdit, fault.CodeTooLarge:
				return
			}
			t.Fatalf("err = %v", err)
		}
		checkOracle(t, []byte(content), hs, r)
	})
}
