package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTagsAreTwoLettersOfTheAlphabet(t *testing.T) {
	seen := map[string]bool{}
	for _, tag := range tags {
		require.True(t, IsTag(tag), tag)
		seen[tag] = true
	}
	assert.Len(t, seen, 256, "every pair of the 16 letters is a tag, once")
	for _, s := range []string{"", "A", "ABC", "ab", "AE", "A1", "#A"} {
		assert.False(t, IsTag(s), s)
	}
	// Pinned: a tag is the text's and nothing else's, across releases.
	assert.Equal(t, "SW", TagString("hello"))
	assert.Equal(t, "CR", TagString(""))
	assert.Equal(t, "MK", TagString("}"))
	assert.Equal(t, Tag([]byte("hello")), TagString("hello"))
}

// anchored is window with an anchored Windower.
func anchored(input string, offset, limit int, caps Caps, chunk int) (Window, error) {
	w := NewWindower(offset, limit, caps).Anchor()
	data := []byte(input)
	if chunk <= 0 {
		chunk = len(data) + 1
	}
	for len(data) > 0 {
		n := min(chunk, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			return Window{}, err
		}
		data = data[n:]
	}
	return w.Close()
}

func TestAnchoredReadOutputGolden(t *testing.T) {
	def := DefaultCaps()
	tests := []struct {
		name          string
		input         string
		offset, limit int
		caps          Caps
		want          string
	}{
		{"hello world", "hello\nworld", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1#SW: hello\n2#TP: world\n\n(End of file - total 2 lines)\n</content>"},
		{"empty file", "", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n(End of file - total 0 lines)\n</content>"},
		{"an empty line has the empty text's tag", "a\n\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1#WB: a\n2#CR: \n\n(End of file - total 2 lines)\n</content>"},
		{"CRLF: the ending is not the text", "one\r\ntwo\r\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1#AO: one\n2#PM: two\n\n(End of file - total 2 lines)\n</content>"},
		{"a lone CR is text, a final CR is not", "a\rb\nc\r", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1#KP: a\rb\n2#PB: c\n\n(End of file - total 2 lines)\n</content>"},
		{"BOM not part of the first line", "\uFEFFhello\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1#SW: hello\n\n(End of file - total 1 lines)\n</content>"},
		{"limit footer", "one\ntwo\nthree\n", 2, 1, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n2#PM: two\n\n(Showing lines 2-2 of 3. Use offset=3 to continue.)\n</content>"},
		{"byte cap: the anchor does not count", "one\ntwo\nthree\n", 1, 2000, Caps{Limit: 2000, MaxLineLength: 2000, MaxBytes: 7},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1#AO: one\n2#PM: two\n\n(Output capped. Showing lines 1-2. Use offset=3 to continue.)\n</content>"},
		{"a truncated line keeps its whole text's tag", "hello\n", 1, 2000, Caps{Limit: 2000, MaxLineLength: 2, MaxBytes: 51200},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1#SW: he... (line truncated to 2 chars)\n\n(End of file - total 1 lines)\n</content>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1, 2, 3, 7} {
				w, err := anchored(tt.input, tt.offset, tt.limit, tt.caps, chunk)
				require.NoError(t, err)
				assert.Equal(t, tt.want, ReadOutput(display, w), "chunk %d", chunk)
			}
		})
	}
}

// The window an anchored read shows is the plain one's, line for line: the
// anchor is a prefix, and prefixes do not count toward the byte cap.
func TestAnchoredWindowIsThePlainOne(t *testing.T) {
	input := strings.Repeat("alpha\r\nbeta\n\ngamma delta\n", 50) + "end"
	for _, caps := range []Caps{DefaultCaps(), {Limit: 2000, MaxLineLength: 3, MaxBytes: 100}, {Limit: 2000, MaxLineLength: 2000, MaxBytes: 1}} {
		for _, at := range [][2]int{{1, 2000}, {5, 10}, {190, 50}} {
			plain, err := window(input, at[0], at[1], caps, 5)
			require.NoError(t, err)
			tagged, err := anchored(input, at[0], at[1], caps, 5)
			require.NoError(t, err)
			require.Equal(t, len(plain.Lines), len(tagged.Lines))
			assert.Equal(t, plain.Footer, tagged.Footer)
			assert.Equal(t, plain.TotalLines, tagged.TotalLines)
			for i, l := range tagged.Lines {
				assert.Equal(t, plain.Lines[i].Number, l.Number)
				assert.Equal(t, plain.Lines[i].Text, l.Text)
				assert.Empty(t, plain.Lines[i].Tag)
				assert.True(t, IsTag(l.Tag))
			}
		}
	}
}

// A line longer than the Windower holds is hashed as it streams by, a CR
// split from its LF by a chunk boundary included: its tag is its whole
// text's, whatever the chunks.
func TestAnchoredLongLinesAnyChunks(t *testing.T) {
	caps := Caps{Limit: 2000, MaxLineLength: 4, MaxBytes: 1 << 20} // holds 16 bytes of a line
	long := strings.Repeat("0123456789", 5)
	lines := []string{long, long + "\r", "x\ry", long + "\rz", "short", long}
	input := strings.Join(lines, "\r\n") + "\r"
	for chunk := 1; chunk <= len(input); chunk++ {
		w, err := anchored(input, 1, 2000, caps, chunk)
		require.NoError(t, err)
		require.Len(t, w.Lines, len(lines))
		for i, l := range w.Lines {
			want := lines[i]
			if i == len(lines)-1 {
				want = strings.TrimSuffix(want, "\r")
			}
			require.Equal(t, TagString(want), l.Tag, "chunk %d line %d", chunk, i+1)
		}
	}
}

func TestAppendLinePrefix(t *testing.T) {
	assert.Equal(t, "12: ", string(AppendLinePrefix(nil, Line{Number: 12, Text: "x"})))
	assert.Equal(t, "12#KT: ", string(AppendLinePrefix(nil, Line{Number: 12, Text: "x", Tag: "KT"})))
	assert.Equal(t, "7#SW", Anchor(7, "SW"))
}
