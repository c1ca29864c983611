package render

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

func ref(s string) LineRef {
	r, ok := ParseAnchor(s)
	if !ok {
		panic("bad anchor " + s)
	}
	return r
}

func replace(start, end, text string) LineEdit {
	if end == "" {
		end = start
	}
	return LineEdit{Op: LineReplace, Start: ref(start), End: ref(end), Text: text}
}

func insert(op LineOp, at, text string) LineEdit {
	return LineEdit{Op: op, Start: ref(at), End: ref(at), Text: text}
}

func TestParseAnchor(t *testing.T) {
	for in, want := range map[string]LineRef{
		"12#KT":            {12, "KT"},
		" 12#KT ":          {12, "KT"},
		"12#KT: a line":    {12, "KT"},
		"12#KT:":           {12, "KT"},
		"007#AB":           {7, "AB"},
		"1099511627776#AB": {1 << 40, "AB"},
	} {
		got, ok := ParseAnchor(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "12", "#KT", "12#", "12#kt", "12#KE", "12#KTT", "0#KT", "-1#KT", "1 2#KT", "12 #KT", "1099511627777#AB", "99999999999999#AB", "x#KT", "12#K"} {
		_, ok := ParseAnchor(in)
		assert.False(t, ok, in)
	}
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		name  string
		edits []LineEdit
		i, j  int
		ok    bool
	}{
		{"apart", []LineEdit{replace("1#AO", "2#PM", ""), replace("3#HM", "", "x")}, 0, 0, false},
		{"shared line", []LineEdit{replace("1#AO", "2#PM", ""), replace("2#PM", "3#HM", "x")}, 0, 1, true},
		{"inside", []LineEdit{replace("1#AO", "5#AO", ""), replace("3#HM", "", "x")}, 0, 1, true},
		{"insert after a replaced line", []LineEdit{replace("1#AO", "2#PM", ""), insert(LineInsertAfter, "2#PM", "x")}, 0, 1, true},
		{"insert before a replaced line", []LineEdit{insert(LineInsertBefore, "1#AO", "x"), replace("1#AO", "2#PM", "")}, 0, 1, true},
		{"insert before the line after", []LineEdit{replace("1#AO", "2#PM", ""), insert(LineInsertBefore, "3#HM", "x")}, 0, 0, false},
		{"insert after the line before", []LineEdit{insert(LineInsertAfter, "1#AO", "x"), replace("2#PM", "", "")}, 0, 0, false},
		{"one gap, two inserts", []LineEdit{insert(LineInsertAfter, "1#AO", "x"), insert(LineInsertBefore, "2#PM", "y")}, 0, 1, true},
		{"same insert twice", []LineEdit{replace("9#AO", "", "z"), insert(LineInsertAfter, "1#AO", "x"), insert(LineInsertAfter, "1#AO", "y")}, 1, 2, true},
		{"next gaps", []LineEdit{insert(LineInsertAfter, "1#AO", "x"), insert(LineInsertAfter, "2#PM", "y")}, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, j, ok := Overlap(tt.edits)
			assert.Equal(t, tt.ok, ok)
			if tt.ok {
				assert.Equal(t, [2]int{tt.i, tt.j}, [2]int{i, j})
				assert.Equal(t, "edits["+strconv.Itoa(i)+"] and edits["+strconv.Itoa(j)+"] overlap", MsgLineEditsOverlap(i, j))
			}
		})
	}
}

func TestSplitText(t *testing.T) {
	assert.Nil(t, SplitText(""))
	assert.Equal(t, []string{""}, SplitText("\n"))
	assert.Equal(t, []string{"a"}, SplitText("a\n"))
	assert.Equal(t, []string{"a", ""}, SplitText("a\n\n"))
	assert.Equal(t, []string{"a", "b"}, SplitText("a\r\nb"))
	assert.Equal(t, []string{"a\rb"}, SplitText("a\rb"))
}

// tenLines is "line 1" to "line 10"; "line 3" and "line 8" share the tag SR.
var tenLines = func() string {
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	return b.String()
}()

func TestApplyLines(t *testing.T) {
	const abc = "one\ntwo\nthree\n" // 1#AO 2#PM 3#HM
	tests := []struct {
		name, file string
		edits      []LineEdit
		want       string // the new file
		output     string // EditLinesOutput
	}{
		{"replace one line", abc, []LineEdit{replace("2#PM", "", "TWO")}, "one\nTWO\nthree\n",
			"The file /w/a.txt has been updated successfully.\nLines 2-2 now:\n2#" + TagString("TWO") + ": TWO"},
		{"replace by several", abc, []LineEdit{replace("2#PM", "", "a\nb\n")}, "one\na\nb\nthree\n",
			"The file /w/a.txt has been updated successfully.\nLines 2-3 now:\n2#WB: a\n3#WD: b"},
		{"delete shows the lines either side", abc, []LineEdit{replace("2#PM", "", "")}, "one\nthree\n",
			"The file /w/a.txt has been updated successfully.\nLines 1-2 now:\n1#AO: one\n2#HM: three"},
		{"delete the first lines", abc, []LineEdit{replace("1#AO", "2#PM", "")}, "three\n",
			"The file /w/a.txt has been updated successfully.\nLines 1-1 now:\n1#HM: three"},
		{"delete the last line", abc, []LineEdit{replace("3#HM", "", "")}, "one\ntwo\n",
			"The file /w/a.txt has been updated successfully.\nLines 2-2 now:\n2#PM: two"},
		{"delete everything", abc, []LineEdit{replace("1#AO", "3#HM", "")}, "",
			"The file /w/a.txt has been updated successfully.\nThe file has no lines now."},
		{"insert after", abc, []LineEdit{insert(LineInsertAfter, "3#HM", "four")}, "one\ntwo\nthree\nfour\n",
			"The file /w/a.txt has been updated successfully.\nLines 4-4 now:\n4#" + TagString("four") + ": four"},
		{"insert before", abc, []LineEdit{insert(LineInsertBefore, "1#AO", "zero\n")}, "zero\none\ntwo\nthree\n",
			"The file /w/a.txt has been updated successfully.\nLines 1-1 now:\n1#" + TagString("zero") + ": zero"},
		{"insert an empty line", abc, []LineEdit{insert(LineInsertAfter, "1#AO", "\n")}, "one\n\ntwo\nthree\n",
			"The file /w/a.txt has been updated successfully.\nLines 2-2 now:\n2#CR: "},
		{"several edits refer to one version", abc, []LineEdit{
			insert(LineInsertAfter, "3#HM", "four"), replace("1#AO", "", "ONE\none and a half"), replace("2#PM", "", ""),
		}, "ONE\none and a half\nthree\nfour\n",
			"The file /w/a.txt has been updated successfully.\nLines 1-4 now:\n1#" + TagString("ONE") + ": ONE\n2#" + TagString("one and a half") + ": one and a half\n3#HM: three\n4#" + TagString("four") + ": four"},
		{"CRLF file stays CRLF", "a\r\nb\r\n", []LineEdit{replace("1#WB", "", "x\ny\r\nz")}, "x\r\ny\r\nz\r\nb\r\n",
			"The file /w/a.txt has been updated successfully.\nLines 1-3 now:\n1#BB: x\n2#" + TagString("y") + ": y\n3#" + TagString("z") + ": z"},
		{"CRLF insert after the last line", "a\r\nb\r\n", []LineEdit{insert(LineInsertAfter, "2#WD", "c")}, "a\r\nb\r\nc\r\n", ""},
		{"no final newline: replace the last line", "a\nb", []LineEdit{replace("2#WD", "", "c\nd")}, "a\nc\nd", ""},
		{"no final newline: insert after the last line", "a\r\nb", []LineEdit{insert(LineInsertAfter, "2#WD", "c\nd")}, "a\r\nb\r\nc\r\nd", ""},
		{"no final newline: delete the last line", "a\nb", []LineEdit{replace("2#WD", "", "")}, "a\n", ""},
		{"an empty last line where the file had no final newline", "a", []LineEdit{replace("1#WB", "", "\n")}, "\n", ""},
		{"and after such a line", "a\nb", []LineEdit{insert(LineInsertAfter, "2#WD", "c\n\n")}, "a\nb\nc\n\n", ""},
		{"one line, no newline at all", "a", []LineEdit{insert(LineInsertBefore, "1#WB", "z")}, "z\na", ""},
		{"mixed endings: each edit takes its place's", "a\r\nb\nc", []LineEdit{insert(LineInsertAfter, "1#WB", "x"), insert(LineInsertAfter, "2#WD", "y")}, "a\r\nx\r\nb\ny\nc", ""},
		{"BOM stays first", "\uFEFFa\n", []LineEdit{insert(LineInsertBefore, "1#WB", "z")}, "\uFEFFz\na\n", ""},
		{"lone CR is text", "a\rb\nc\n", []LineEdit{replace("1#KP", "", "x")}, "x\nc\n", ""},
		{"anchors copied with their text", abc, []LineEdit{replace("2#PM: two", "", "2")}, "one\n2\nthree\n", ""},
		{"relocated: lines were added above", "x\ny\n" + abc, []LineEdit{replace("1#AO", "2#PM", "12")}, "x\ny\n12\nthree\n",
			"The file /w/a.txt has been updated successfully.\nAnchors found 2 line(s) lower.\nLines 3-3 now:\n3#" + TagString("12") + ": 12"},
		{"relocated: lines were removed above", "three\n", []LineEdit{insert(LineInsertAfter, "3#HM", "four")}, "three\nfour\n",
			"The file /w/a.txt has been updated successfully.\nAnchors found 2 line(s) higher.\nLines 2-2 now:\n2#" + TagString("four") + ": four"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ApplyLines([]byte(tt.file), tt.edits, display, 2000)
			require.Nil(t, err)
			assert.Equal(t, tt.want, string(got.Text))
			if tt.output != "" {
				assert.Equal(t, tt.output, EditLinesOutput(display, got))
			}
		})
	}
}

func TestApplyLinesRefused(t *testing.T) {
	tests := []struct {
		name, file string
		edits      []LineEdit
		want       string
	}{
		{"stale anchor with the lines around it", tenLines, []LineEdit{replace("5#KT", "", "x")},
			`line 5 of "/w/a.txt" is no longer 5#KT` + "\n2#MH: line 2\n3#SR: line 3\n4#HK: line 4\n5#FN: line 5\n6#MI: line 6\n7#PS: line 7\n8#SR: line 8"},
		{"the first stale anchor is named", tenLines, []LineEdit{replace("1#NR", "2#MH", "x"), replace("4#HK", "5#KT", "y")},
			`line 5 of "/w/a.txt" is no longer 5#KT` + "\n2#MH: line 2\n3#SR: line 3\n4#HK: line 4\n5#FN: line 5\n6#MI: line 6\n7#PS: line 7\n8#SR: line 8"},
		{"ambiguous relocation", tenLines, []LineEdit{insert(LineInsertAfter, "5#SR", "x")},
			`line 5 of "/w/a.txt" is no longer 5#SR` + "\n2#MH: line 2\n3#SR: line 3\n4#HK: line 4\n5#FN: line 5\n6#MI: line 6\n7#PS: line 7\n8#SR: line 8" +
				"\nThe anchors fit 2 places within 20 lines (2 line(s) higher, 3 line(s) lower), so none was chosen."},
		{"every anchor must fit the same offset", tenLines, []LineEdit{replace("1#NR", "", "x"), replace("5#SR", "", "y")},
			`line 5 of "/w/a.txt" is no longer 5#SR` + "\n2#MH: line 2\n3#SR: line 3\n4#HK: line 4\n5#FN: line 5\n6#MI: line 6\n7#PS: line 7\n8#SR: line 8"},
		{"past the end of the file", "one\ntwo\n", []LineEdit{replace("9#KT", "", "x")},
			`line 9 of "/w/a.txt" is no longer 9#KT` + "\n1#AO: one\n2#PM: two"},
		{"empty file", "", []LineEdit{insert(LineInsertAfter, "1#CR", "x")},
			`line 1 of "/w/a.txt" is no longer 1#CR`},
		{"context lines truncated as read truncates", "abcdef\n", []LineEdit{replace("1#KT", "", "x")},
			`line 1 of "/w/a.txt" is no longer 1#KT` + "\n1#" + TagString("abcdef") + ": abc... (line truncated to 3 chars)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ApplyLines([]byte(tt.file), tt.edits, display, 3+1997*boolInt(tt.name != "context lines truncated as read truncates"))
			require.NotNil(t, err)
			assert.Equal(t, fault.CodeEditNotFound, err.Code)
			assert.Equal(t, tt.want, err.Message)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestApplyLinesRegionIsBounded(t *testing.T) {
	got, err := ApplyLines([]byte("one\ntwo\n"), []LineEdit{replace("1#AO", "", strings.Repeat("x\n", 30))}, display, 2000)
	require.Nil(t, err)
	out := EditLinesOutput(display, got)
	assert.True(t, strings.HasPrefix(out, "The file /w/a.txt has been updated successfully.\nLines 1-20 now:\n1#BB: x\n"), out)
	assert.True(t, strings.HasSuffix(out, "\n20#BB: x\n(The change goes on to line 30: read from offset=21 to see the rest.)"), out)
	assert.Equal(t, 30, got.RegionEnd)
}

// A file of nothing but newlines has as many lines as bytes: the applier
// keeps only the lines its anchors can reach.
func TestApplyLinesMemoryIsTheEdits(t *testing.T) {
	b := bytes.Repeat([]byte{'\n'}, 8<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := ApplyLines(b, []LineEdit{replace("4000000#CR", "", "x")}, display, 2000)
	runtime.ReadMemStats(&after)
	require.Nil(t, err)
	assert.Equal(t, len(b)+1, len(got.Text))
	// The new text and a little: a table of every line would be 24 bytes a
	// line, 192 MiB here.
	t.Logf("allocated %d bytes for a %d-byte file", after.TotalAlloc-before.TotalAlloc, len(b))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2*len(b)))
}
