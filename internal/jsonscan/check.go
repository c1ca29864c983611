// Package jsonscan reads JSON text as bytes, without reflection and
// without building values: one validating pass (Check), the scans a reader
// of checked text needs (SkipSpace, StringEnd, ValueEnd, Members, Depth),
// a string's decoding (Unquote), and the strict reading of a request
// object (Object) that the executor applies to every tool body and the MCP
// transport relies on (docs/api.md, "Request bodies"). It imports nothing
// of this module: the executor and the MCP transport share it.
package jsonscan

import "encoding/binary"

// maxDepth is encoding/json's nesting limit: a body nested deeper is not
// valid JSON to it, so not to us either.
const maxDepth = 10000

// Check reports whether b is one JSON value, exactly as json.Valid
// judges it, and whether a string in it has a \u escape of a UTF-16
// surrogate that is not a high one directly followed by a low one. It is
// one pass instead of two, and scans the inside of strings (most of a write
// body) eight bytes at a time: json.Valid steps a state machine per byte,
// which was most of a 60 KiB write body's decoding (docs/performance.md,
// section 5). FuzzCheckJSON holds it to json.Valid.
func Check(b []byte) (valid, loneSurrogate bool) {
	var open []byte // the containers we are in: '{' or '['
	i := SkipSpace(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return false, false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(open) == maxDepth {
				return false, false
			}
			close := byte('}')
			if c == '[' {
				close = ']'
			}
			if i = SkipSpace(b, i+1); i < len(b) && b[i] == close {
				i++
				break // an empty container is a whole value
			}
			open = append(open, c)
			if c == '{' {
				if i = memberStart(b, i, &loneSurrogate); i < 0 {
					return false, false
				}
			}
			continue
		case c == '"':
			if i = stringValue(b, i, &loneSurrogate); i < 0 {
				return false, false
			}
		case c == '-' || '0' <= c && c <= '9':
			if i = number(b, i); i < 0 {
				return false, false
			}
		default:
			if i = literal(b, i); i < 0 {
				return false, false
			}
		}
		// A value ended before b[i]: what may follow it.
		for {
			i = SkipSpace(b, i)
			if len(open) == 0 {
				return i == len(b), loneSurrogate
			}
			if i >= len(b) {
				return false, false
			}
			top := open[len(open)-1]
			switch c := b[i]; {
			case c == ',':
				if i = SkipSpace(b, i+1); top == '{' {
					if i = memberStart(b, i, &loneSurrogate); i < 0 {
						return false, false
					}
				}
			case top == '{' && c == '}', top == '[' && c == ']':
				open = open[:len(open)-1]
				i++
				continue
			default:
				return false, false
			}
			break
		}
	}
}

// memberStart checks an object member's key and colon from b[i]; it returns the
// index of its value (after space), or -1.
func memberStart(b []byte, i int, lone *bool) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = stringValue(b, i, lone); i < 0 {
		return -1
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
}

// plain marks the bytes a JSON string holds as they are: not a quote, not
// a backslash, not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// special reports whether one of the eight bytes of x is a quote, a
// backslash or a control character (the classic has-zero-byte and
// has-byte-less-than bit tricks; exact about whether there is one).
func special(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, s := x^(ones*'"'), x^(ones*'\\')
	return ((q-ones)&^q|(s-ones)&^s|(x-ones*0x20)&^x)&highs != 0
}

// stringValue checks the string at b[i] == '"' and returns the index just
// past it, or -1; it sets *lone on an unpaired surrogate escape.
func stringValue(b []byte, i int, lone *bool) int {
	i++
	for {
		for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
		default:
			return -1 // a control character
		}
		if i+1 >= len(b) {
			return -1
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
			continue
		case 'u':
		default:
			return -1
		}
		r, ok := hexEscape(b, i)
		if !ok {
			return -1
		}
		i += 6
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			*lone = true
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hexEscape(b, i); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 6
			} else {
				*lone = true // what follows is checked as any other byte
			}
		}
	}
}

// hexEscape reads a \uXXXX escape at b[i].
func hexEscape(b []byte, i int) (rune, bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	for _, c := range b[i+2 : i+6] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, false
		}
	}
	return hex4(b[i+2 : i+6]), true
}

// number checks the number at b[i] (RFC 8259 §6) and returns the index just
// past it, or -1.
func number(b []byte, i int) int {
	digits := func(i int) int { // one or more
		j := i
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	default:
		if i = digits(i); i < 0 {
			return -1
		}
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}

// literal checks true, false or null at b[i] and returns the index just
// past it, or -1.
func literal(b []byte, i int) int {
	for _, w := range [...]string{"true", "false", "null"} {
		if len(b)-i >= len(w) && string(b[i:i+len(w)]) == w {
			return i + len(w)
		}
	}
	return -1
}

// Valid reports whether b is one JSON value, as json.Valid does, in
// Check's one fast pass.
func Valid(b []byte) bool {
	valid, _ := Check(b)
	return valid
}
