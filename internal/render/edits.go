package render

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// DryRunOutput is the answer of a write or edit sent with dry_run: nothing
// was written, and the change as a unified diff (UnifiedDiff) on the
// following lines (docs/edits.md).
func DryRunOutput(display, unifiedDiff string) string {
	return `Dry run: no changes were written to "` + display + `".` + "\n" + unifiedDiff
}

// BatchEditOutput is the success text of a batch of n edits: for one, the
// single edit's sentence chosen by its replace_all.
func BatchEditOutput(display string, n int, replaceAll bool) string {
	if n == 1 {
		return EditOutput(display, replaceAll)
	}
	return "The file " + display + " has been updated successfully. Applied " + strconv.Itoa(n) + " edits."
}

// HintMaxLines is the most lines a hint shows, and the most matches an
// ambiguous edit's hint lists before ", ...".
const HintMaxLines = 20

// SimilarHint is what follows a missed edit's message: a newline,
// "Most similar text (lines <a>-<b>):" (or "(line <a>):"), and each line as
// "<n>: <text>", truncated as read truncates a line to maxLine characters.
// lines are the file's lines from start on; at most HintMaxLines are shown.
func SimilarHint(start int, lines []string, maxLine int) string {
	lines = lines[:min(len(lines), HintMaxLines)]
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	end := start + len(lines) - 1
	if end == start {
		b.WriteString("\nMost similar text (line " + strconv.Itoa(start) + "):")
	} else {
		b.WriteString("\nMost similar text (lines " + strconv.Itoa(start) + "-" + strconv.Itoa(end) + "):")
	}
	for i, l := range lines {
		b.WriteString("\n" + strconv.Itoa(start+i) + ": " + TruncateLine(l, maxLine))
	}
	return b.String()
}

// TruncateLine cuts a line longer than maxLine code points as read does:
// its first maxLine code points and "... (line truncated to <max> chars)".
func TruncateLine(s string, maxLine int) string {
	if utf8.RuneCountInString(s) <= maxLine {
		return s
	}
	i := 0
	for n := 0; n < maxLine; n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + "... (line truncated to " + strconv.Itoa(maxLine) + " chars)"
}

// MatchesHint is what follows an ambiguous edit's message: a newline and
// "Matches start at lines <l1>, <l2>." (ascending; more than HintMaxLines
// end with ", ..." before the period); "" without lines.
func MatchesHint(lines []int) string {
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nMatches start at lines ")
	for i, l := range lines[:min(len(lines), HintMaxLines)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(l))
	}
	if len(lines) > HintMaxLines {
		b.WriteString(", ...")
	}
	b.WriteByte('.')
	return b.String()
}
