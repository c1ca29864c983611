package tools

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Body messages: decoders are lenient where a tool call must not be
// (RFC 8259 §8.1, §4, §8.2; docs/api.md, "Request bodies").
const (
	msgBodyRequired  = "request body must be a JSON object"
	msgBodyJSON      = "request body is not valid JSON"
	msgBodyUTF8      = "request body is not valid UTF-8"
	msgBodySurrogate = "request body has an unpaired UTF-16 surrogate escape"
)

// BodyIncomplete is the refusal of arguments a transport could not read
// whole (the client broke off mid-body).
func BodyIncomplete() *fault.Error { return argError(msgBodyJSON) }

// member is one top-level member of a request object: its key as sent and
// its raw value.
type member struct {
	key   string
	value []byte
}

// args are the members of a request object, decoded once. Lookups are by
// exact key; a JSON null counts as absent (docs/api.md, "null").
type args []member

// decodeArgs checks a tool's arguments as one JSON object and splits it
// into members. It refuses what encoding/json would quietly accept: invalid
// UTF-8 and unpaired \uD800-\uDFFF escapes (both decode to U+FFFD, so a write
// would store other bytes than the caller sent), trailing data after the
// value, and a key given twice (case-folded, as encoding/json matches keys:
// each reader could pick another one).
func decodeArgs(raw []byte) (args, *fault.Error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, argError(msgBodyRequired)
	}
	if !utf8.Valid(raw) {
		return nil, argError(msgBodyUTF8)
	}
	switch valid, lone := checkJSON(raw); {
	case !valid:
		return nil, argError(msgBodyJSON)
	case lone:
		return nil, argError(msgBodySurrogate)
	}
	i := skipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, argError(msgBodyRequired)
	}
	var a args
	var seen map[string]bool
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] == '"'; {
		end := stringEnd(raw, i)
		key, ok := unquote(raw[i:end])
		if !ok {
			return nil, argError(msgBodyJSON)
		}
		folded := foldKey(key)
		if seen == nil {
			seen = make(map[string]bool, 8)
		}
		if seen[folded] {
			return nil, argError("request body has a duplicate key " + render.Quote(key))
		}
		seen[folded] = true
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the ':'
		vend := valueEnd(raw, i)
		a = append(a, member{key: key, value: raw[i:vend]})
		i = skipSpace(raw, vend)
		if i >= len(raw) || raw[i] != ',' {
			break // '}'
		}
		i = skipSpace(raw, i+1)
	}
	return a, nil
}

// get returns the raw value of key, nil when absent or null.
func (a args) get(key string) []byte {
	for _, m := range a {
		if m.key == key {
			if string(m.value) == "null" {
				return nil
			}
			return m.value
		}
	}
	return nil
}

// numberOf is the value of a JSON number (false for any other value).
func numberOf(v []byte) (float64, bool) {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

// booleanOf is the value of a JSON boolean (false, false for any other
// value).
func booleanOf(v []byte) (b, ok bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// unquote decodes a JSON string value that decodeArgs has already checked
// (valid JSON, valid UTF-8, no unpaired surrogate escape), so it only has to
// apply the escapes: one pass, no second validity scan, no reflection (a
// 60 KiB source file's content is mostly \t and \n escapes). Without escapes
// its bytes are the string itself.
func unquote(v []byte) (string, bool) {
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

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at
// b[i] == '"': the next quote not escaped, that is, not preceded by an odd
// run of backslashes.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		j += k
		slashes := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			slashes++
		}
		if slashes%2 == 0 {
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				j = stringEnd(b, j)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
			j++
		}
		return len(b)
	}
	for j := i; j < len(b); j++ { // number, true, false, null
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}

// foldKey maps every rune to the smallest of its case-fold orbit, so keys
// equal under strings.EqualFold ("ſ" and "s", "K" and "k") map alike.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}
