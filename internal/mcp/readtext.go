package mcp

import (
	"slices"
	"strconv"
	"unicode/utf8"

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
		size += len(l.Text) + len(l.Text)/8 + 16 // number, ": ", "\n", some escapes
	}
	b = slices.Grow(b, size)
	b = append(b, '"')
	b = appendHTMLEscaped(b, render.ReadHeader(display))
	for _, l := range w.Lines {
		b = strconv.AppendInt(b, int64(l.Number), 10)
		b = append(b, ": "...)
		b = appendHTMLEscaped(b, l.Text)
		b = append(b, `\n`...)
	}
	b = appendHTMLEscaped(b, render.ReadTail(w))
	return append(b, '"')
}

// htmlSafe are the ASCII bytes encoding/json writes as they are with HTML
// escaping on: printable, but not ", \, <, > or &.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendHTMLEscaped appends the inside of json.Marshal(s): \" \\ \b \f \n
// \r \t, other control bytes and <, >, & as \u00XX, U+2028 and U+2029
// escaped, invalid UTF-8 as \ufffd.
func appendHTMLEscaped(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}
