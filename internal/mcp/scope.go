package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/jsonscan"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// needsWrite reports whether r, a POST whose body readRequest is about to
// read, must be held to the write scope: with identities, when its token
// lacks it (docs/identity.md, "Scopes").
func needsWrite(r *http.Request) (identity.Principal, bool) {
	p, ok := identity.FromContext(r.Context())
	return p, ok && !p.Has(identity.ScopeWrite)
}

// callsWritingTool reports whether body, a POST to /mcp, may call a tool
// that writes, read as the SDK will read it: keys matched exactly, escapes
// applied (its decoder, segmentio/encoding without case folding, takes the
// last of a key given twice and ignores what follows the first value).
// What cannot be read unambiguously that way counts as such a call, so it
// needs the write scope: a body that is not one valid JSON value, and a
// message whose method, params or name is given twice or could hide behind
// a key written with escapes. Anything else the SDK refuses runs nothing.
func callsWritingTool(body []byte) bool {
	if !jsonscan.Valid(body) {
		return true
	}
	i := jsonscan.SkipSpace(body, 0)
	if body[i] != '[' {
		return messageWrites(body, i)
	}
	for at := range jsonscan.Elements(body, i) {
		if messageWrites(body, at) {
			return true
		}
	}
	return false
}

// messageWrites reports callsWritingTool for the message at b[i].
func messageWrites(b []byte, i int) bool {
	if !isObject(b, i) {
		return false // not a message
	}
	m, clear := field(b, i, "method", nil)
	if !clear {
		return true
	}
	if method, ok := stringAt(b, m); !ok || method != "tools/call" {
		return false
	}
	p, clear := field(b, i, "params", nil)
	if !clear {
		return true
	}
	if !isObject(b, p) {
		return false // a call without params names no tool
	}
	n, clear := field(b, p, "name", nil)
	if !clear {
		return true
	}
	name, ok := stringAt(b, n)
	return ok && tools.Writes(name)
}

// stringAt is the JSON string at b[i] (valid JSON) with its escapes
// applied; false for another value or none (i < 0).
func stringAt(b []byte, i int) (string, bool) {
	if i < 0 || b[i] != '"' {
		return "", false
	}
	raw := b[i:jsonscan.StringEnd(b, i)]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// deny answers a request refused for its token's scope: through
// Config.Deny (the server's one problem writer) when set, else as a
// JSON-RPC error; with the challenge either way.
func (h *Handler) deny(w http.ResponseWriter, r *http.Request, d *identity.Denial) {
	if h.denyWith != nil {
		h.denyWith(w, r, d)
		return
	}
	d.SetChallenge(w)
	writeRPCError(w, d.Status, d.Message)
}
