package jsonscan

import (
	"bytes"
	"strings"
	"unicode/utf16"
)

// Unquote decodes a JSON string value that Check has already checked
// (valid JSON, valid UTF-8, no unpaired surrogate escape), so it only has to
// apply the escapes: one pass, no second validity scan, no reflection (a
// 60 KiB source file's content is mostly \t and \n escapes). Without escapes
// its bytes are the string itself.
func Unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	i := bytes.IndexByte(inner, '\\')
	if i < 0 {
		return string(inner), true
	}
	// A Builder sized once: the text is never longer than its escapes, and
	// String hands over the bytes without copying them again.
	var out strings.Builder
	out.Grow(len(inner))
	for {
		out.Write(inner[:i])
		inner = inner[i:]
		if len(inner) < 2 {
			return "", false
		}
		switch c := inner[1]; c {
		case '"', '\\', '/':
			out.WriteByte(c)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			if len(inner) < 6 {
				return "", false
			}
			r := hex4(inner[2:6])
			if r >= 0xD800 && r <= 0xDBFF { // a high surrogate: its low one follows
				if len(inner) < 12 || inner[6] != '\\' || inner[7] != 'u' {
					return "", false
				}
				r = utf16.DecodeRune(r, hex4(inner[8:12]))
				inner = inner[6:]
			}
			out.WriteRune(r)
			inner = inner[4:]
		default:
			return "", false
		}
		inner = inner[2:]
		if i = bytes.IndexByte(inner, '\\'); i < 0 {
			out.Write(inner)
			return out.String(), true
		}
	}
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
