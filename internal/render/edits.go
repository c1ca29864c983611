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

// EditMatch is, in an edit's metadata, where an edit found its place at a
// tolerant level (SPEC §25): `match` for one edit, `matches` for a batch
// (Edit is then its 1-based item). StartLine and EndLine are the first
// place's lines; with several places (replace_all) Places lists them, the
// first HintMaxLines.
type EditMatch struct {
	Edit      int         `json:"edit,omitempty"`
	Level     int         `json:"level"`
	StartLine int         `json:"startLine"`
	EndLine   int         `json:"endLine"`
	Places    []LineRange `json:"places,omitempty"`
}

// LineRange is a place's first and last line, 1-based.
type LineRange struct {
	StartLine int `json:"startLine"`
	EndLine   int `json:"endLine"`
}

// matchedWhat names each disclosed level of the tolerant edit.
var matchedWhat = map[int]string{
	2: "removing line-number prefixes",
	3: "ignoring trailing whitespace",
	4: "ignoring indentation",
	5: "reading escaped characters",
	6: "normalizing punctuation",
}

// MatchedLine is the disclosure of an edit found at a tolerant level:
// "Matched after <what> at lines <a>-<b>." (a single line too is
// "<a>-<a>"); several places are "<a>-<b>, <c>-<d>", and more than
// HintMaxLines end with ", ..." before the period. places are each
// place's first and last line; more says whether there were more than
// listed.
func MatchedLine(level int, places [][2]int, more bool) string {
	var b strings.Builder
	b.WriteString("Matched after " + matchedWhat[level] + " at lines ")
	for i, p := range places[:min(len(places), HintMaxLines)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(p[0]) + "-" + strconv.Itoa(p[1]))
	}
	if more || len(places) > HintMaxLines {
		b.WriteString(", ...")
	}
	b.WriteByte('.')
	return b.String()
}

// BatchMatchedLine is MatchedLine for item i (1-based) of a batch of n:
// "edit <i> of <n>: Matched after ...".
func BatchMatchedLine(i, n, level int, places [][2]int, more bool) string {
	return "edit " + strconv.Itoa(i) + " of " + strconv.Itoa(n) + ": " + MatchedLine(level, places, more)
}
