package render

import "unicode/utf8"

// AppendJSONEscaped appends the inside of s as a JSON string, without the
// quotes, exactly as encoding/json writes it: \" \\ \b \f \n \r \t, other
// control bytes as \u00XX, U+2028 and U+2029 escaped, invalid UTF-8 as
// \ufffd; with html also <, > and & as \u00XX, as json.Marshal does (an
// Encoder with SetEscapeHTML(false) leaves them). Escaping is per
// character, so escaping parts and joining them equals escaping the
// joined text: the transports encode a read window line by line
// (docs/performance.md).
func AppendJSONEscaped(b []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	safe := &jsonSafe
	if html {
		safe = &jsonHTMLSafe
	}
	start := 0
	for i := 0; i < len(s); {
		// Skip plain ASCII eight bytes at a time (a SWAR test on one 64-bit
		// word): no byte >= 0x80, < 0x20, '"' or '\\' (nor <, >, & with
		// html, which the table below finds).
		for ; !html && i+8 <= len(s); i += 8 {
			w := s[i : i+8]
			x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
			q, bs := x^(lo*'"'), x^(lo*'\\')
			if (x|(x-lo*0x20)&^x|(q-lo)&^q|(bs-lo)&^bs)&hi != 0 {
				break
			}
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
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

// jsonSafe and jsonHTMLSafe are the ASCII bytes encoding/json writes as
// they are, without and with HTML escaping.
var jsonSafe, jsonHTMLSafe = func() (t, h [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
		h[c] = t[c] && c != '<' && c != '>' && c != '&'
	}
	return t, h
}()
