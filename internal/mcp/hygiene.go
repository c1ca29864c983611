package mcp

import (
	"context"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfs/toolfs-api/internal/jsonscan"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// The 2026-07-28 revision's hygiene (docs/mcp.md, "Cache hints, headers
// and traces"). The SDK checks Mcp-Method and Mcp-Name against the body
// itself (400, -32020); this file holds what the server decides.

// listTTL is the ttlMs of tools/list and server/discover: what they list
// changes only with a restart, so a client may keep it this long.
const listTTL = 5 * time.Minute

// setCacheable gives every cacheable result listTTL, and the scope
// "private" when the request carried a credential (what a token sees may
// differ from another's; docs/identity.md), else "public".
func setCacheable(_ context.Context, req sdk.Request, c *sdk.Cacheable) {
	c.TTLMs = int(listTTL / time.Millisecond)
	c.CacheScope = "public"
	if extra := req.GetExtra(); extra != nil && (extra.TokenInfo != nil || extra.Header.Get("Authorization") != "") {
		c.CacheScope = "private"
	}
}

// metaTraceparent is the _meta member a 2026-07-28 request carries its
// caller's W3C trace context in.
const metaTraceparent = "traceparent"

// metaTracestate is the _meta member of the vendor state that goes with
// metaTraceparent.
const metaTracestate = "tracestate"

// callTraceparent is the W3C trace context of a tools/call: its _meta
// traceparent (with the _meta tracestate) when valid, else the HTTP
// request's traceparent header (with the tracestate header) when valid,
// else none.
func callTraceparent(req *sdk.CallToolRequest, header http.Header) (traceparent, tracestate string) {
	if req.Params != nil {
		if v, ok := req.Params.Meta[metaTraceparent].(string); ok && tools.TraceID(v) != "" {
			state, _ := req.Params.Meta[metaTracestate].(string)
			return v, state
		}
	}
	if v := header.Get(tools.TraceparentHeader); tools.TraceID(v) != "" {
		return v, header.Get(tools.TracestateHeader)
	}
	return "", ""
}

// bodyTraceID is the trace id of params._meta.traceparent in one JSON-RPC
// message (not a batch), read before the SDK reads it, for the request's
// access log line; "" for none. Only the members on the way are scanned,
// and only in valid JSON (the scans assume it).
func bodyTraceID(b []byte) string {
	if !jsonscan.Valid(b) {
		return ""
	}
	at := jsonscan.SkipSpace(b, 0)
	for _, key := range []string{`"params"`, `"_meta"`, `"` + metaTraceparent + `"`} {
		next := -1
		for m := range jsonscan.Members(b, at) {
			if string(m.Key) == key {
				next = m.At
			}
		}
		if next < 0 {
			return ""
		}
		at = next
	}
	// A traceparent is 55 characters of hex and dashes: no escapes to read.
	end := jsonscan.ValueEnd(b, at)
	if end > len(b) || end-at < 2 || end-at > 64 || b[at] != '"' || b[end-1] != '"' {
		return ""
	}
	return tools.TraceID(string(b[at+1 : end-1]))
}
