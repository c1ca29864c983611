package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
)

// readTextCases are windows whose texts hold everything encoding/json
// escapes.
var readTextCases = map[string]struct {
	display string
	w       render.Window
}{
	"lines":   {"/r/a.go", render.Window{Offset: 1, TotalLines: 3, Lines: []render.Line{{Number: 1, Text: "package a"}, {Number: 2, Text: "\tif a < b && c > d {"}, {Number: 3, Text: ""}}}},
	"escapes": {"/r/\"q\"\\<&>.txt", render.Window{Offset: 7, TotalLines: 100, Footer: render.FooterLimit, Lines: []render.Line{{Number: 7, Text: "\x00\x01\x08\x0c\x1f\x7f\r\"\\"}}}},
	"unicode": {"/r/é.txt", render.Window{Offset: 1, TotalLines: 1, Footer: render.FooterCapped, Lines: []render.Line{{Number: 1, Text: "日本 \u2028 \u2029 😀 \ufffd"}}}},
	"invalid": {"/r/\xff.txt", render.Window{Offset: 1, TotalLines: 1, Lines: []render.Line{{Number: 1, Text: "a\xffb\xe2\x80"}}}},
	"empty":   {"/r/e.txt", render.Window{Offset: 1}},
}

// TestReadTextIsJSONOfTheOutput: the text written from the window is
// json.Marshal of the read's output, byte for byte.
func TestReadTextIsJSONOfTheOutput(t *testing.T) {
	for name, c := range readTextCases {
		want, err := json.Marshal(render.ReadOutput(c.display, c.w))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(appendReadText(nil, c.display, c.w)), name)
	}
}

func FuzzReadText(f *testing.F) {
	for _, c := range readTextCases {
		var texts []string
		for _, l := range c.w.Lines {
			texts = append(texts, l.Text)
		}
		f.Add(c.display, strings.Join(texts, "\n"), c.w.Offset, int(c.w.Footer))
	}
	f.Fuzz(func(t *testing.T, display, text string, offset, footer int) {
		offset = max(1, offset%1000)
		w := render.Window{Offset: offset, Footer: render.Footer(footer & 3 % 3)}
		for i, l := range strings.Split(text, "\n") {
			w.Lines = append(w.Lines, render.Line{Number: offset + i, Text: l})
		}
		w.TotalLines = offset + len(w.Lines)
		want, err := json.Marshal(render.ReadOutput(display, w))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(appendReadText(nil, display, w)))
	})
}
