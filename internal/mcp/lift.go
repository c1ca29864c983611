package mcp

import (
	"bytes"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// liftArgs takes a tools/call's arguments out of a request body before the
// SDK sees it: the SDK decodes a message's params several times before a
// tool runs (its body peek, its transport's checks, the session's _meta
// checks, the params themselves), each pass over the whole of a 60 KiB
// write's content, while its raw tool handler hands the arguments on
// unread and the executor decodes them strictly anyway (docs/performance.md,
// "MCP at the speed of REST"). The SDK gets the body with {} in their place;
// the tool handler takes them back from the request's carrier.
//
// It lifts only what the SDK would have read the same way: one JSON-RPC
// message (not a batch) that is valid JSON, nested less deeply than the
// SDK's decoder allows, whose method is exactly "tools/call" and whose
// params hold "arguments" once, as an object, with no key in either object
// written with escapes. Anything else is handed on as it is (ok false), so
// the SDK answers it as it always did.
func liftArgs(body []byte) (spliced, args []byte, ok bool) {
	const sdkDepth = 1000 // the SDK's decoder refuses a body nested deeper
	if !tools.ValidJSON(body) || depthOf(body) >= sdkDepth {
		return nil, nil, false
	}
	call := false
	params, ok := member(body, skipWS(body, 0), "params", func(key string, v []byte) bool {
		if key != "method" {
			return true
		}
		call = string(v) == `"tools/call"`
		return call
	})
	if !ok || !call || !isObject(body, params) {
		return nil, nil, false
	}
	at, ok := member(body, params, "arguments", nil)
	if !ok || !isObject(body, at) {
		return nil, nil, false
	}
	end := skipValue(body, at)
	spliced = make([]byte, 0, len(body)-(end-at)+2)
	spliced = append(append(append(spliced, body[:at]...), "{}"...), body[end:]...)
	return spliced, body[at:end], true
}

// member finds the value of key in the object at b[i] (valid JSON) and
// returns its index. It fails when the key is missing or appears twice,
// when any key of the object has an escape (the SDK would unescape it), or
// when check refuses a member.
func member(b []byte, i int, key string, check func(key string, v []byte) bool) (at int, ok bool) {
	at, clear := field(b, i, key, check)
	return at, clear && at >= 0
}

// field looks key up in the object at b[i] (valid JSON) as the SDK's
// decoder does, matching keys exactly: at is the index of its value, -1
// when absent. clear is false when the SDK could read another value: the
// key appears twice (it takes the last), or a key of the object has an
// escape (it would unescape it, perhaps into key); and when check refuses a
// member.
func field(b []byte, i int, key string, check func(key string, v []byte) bool) (at int, clear bool) {
	if i >= len(b) || b[i] != '{' {
		return -1, false
	}
	at = -1
	i = skipWS(b, i+1)
	for i < len(b) && b[i] == '"' {
		end := skipValue(b, i)
		k := b[i+1 : end-1]
		if bytes.IndexByte(k, '\\') >= 0 {
			return -1, false
		}
		v := skipWS(b, skipWS(b, end)+1) // past the colon
		vend := skipValue(b, v)
		if string(k) == key {
			if at >= 0 {
				return -1, false
			}
			at = v
		}
		if check != nil && !check(string(k), b[v:vend]) {
			return -1, false
		}
		i = skipWS(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return at, true
}

func isObject(b []byte, i int) bool { return i >= 0 && i < len(b) && b[i] == '{' }

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the value at b[i] of valid JSON.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			i = stringEnd(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// stringEnd returns the index just past the string at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for i++; ; i++ {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		n := 0 // the backslashes before the quote: an odd count escapes it
		for n < i && b[i-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
	}
}

// depthOf is the deepest nesting of b (valid JSON), counted as the SDK's
// decoder counts it.
func depthOf(b []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i) - 1
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}
