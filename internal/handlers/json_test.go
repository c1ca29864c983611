package handlers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// stdJSON is what writeJSON produced before the hand-written encoder:
// encoding/json without HTML escaping, with its trailing newline.
func stdJSON(t testing.TB, v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return buf.String()
}

var jsonStrings = []string{
	"", "a", "plain ascii text of some length, more than eight bytes",
	"\tv0001 := compute(a, b) * 0001", `quote " and backslash \ inside`,
	"<html> & 'single'", "\x00\x01\x07\b\f\n\r\t\x0b\x1f\x7f",
	"é, 日本語, emoji 😀, U+2028 \u2028 and U+2029 \u2029 and U+2027 \u2027",
	"invalid \xff byte, cut \xe6\x97 rune, lone continuation \x80",
	"12345678\n12345678\"1234567\\", strings.Repeat("x", 8) + "\x1f" + strings.Repeat("y", 15),
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStrings {
		assert.Equal(t, strings.TrimSuffix(stdJSON(t, s), "\n"), string(appendJSONString(nil, s)), "%q", s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.TrimSuffix(stdJSON(t, s), "\n")
		if got := string(appendJSONString(nil, s)); got != want {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

func TestReadResultMatchesEncodingJSON(t *testing.T) {
	lines := []render.Line{{Number: 3, Text: "\tfunc <a>() { \"x\" }"}, {Number: 4, Text: ""}, {Number: 5, Text: "é \u2028 \x01 \\"}}
	for _, tc := range []struct {
		name    string
		display string
		window  render.Window
		lang    string
	}{
		{"lines and lang", "/r/a.go", render.Window{Offset: 3, TotalLines: 9, Lines: lines, Footer: render.FooterLimit}, "go"},
		{"capped", "/r/a b.txt", render.Window{Offset: 3, TotalLines: 9, Lines: lines, Footer: render.FooterCapped}, ""},
		{"end of file", "/r/é.md", render.Window{Offset: 3, TotalLines: 5, Lines: lines}, "markdown"},
		{"no lines", `/r/"q"\x`, render.Window{Offset: 1, Lines: []render.Line{}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := tools.ReadMetadata{Path: tc.display, Offset: tc.window.Offset, Lines: tc.window.Lines, TotalLines: tc.window.TotalLines, Lang: tc.lang}
			// What the executor sent through encoding/json before.
			want := stdJSON(t, tools.Result{Output: render.ReadOutput(tc.display, tc.window), Metadata: meta})
			got := readResult{tools.ReadResult{Display: tc.display, Window: tc.window, Meta: meta}}.appendJSON(nil)
			assert.Equal(t, want, string(got))
		})
	}
}

func BenchmarkAppendJSONString(b *testing.B) {
	s := strings.Repeat("\tv0001 := compute(a, b) * 0001\n", 2000)
	b.Run("appendJSONString", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		buf := make([]byte, 0, 2*len(s))
		ReportCPU(b)
		for b.Loop() {
			buf = appendJSONString(buf[:0], s)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		ReportCPU(b)
		for b.Loop() {
			json.Marshal(s)
		}
	})
}
