package render

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// resumed reads the window the way a cached read does: the file is indexed
// during a first full read, then the window is read from the index's mark
// for offset in chunks of size chunk, stopping as soon as the window is
// complete.
func resumed(data []byte, every int64, marks, offset, limit int, caps Caps, chunk int) (Window, LineIndex, error) {
	ix := NewIndexer(every, marks)
	first := NewWindower(1, 1, caps)
	for p := data; len(p) > 0; {
		n := min(max(chunk, 1), len(p))
		ix.Write(p[:n])
		first.Write(p[:n])
		p = p[n:]
	}
	whole, err := first.Close()
	if err != nil {
		return Window{}, LineIndex{}, err
	}
	idx := ix.Index(whole.TotalLines)
	at := idx.Seek(offset)
	w := ResumeWindower(offset, limit, caps, at)
	for p := data[at.Byte:]; len(p) > 0 && w.Selecting(); {
		n := min(max(chunk, 1), len(p))
		if _, err := w.Write(p[:n]); err != nil {
			return Window{}, idx, err
		}
		p = p[n:]
	}
	if w.Selecting() {
		win, err := w.Close()
		return win, idx, err
	}
	win, err := w.Stop(idx.Total)
	return win, idx, err
}

// checkIndex compares the index with a plain scan of data.
func checkIndex(t *testing.T, data []byte, idx LineIndex, total int) {
	t.Helper()
	require.Equal(t, total, idx.Total)
	require.NotEmpty(t, idx.Marks)
	require.Equal(t, Mark{}, idx.Marks[0])
	for i, m := range idx.Marks {
		require.Equal(t, bytes.Count(data[:m.Byte], nl), m.Line, "mark %d", i)
		if m.Byte > 0 {
			require.Equal(t, byte('\n'), data[m.Byte-1], "mark %d starts a line", i)
		}
		if i > 0 {
			require.Greater(t, m.Byte, idx.Marks[i-1].Byte)
		}
	}
}

func TestResumedWindowEqualsFullRead(t *testing.T) {
	var b strings.Builder
	b.WriteString("\ufeff")
	for i := range 3000 {
		b.WriteString(strings.Repeat("é", i%37))
		if i%11 == 0 {
			b.WriteString("\r")
		}
		b.WriteString("\n")
	}
	b.WriteString("last line without newline ✓")
	data := []byte(b.String())
	small := Caps{Limit: 2000, MaxLineLength: 10, MaxBytes: 700}
	for _, tc := range []struct {
		name                 string
		offset, limit, chunk int
		caps                 Caps
	}{
		{"top", 1, 50, 1000, DefaultCaps()},
		{"deep, limit", 2500, 20, 333, DefaultCaps()},
		{"deep, capped", 1200, 2000, 4096, small},
		{"to the end", 2950, 2000, 777, DefaultCaps()},
		{"last line", 3001, 5, 100, DefaultCaps()},
		{"past the end", 3002, 5, 100, DefaultCaps()},
		{"one byte chunks", 2999, 3, 1, small},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, werr := refWindow(data, tc.offset, tc.limit, tc.caps)
			got, idx, err := resumed(data, 500, 1000, tc.offset, tc.limit, tc.caps, tc.chunk)
			checkIndex(t, data, idx, 3001)
			require.Greater(t, len(idx.Marks), 10)
			if werr != nil {
				require.Equal(t, werr, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

func TestIndexerBounds(t *testing.T) {
	data := []byte(strings.Repeat("0123456789\n", 1000))
	ix := NewIndexer(100, 5)
	ix.Write(data)
	idx := ix.Index(1000)
	require.Len(t, idx.Marks, 5, "at most limit marks")
	checkIndex(t, data, idx, 1000)
	require.Equal(t, Mark{Line: 40, Byte: 440}, idx.Seek(1000), "beyond the last mark, the last mark")
	require.Equal(t, Mark{}, idx.Seek(1))
	require.Equal(t, Mark{Line: 10, Byte: 110}, idx.Seek(11))
	require.Equal(t, Mark{}, idx.Seek(10))
}

func TestStopWhileSelectingIsAnError(t *testing.T) {
	w := ResumeWindower(1, 10, DefaultCaps(), Mark{})
	w.Write([]byte("a\nb\n"))
	_, err := w.Stop(2)
	require.ErrorIs(t, err, errNotStopped)
}

// FuzzLineIndex compares the sparse index with a plain scan of the bytes,
// and a window resumed from it with a window read from the top.
func FuzzLineIndex(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), int64(1), uint8(3), 2, 1, 1)
	f.Add([]byte("\ufeffx\r\ny\n\nzzzzzzzzzz"), int64(3), uint8(2), 3, 2, 2)
	f.Add([]byte(strings.Repeat("line é\n", 200)), int64(64), uint8(8), 150, 20, 17)
	f.Fuzz(func(t *testing.T, data []byte, every int64, marks uint8, offset, limit, chunk int) {
		if len(data) > 1<<13 || offset > 1<<20 || limit > 1<<20 || chunk > 1<<20 {
			t.Skip()
		}
		caps := Caps{Limit: 2000, MaxLineLength: 7, MaxBytes: 60}
		want, werr := refWindow(data, offset, limit, caps)
		got, idx, err := resumed(data, every%4096, int(marks), offset, limit, caps, chunk)
		if werr != nil {
			var oor *OffsetOutOfRangeError
			if errors.As(werr, &oor) {
				require.Equal(t, werr, err)
			} else {
				require.Error(t, err) // the first read refused it: no index
			}
			return
		}
		require.NoError(t, err)
		checkIndex(t, data, idx, want.TotalLines)
		if len(want.Lines) == 0 && len(got.Lines) == 0 {
			want.Lines, got.Lines = nil, nil
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("resumed window differs:\nwant %+v\ngot  %+v", want, got)
		}
	})
}
