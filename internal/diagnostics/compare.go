package diagnostics

import (
	"bytes"
	"sort"

	"github.com/toolfs/toolfs-api/internal/render"
)

// compare matches the problems of the version before against those of the
// version after and returns the problems after that match none before (in
// line order) and the count of problems before that match none after
// (docs/diagnostics.md, "Only what the change introduced"). A problem
// before matches one after with the same message, in this order:
//
//  1. on an unchanged line: the same line, shifted by the change (the same
//     column first);
//  2. on a changed line: any line of the run of lines that replaced it;
//  3. anywhere else: a line of the same text (code the change moved).
//
// Each problem matches at most one; identical problems of one run are one.
func compare(before, after []Problem, beforeText, afterText []byte) (introduced []Problem, resolved int) {
	before, after = unique(before), unique(after)
	if len(after) == 0 {
		return nil, len(before)
	}
	changes := render.LineChanges(string(beforeText), string(afterText))
	matchedA := make([]bool, len(after))
	matchedB := make([]bool, len(before))

	// 1 and 2.
	type lineKey struct {
		msg       string
		line, col int
	}
	exact := map[lineKey][]int{}
	anyCol := map[lineKey][]int{}
	for i, p := range after {
		exact[lineKey{p.Message, p.Line, p.Col}] = append(exact[lineKey{p.Message, p.Line, p.Col}], i)
		anyCol[lineKey{p.Message, p.Line, 0}] = append(anyCol[lineKey{p.Message, p.Line, 0}], i)
	}
	take := func(m map[lineKey][]int, k lineKey) bool {
		for _, i := range m[k] {
			if !matchedA[i] {
				matchedA[i] = true
				return true
			}
		}
		return false
	}
	type runKey struct {
		msg string
		run int
	}
	inRun := map[runKey][]int{} // problems before on the changed lines of a run
	for i, p := range before {
		line, run := mapLine(changes, p.Line)
		if run >= 0 {
			inRun[runKey{p.Message, run}] = append(inRun[runKey{p.Message, run}], i)
			continue
		}
		if take(exact, lineKey{p.Message, line, p.Col}) || take(anyCol, lineKey{p.Message, line, 0}) {
			matchedB[i] = true
		}
	}
	if len(inRun) > 0 {
		for i, p := range after {
			if matchedA[i] {
				continue
			}
			for run, c := range changes {
				// A deletion's run is the line that now stands where the
				// deleted lines were.
				first, last := c.B0+1, max(c.B1, c.B0+1)
				if p.Line < first || p.Line > last {
					continue
				}
				k := runKey{p.Message, run}
				if olds := inRun[k]; len(olds) > 0 {
					matchedB[olds[0]] = true
					inRun[k] = olds[1:]
					matchedA[i] = true
					break
				}
			}
		}
	}

	// 3.
	type textKey struct{ msg, text string }
	var bl, al lineIndex
	moved := map[textKey][]int{}
	for i, p := range before {
		if matchedB[i] {
			continue
		}
		if t := bl.of(beforeText).line(p.Line); t != "" {
			moved[textKey{p.Message, t}] = append(moved[textKey{p.Message, t}], i)
		}
	}
	for i, p := range after {
		if matchedA[i] {
			continue
		}
		if len(moved) > 0 {
			k := textKey{p.Message, al.of(afterText).line(p.Line)}
			if olds := moved[k]; k.text != "" && len(olds) > 0 {
				matchedB[olds[0]] = true
				moved[k] = olds[1:]
				continue
			}
		}
		introduced = append(introduced, p)
	}
	for _, m := range matchedB {
		if !m {
			resolved++
		}
	}
	sortProblems(introduced)
	return introduced, resolved
}

// mapLine maps a 1-based line of the version before through the changes:
// an unchanged line gives its line after and run -1; a changed line gives
// the index of its run. Line 0 (no line) stays 0.
func mapLine(changes []render.LineChange, line int) (after, run int) {
	if line <= 0 {
		return line, -1
	}
	shift := 0
	for i, c := range changes {
		switch {
		case line-1 < c.A0:
			return line + shift, -1
		case line-1 < c.A1:
			return 0, i
		}
		shift += (c.B1 - c.B0) - (c.A1 - c.A0)
	}
	return line + shift, -1
}

// unique drops repeated identical problems (a checker may print one twice).
func unique(ps []Problem) []Problem {
	seen := make(map[Problem]bool, len(ps))
	out := make([]Problem, 0, len(ps))
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// sortProblems orders problems by line, then column, keeping the
// checker's order otherwise.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Line != ps[j].Line {
			return ps[i].Line < ps[j].Line
		}
		return ps[i].Col < ps[j].Col
	})
}

// lineIndex is the start of each line of a text, built on first use.
type lineIndex struct {
	src   []byte
	start []int
	built bool
}

func (x *lineIndex) of(text []byte) *lineIndex {
	if !x.built {
		x.src, x.built = text, true
		x.start = append(x.start, 0)
		for i, b := range text {
			if b == '\n' {
				x.start = append(x.start, i+1)
			}
		}
	}
	return x
}

// line is the 1-based line n without its surrounding blanks, "" when there
// is no such line.
func (x *lineIndex) line(n int) string {
	if n < 1 || n > len(x.start) {
		return ""
	}
	end := len(x.src)
	if n < len(x.start) {
		end = x.start[n]
	}
	return string(bytes.TrimSpace(x.src[x.start[n-1]:end]))
}
