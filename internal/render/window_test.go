package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const display = "/w/a.txt"

// window feeds input in chunks of size chunk (0: all at once) and closes.
// It also checks the Ready contract: nothing leaves before the NUL sample
// has passed, and the lines released, in order, are exactly Window.Lines.
func window(input string, offset, limit int, caps Caps, chunk int) (Window, error) {
	w := NewWindower(offset, limit, caps)
	data := []byte(input)
	if chunk <= 0 {
		chunk = len(data) + 1
	}
	var released []Line
	fed := 0
	for len(data) > 0 {
		n := min(chunk, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			_, cerr := w.Close()
			if cerr != err {
				return Window{}, cerr // Close must agree with Write
			}
			return Window{}, err
		}
		data, fed = data[n:], fed+n
		ready := w.Ready()
		if len(ready) > 0 && fed < BinarySample {
			return Window{}, errors.New("lines released inside the NUL sample")
		}
		released = append(released, ready...)
	}
	win, err := w.Close()
	if err != nil {
		return win, err
	}
	released = append(released, w.Ready()...)
	if len(released) != len(win.Lines) || (len(released) > 0 && !reflect.DeepEqual(released, win.Lines)) {
		return Window{}, errors.New("released lines differ from Window.Lines")
	}
	return win, nil
}

func TestReadOutputGolden(t *testing.T) {
	def := DefaultCaps()
	tests := []struct {
		name          string
		input         string
		offset, limit int
		caps          Caps
		want          string
	}{
		{"hello world", "hello\nworld", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: hello\n2: world\n\n(End of file - total 2 lines)\n</content>"},
		{"empty file", "", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n(End of file - total 0 lines)\n</content>"},
		{"trailing blank line", "a\n\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: a\n2: \n\n(End of file - total 2 lines)\n</content>"},
		{"one newline is one empty line", "\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: \n\n(End of file - total 1 lines)\n</content>"},
		{"no trailing newline", "one\ntwo\nthree", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: one\n2: two\n3: three\n\n(End of file - total 3 lines)\n</content>"},
		{"trailing newline adds no line", "one\ntwo\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: one\n2: two\n\n(End of file - total 2 lines)\n</content>"},
		{"CRLF", "one\r\ntwo\r\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: one\n2: two\n\n(End of file - total 2 lines)\n</content>"},
		{"lone CR kept, final CR dropped", "a\rb\nc\r\r\nd\r", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: a\rb\n2: c\r\n3: d\n\n(End of file - total 3 lines)\n</content>"},
		{"3000-character line", strings.Repeat("x", 3000), 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: " + strings.Repeat("x", 2000) + "... (line truncated to 2000 chars)\n\n(End of file - total 1 lines)\n</content>"},
		{"custom line length", "abcdefghij", 1, 10, Caps{10, 5, 51200},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: abcde... (line truncated to 5 chars)\n\n(End of file - total 1 lines)\n</content>"},
		{"emoji truncation keeps whole characters", "😀😀😀😀\n", 1, 10, Caps{10, 3, 51200},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: 😀😀😀... (line truncated to 3 chars)\n\n(End of file - total 1 lines)\n</content>"},
		{"exactly max code points is not truncated", "😀😀😀\r\né😀é\n", 1, 10, Caps{10, 3, 51200},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: 😀😀😀\n2: é😀é\n\n(End of file - total 2 lines)\n</content>"},
		{"byte cap", "aaaa\nbbbb\ncccc", 1, 10, Caps{10, 2000, 9},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: aaaa\n2: bbbb\n\n(Output capped. Showing lines 1-2. Use offset=3 to continue.)\n</content>"},
		{"byte cap counts the truncation suffix", "abcdefgh\nx\n", 1, 10, Caps{10, 4, 36},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: abcd... (line truncated to 4 chars)\n\n(Output capped. Showing lines 1-1. Use offset=2 to continue.)\n</content>"},
		{"first line larger than the cap is shown", "abcdef\nxy\nz", 1, 10, Caps{10, 2000, 3},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: abcdef\n\n(Output capped. Showing lines 1-1. Use offset=2 to continue.)\n</content>"},
		{"first selected line larger than the cap at an offset", "a\nbcdef\nxy", 2, 10, Caps{10, 2000, 3},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n2: bcdef\n\n(Output capped. Showing lines 2-2. Use offset=3 to continue.)\n</content>"},
		{"oversized only line ends at EOF", "abcdef", 1, 10, Caps{10, 2000, 3},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: abcdef\n\n(End of file - total 1 lines)\n</content>"},
		{"limit ends the window", "a\nb\nc\nd\n", 2, 2, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n2: b\n3: c\n\n(Showing lines 2-3 of 4. Use offset=4 to continue.)\n</content>"},
		{"limit ends exactly at the last line", "a\nb\nc\nd\n", 3, 2, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n3: c\n4: d\n\n(End of file - total 4 lines)\n</content>"},
		{"offset at the last line", "a\nb", 2, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n2: b\n\n(End of file - total 2 lines)\n</content>"},
		{"original wire example", "line one\nline two\nline three\nline four\nline five\nline six\nline seven\nline eight\nline nine\nline ten\n", 5, 4, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n5: line five\n6: line six\n7: line seven\n8: line eight\n\n(Showing lines 5-8 of 10. Use offset=9 to continue.)\n</content>"},
		{"BOM hidden", "\xEF\xBB\xBFhi\n", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: hi\n\n(End of file - total 1 lines)\n</content>"},
		{"BOM-only file is empty", "\xEF\xBB\xBF", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n(End of file - total 0 lines)\n</content>"},
		{"BOM past byte 0 kept", "a\n\xEF\xBB\xBFb", 1, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: a\n2: \uFEFFb\n\n(End of file - total 2 lines)\n</content>"},
		{"NUL after the sample is text", strings.Repeat("a", 8192) + "\x00\n", 1, 2000, Caps{2000, 2, 51200},
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n1: aa... (line truncated to 2 chars)\n\n(End of file - total 1 lines)\n</content>"},
		{"NUL after the sample is shown", strings.Repeat("a\n", 4096) + "\x00", 4097, 2000, def,
			"<path>/w/a.txt</path>\n<type>file</type>\n<content>\n4097: \x00\n\n(End of file - total 4097 lines)\n</content>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			win, err := window(tt.input, tt.offset, tt.limit, tt.caps, 0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, ReadOutput(display, win))
			// The streamed form is the same text.
			var b strings.Builder
			b.WriteString(ReadHeader(display))
			for _, l := range win.Lines {
				b.WriteString(LineText(l))
			}
			b.WriteString(ReadTail(win))
			assert.Equal(t, tt.want, b.String())
		})
	}
}

func TestWindowFields(t *testing.T) {
	win, err := window("aaaa\nbbbb\ncccc", 1, 10, Caps{10, 2000, 9}, 0)
	require.NoError(t, err)
	assert.Equal(t, Window{Offset: 1, Lines: []Line{{Number: 1, Text: "aaaa"}, {Number: 2, Text: "bbbb"}}, TotalLines: 3, Footer: FooterCapped}, win)

	js, err := json.Marshal(win.Lines)
	require.NoError(t, err)
	assert.Equal(t, `[{"number":1,"text":"aaaa"},{"number":2,"text":"bbbb"}]`, string(js))

	win, err = window("", 1, 10, DefaultCaps(), 0)
	require.NoError(t, err)
	assert.Equal(t, Window{Offset: 1, Lines: []Line{}, TotalLines: 0, Footer: FooterEOF}, win)
	js, err = json.Marshal(win.Lines)
	require.NoError(t, err)
	assert.Equal(t, `[]`, string(js), "metadata shows an empty list, never null")

	win, err = window("a\nb\nc", 1, 2, DefaultCaps(), 0)
	require.NoError(t, err)
	assert.Equal(t, FooterLimit, win.Footer)
	assert.Equal(t, "limit", win.Footer.String())
	assert.Equal(t, "capped", FooterCapped.String())
	assert.Equal(t, "eof", FooterEOF.String())
}

func TestWindowTotalIsExactPastTheWindow(t *testing.T) {
	input := strings.Repeat(strings.Repeat("y", 100)+"\n", 2000)
	for _, chunk := range []int{0, 512, 7} {
		win, err := window(input, 1, 2000, DefaultCaps(), chunk)
		require.NoError(t, err)
		assert.Equal(t, 2000, win.TotalLines)
		assert.Equal(t, FooterCapped, win.Footer)
		assert.Len(t, win.Lines, 506) // 100 + 101*505 = 51105; one more line is 51206
		assert.Equal(t, "(Output capped. Showing lines 1-506. Use offset=507 to continue.)", FooterText(win))
	}
}

func TestWindowErrors(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		offset int
		want   error
	}{
		{"offset past the end", "a\nb", 3, &OffsetOutOfRangeError{Offset: 3, Total: 2}},
		{"offset past the end after a final newline", "a\nb\n", 3, &OffsetOutOfRangeError{Offset: 3, Total: 2}},
		{"empty file at offset 2", "", 2, &OffsetOutOfRangeError{Offset: 2, Total: 0}},
		{"NUL first", "\x00abc", 1, ErrBinary},
		{"NUL at the last sample byte", strings.Repeat("a", 8191) + "\x00", 1, ErrBinary},
		{"binary wins over invalid UTF-8", "\xff\xfe\x00", 1, ErrBinary},
		{"binary wins over an offset out of range", "\x00", 5, ErrBinary},
		{"invalid UTF-8 early", "ab\xffcd\n", 1, ErrInvalidUTF8},
		{"invalid UTF-8 late", strings.Repeat("ok\n", 4000) + "\xc3(\n", 1, ErrInvalidUTF8},
		{"invalid UTF-8 past the window", strings.Repeat("ok\n", 4000) + "\xe2\x28\xa1", 1, ErrInvalidUTF8},
		{"truncated sequence at EOF", "abc\xe2\x82", 1, ErrInvalidUTF8},
		{"lone lead byte at EOF", "\xf0", 1, ErrInvalidUTF8},
		{"continuation without lead", "a\x80b", 1, ErrInvalidUTF8},
		{"surrogate", "\xed\xa0\x80", 1, ErrInvalidUTF8},
		{"overlong", "\xc0\x80", 1, ErrInvalidUTF8},
		{"past U+10FFFF", "\xf4\x90\x80\x80", 1, ErrInvalidUTF8},
		{"invalid UTF-8 wins over an offset out of range", "a\xff", 9, ErrInvalidUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1, 2, 3, 5, 4096, 8191} {
				_, err := window(tt.input, tt.offset, 2000, DefaultCaps(), chunk)
				assert.Equal(t, tt.want, err, "chunk %d", chunk)
			}
		})
	}
}

func TestWriteReportsErrorsEarlyAndSticks(t *testing.T) {
	t.Run("binary at once", func(t *testing.T) {
		w := NewWindower(1, 10, DefaultCaps())
		_, err := w.Write([]byte("ab\x00"))
		require.ErrorIs(t, err, ErrBinary)
		_, err = w.Write([]byte("more"))
		require.ErrorIs(t, err, ErrBinary)
		assert.False(t, w.Selecting())
		assert.Nil(t, w.Ready())
		_, err = w.Close()
		require.ErrorIs(t, err, ErrBinary)
	})
	t.Run("invalid UTF-8 waits for the sample", func(t *testing.T) {
		w := NewWindower(1, 10, DefaultCaps())
		n, err := w.Write([]byte("ab\xff"))
		require.NoError(t, err, "a NUL may still follow inside the sample")
		assert.Equal(t, 3, n)
		_, err = w.Write(bytes.Repeat([]byte("a"), 8189))
		require.ErrorIs(t, err, ErrInvalidUTF8)
		_, err = w.Write([]byte("x"))
		require.ErrorIs(t, err, ErrInvalidUTF8)
		assert.Nil(t, w.Ready())
	})
	t.Run("invalid UTF-8 after the sample at once", func(t *testing.T) {
		w := NewWindower(1, 10, DefaultCaps())
		_, err := w.Write(bytes.Repeat([]byte("a\n"), 5000))
		require.NoError(t, err)
		_, err = w.Write([]byte("\xc3\x28"))
		require.ErrorIs(t, err, ErrInvalidUTF8)
	})
	t.Run("write after close", func(t *testing.T) {
		w := NewWindower(1, 10, DefaultCaps())
		_, err := w.Close()
		require.NoError(t, err)
		_, err = w.Write([]byte("a"))
		require.Error(t, err)
	})
	t.Run("close twice", func(t *testing.T) {
		w := NewWindower(1, 10, DefaultCaps())
		_, err := w.Write([]byte("a\nb"))
		require.NoError(t, err)
		first, err := w.Close()
		require.NoError(t, err)
		second, err := w.Close()
		require.NoError(t, err)
		assert.Equal(t, first, second)

		w = NewWindower(5, 10, DefaultCaps())
		_, err = w.Close()
		var oor *OffsetOutOfRangeError
		require.ErrorAs(t, err, &oor)
		_, err2 := w.Close()
		assert.Equal(t, err, err2)
	})
}

func TestReadyRelease(t *testing.T) {
	t.Run("small file: nothing before Close, then the remainder once", func(t *testing.T) {
		w := NewWindower(1, 10, DefaultCaps())
		_, err := w.Write([]byte("a\nb\nc"))
		require.NoError(t, err)
		assert.Nil(t, w.Ready())
		_, err = w.Close()
		require.NoError(t, err)
		assert.Equal(t, []Line{{Number: 1, Text: "a"}, {Number: 2, Text: "b"}, {Number: 3, Text: "c"}}, w.Ready())
		assert.Nil(t, w.Ready())
	})
	t.Run("lines leave once the sample has passed", func(t *testing.T) {
		w := NewWindower(2, 3000, DefaultCaps())
		line := []byte(strings.Repeat("z", 9) + "\n") // 10 bytes
		for range 819 {
			_, err := w.Write(line)
			require.NoError(t, err)
		}
		assert.Nil(t, w.Ready(), "8190 bytes: the sample has not passed")
		_, err := w.Write([]byte("z\n")) // byte 8192 completes the sample
		require.NoError(t, err)
		got := w.Ready()
		require.Len(t, got, 819)
		assert.Equal(t, Line{Number: 2, Text: "zzzzzzzzz"}, got[0])
		assert.Equal(t, Line{Number: 820, Text: "z"}, got[818])
		assert.Nil(t, w.Ready())
		_, err = w.Write([]byte("tail\npartial"))
		require.NoError(t, err)
		assert.Equal(t, []Line{{Number: 821, Text: "tail"}}, w.Ready(), "a line leaves when its newline arrives")
		win, err := w.Close()
		require.NoError(t, err)
		assert.Equal(t, []Line{{Number: 822, Text: "partial"}}, w.Ready())
		assert.Len(t, win.Lines, 821, "the Window keeps every line")
	})
	t.Run("nothing after a failed Close", func(t *testing.T) {
		w := NewWindower(1, 10, DefaultCaps())
		_, err := w.Write([]byte("a\xe2"))
		require.NoError(t, err)
		_, err = w.Close()
		require.ErrorIs(t, err, ErrInvalidUTF8)
		assert.Nil(t, w.Ready())
	})
}

func TestSelecting(t *testing.T) {
	tests := []struct {
		name   string
		offset int
		limit  int
		caps   Caps
		feed   string
		want   bool
	}{
		{"fresh", 1, 10, DefaultCaps(), "", true},
		{"skipping to the offset", 5, 1, DefaultCaps(), "a\nb\n", true},
		{"line in progress", 1, 1, DefaultCaps(), "abc", true},
		{"limit reached", 1, 2, DefaultCaps(), "a\nb\n", false},
		{"byte cap refused a line", 1, 10, Caps{10, 2000, 9}, "aaaa\nbbbb\ncccc\n", false},
		{"byte budget spent exactly", 1, 10, Caps{10, 2000, 9}, "aaaa\nbbbb\n", false},
		{"first line over the cap", 1, 10, Caps{10, 2000, 3}, "abcdef\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWindower(tt.offset, tt.limit, tt.caps)
			_, err := w.Write([]byte(tt.feed))
			require.NoError(t, err)
			assert.Equal(t, tt.want, w.Selecting())
			_, _ = w.Close()
			assert.False(t, w.Selecting(), "never after Close")
		})
	}
}

func TestNonPositiveArgumentsCountAsOne(t *testing.T) {
	win, err := window("ab\ncd\n", 0, -3, Caps{}, 0)
	require.NoError(t, err)
	assert.Equal(t, Window{Offset: 1, Lines: []Line{{Number: 1, Text: "a... (line truncated to 1 chars)"}}, TotalLines: 2, Footer: FooterLimit}, win)
}

// trickyInputs exercise every chunk-boundary hazard: multi-byte characters,
// CR LF, BOM, truncation, caps and the NUL sample edge.
var trickyInputs = []string{
	"",
	"\n",
	"\n\n\r\n\r",
	"a\n\n",
	"hello\nworld",
	"one\r\ntwo\r\nthree\r",
	"a\rb\r\r\nc",
	"\xEF\xBB\xBF",
	"\xEF\xBB\xBF\n",
	"\xEF\xBB\xBFé\r\n😀",
	"😀😀😀😀\n😀😀😀\r\nééé",
	"aaaa\nbbbb\ncccc",
	"日本語のテキスト\n第二行\n",
	"x\xe2\x82\xacy\n\xf0\x9f\x98\x80\xe2",
	"abc\xffdef",
	"ok\n\xed\xa0\x80",
	"\x00",
	"line\n\x00",
	"\xffabc\n\x00",
	"\xe2\x82\n\x00",
	strings.Repeat("é", 30) + "\n" + strings.Repeat("ab\n", 10),
	strings.Repeat("a", 8191) + "\x00",
	strings.Repeat("a", 8192) + "\x00",
	strings.Repeat("a", 8190) + "é\xff" + "\x00",
	strings.Repeat("€", 2731) + "\n", // 8193 bytes
}

func TestChunkBoundariesNeverMatter(t *testing.T) {
	settings := []struct {
		offset, limit int
		caps          Caps
	}{
		{1, 2000, DefaultCaps()},
		{1, 3, Caps{3, 3, 9}},
		{2, 2, Caps{2, 2, 5}},
		{3, 1, Caps{1, 1, 1}},
	}
	for i, input := range trickyInputs {
		for _, s := range settings {
			want, wantErr := window(input, s.offset, s.limit, s.caps, 0)
			refWin, refErr := refWindow([]byte(input), s.offset, s.limit, s.caps)
			require.Equal(t, refErr, wantErr, "input %d %q", i, input)
			require.Equal(t, refWin, want, "input %d %q", i, input)
			for chunk := 1; chunk <= len(input)+1; chunk = nextChunk(chunk, len(input)) {
				got, err := window(input, s.offset, s.limit, s.caps, chunk)
				require.Equal(t, wantErr, err, "input %d chunk %d", i, chunk)
				require.Equal(t, want, got, "input %d chunk %d", i, chunk)
			}
		}
	}
}

// nextChunk steps through every chunk size up to len+1 for inputs up to
// 1 KiB. For the 8 KiB NUL-sample inputs (every size would cost len² bytes,
// slow under -race) it keeps every size up to 128 and near the sample edge
// and every 61st size between; FuzzWindow covers random sizes.
func nextChunk(chunk, n int) int {
	if n <= 1024 || chunk < 128 || chunk >= BinarySample-128 {
		return chunk + 1
	}
	return min(chunk+61, BinarySample-128)
}

// refWindow is the window by its plain definition, over the whole input.
func refWindow(data []byte, offset, limit int, caps Caps) (Window, error) {
	offset, limit = max(offset, 1), max(limit, 1)
	maxLine, maxBytes := max(caps.MaxLineLength, 1), max(caps.MaxBytes, 1)
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return Window{}, ErrBinary
	}
	if !utf8.Valid(data) {
		return Window{}, ErrInvalidUTF8
	}
	s := strings.TrimPrefix(string(data), "\uFEFF")
	var lines []string
	if s != "" {
		lines = strings.Split(s, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
	}
	total := len(lines)
	if offset > total && !(total == 0 && offset == 1) {
		return Window{}, &OffsetOutOfRangeError{Offset: offset, Total: total}
	}
	win := Window{Offset: offset, Lines: []Line{}, TotalLines: total}
	used := 0
	for i := offset - 1; i < total; i++ {
		if len(win.Lines) == limit {
			win.Footer = FooterLimit
			break
		}
		text := strings.TrimSuffix(lines[i], "\r")
		if r := []rune(text); len(r) > maxLine {
			text = string(r[:maxLine]) + "... (line truncated to " + strconv.Itoa(maxLine) + " chars)"
		}
		cost := len(text)
		if len(win.Lines) > 0 {
			cost++
			if used+cost > maxBytes {
				win.Footer = FooterCapped
				break
			}
		}
		used += cost
		win.Lines = append(win.Lines, Line{Number: i + 1, Text: text})
	}
	return win, nil
}

func FuzzWindow(f *testing.F) {
	for _, in := range trickyInputs {
		f.Add([]byte(in), uint16(1), uint8(1), uint8(5), uint8(3), uint16(20))
	}
	f.Add([]byte("aaaa\nbbbb\ncccc"), uint16(2), uint8(1), uint8(10), uint8(200), uint16(9))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, offset, limit, maxLine uint8, maxBytes uint16) {
		caps := Caps{Limit: int(limit), MaxLineLength: int(maxLine), MaxBytes: int(maxBytes)}
		want, wantErr := refWindow(data, int(offset), int(limit), caps)
		whole, err := window(string(data), int(offset), int(limit), caps, 0)
		require.Equal(t, wantErr, err)
		require.Equal(t, want, whole)
		got, err := window(string(data), int(offset), int(limit), caps, int(chunk))
		require.Equal(t, wantErr, err)
		require.Equal(t, want, got)
		if err == nil {
			out := ReadOutput(display, got)
			require.True(t, strings.HasSuffix(out, FooterText(got)+"\n</content>"))
		}
	})
}
