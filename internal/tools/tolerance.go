package tools

import (
	"strings"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// disclose is what an edit's answer says of the edits that found their
// place at a tolerant level (SPEC §25, docs/edits.md "Tolerant edits"):
// the lines that follow the success sentence (or a dry run's first line),
// one per such edit (a batch's prefixed "edit <i> of <n>: "), each ending
// in a newline, "" when none; and the metadata, match for one edit,
// matches for a batch of n.
func disclose(tols []fs.Tolerance, batch int) (string, *render.EditMatch, []render.EditMatch) {
	if len(tols) == 0 {
		return "", nil, nil
	}
	lines := make([]string, len(tols))
	matches := make([]render.EditMatch, len(tols))
	for i, t := range tols {
		more := t.Count > len(t.Places)
		m := render.EditMatch{Edit: t.Item, Level: t.Level, StartLine: t.Places[0][0], EndLine: t.Places[0][1]}
		if t.Count > 1 {
			for _, p := range t.Places[:min(len(t.Places), render.HintMaxLines)] {
				m.Places = append(m.Places, render.LineRange{StartLine: p[0], EndLine: p[1]})
			}
		}
		matches[i] = m
		if batch > 0 {
			lines[i] = render.BatchMatchedLine(t.Item, batch, t.Level, t.Places, more)
		} else {
			lines[i] = render.MatchedLine(t.Level, t.Places, more)
		}
	}
	note := strings.Join(lines, "\n") + "\n"
	if batch > 0 {
		return note, nil, matches
	}
	return note, &matches[0], nil
}
