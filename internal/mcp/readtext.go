package mcp

import (
	"encoding/json"
	"slices"

	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// readText is a read's text as the SDK would encode it, json.Marshal of
// render.ReadOutput, written straight from the window: neither the text
// nor a second encoding of it is made. A window served from the read cache
// keeps these bytes with it (tools.ReadResult.Memo), so a repeated read of
// an unchanged file sends them as they are (docs/performance.md, "MCP at
// the speed of REST"). The bytes must not be modified.
func readText(r tools.ReadResult) []byte {
	if r.IsMedia() {
		b, _ := json.Marshal(r.Output()) // a string always encodes
		return b
	}
	if b, ok := r.Memo("mcp-text", func() []byte { return appendReadText(nil, r.Display, r.Window) }); ok {
		return b
	}
	return appendReadText(nil, r.Display, r.Window)
}

// appendReadText appends json.Marshal(render.ReadOutput(display, w)).
// Escaping is per character, so escaping the parts equals escaping the
// whole.
func appendReadText(b []byte, display string, w render.Window) []byte {
	size := 2*len(display) + 200
	for _, l := range w.Lines {
		size += len(l.Text) + len(l.Text)/8 + 19 // number, "#<tag>: ", "\n", some escapes
	}
	b = slices.Grow(b, size)
	b = append(b, '"')
	b = render.AppendJSONEscaped(b, render.ReadHeader(display), true)
	for _, l := range w.Lines {
		b = render.AppendLinePrefix(b, l) // nothing in it to escape
		b = render.AppendJSONEscaped(b, l.Text, true)
		b = append(b, `\n`...)
	}
	b = render.AppendJSONEscaped(b, render.ReadTail(w), true)
	return append(b, '"')
}
