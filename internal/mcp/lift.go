package mcp

import (
	"bytes"

	"github.com/toolfs/toolfs-api/internal/jsonscan"
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
	if !jsonscan.Valid(body) || jsonscan.Depth(body) >= sdkDepth {
		return nil, nil, false
	}
	call := false
	params, ok := member(body, jsonscan.SkipSpace(body, 0), "params", func(key string, v []byte) bool {
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
	end := jsonscan.ValueEnd(body, at)
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
	if !isObject(b, i) {
		return -1, false
	}
	at = -1
	for m := range jsonscan.Members(b, i) {
		k := m.Key[1 : len(m.Key)-1]
		if bytes.IndexByte(k, '\\') >= 0 {
			return -1, false
		}
		if string(k) == key {
			if at >= 0 {
				return -1, false
			}
			at = m.At
		}
		if check != nil && !check(string(k), b[m.At:m.End]) {
			return -1, false
		}
	}
	return at, true
}

func isObject(b []byte, i int) bool { return i >= 0 && i < len(b) && b[i] == '{' }
