package tools

import (
	"context"
	"sync/atomic"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// TraceparentHeader is the W3C Trace Context header a caller's trace comes
// in (docs/running.md, "Traces in the logs"); over MCP the same value may
// come as the traceparent member of a request's _meta.
const TraceparentHeader = "traceparent"

// Span is what the executor tells a call's trace span (internal/telemetry
// makes it, the transport starts and ends it): an interface here, so the
// executor depends on no tracing SDK or exporter.
type Span interface {
	// Outcome is the call's tool, the code of its failure ("" on
	// success) and its session's key ("" for none).
	Outcome(tool string, failure fault.Code, session string)
	// Read adds bytes of file content the answer carries.
	Read(n int64)
	// Wrote adds bytes of new contents a change wrote.
	Wrote(n int64)
}

// TracestateHeader is the W3C Trace Context header of the caller's vendor
// state, carried into a trace span beside its traceparent.
const TracestateHeader = "tracestate"

// TraceID is the trace id of a W3C traceparent value
// (version-traceid-parentid-flags, lowercase hex), "" when v is not one:
// a malformed value, version ff, or an all-zero trace or parent id is
// ignored, as the recommendation says, so a log line never holds a
// caller's arbitrary text.
func TraceID(v string) string {
	// 2 + 1 + 32 + 1 + 16 + 1 + 2; a later version may append fields
	// after a dash.
	if len(v) < 55 || len(v) > 55 && (v[:2] == "00" || v[55] != '-') {
		return ""
	}
	if v[2] != '-' || v[35] != '-' || v[52] != '-' || v[:2] == "ff" {
		return ""
	}
	for _, part := range []string{v[:2], v[3:35], v[36:52], v[53:55]} {
		if !lowerHex(part) {
			return ""
		}
	}
	if allZero(v[3:35]) || allZero(v[36:52]) {
		return ""
	}
	return v[3:35]
}

func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := range len(s) {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// Trace is the trace id of one HTTP request as its access log line names
// it: the traceparent header's, or, without one, the first a transport
// finds inside the request (an MCP _meta). Safe for concurrent use.
type Trace struct{ id atomic.Pointer[string] }

// Note keeps id as the request's trace id unless it has one already.
func (t *Trace) Note(id string) {
	if t != nil && id != "" {
		// A new string header here, not &id: taking id's address would
		// move it to the heap on every call, trace or not.
		p := new(string)
		*p = id
		t.id.CompareAndSwap(nil, p)
	}
}

// ID is the request's trace id, "" for none.
func (t *Trace) ID() string {
	if t == nil {
		return ""
	}
	if p := t.id.Load(); p != nil {
		return *p
	}
	return ""
}

type traceKey struct{}
type traceIDKey struct{}

// WithTrace is ctx carrying a new Trace for its request's access log line.
func WithTrace(ctx context.Context) (context.Context, *Trace) {
	t := &Trace{}
	return context.WithValue(ctx, traceKey{}, t), t
}

// TraceOf is the request's Trace ctx carries, nil for none.
func TraceOf(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// WithTraceID is ctx carrying the trace id of one call, which its audit
// records name; it wins over the request's.
func WithTraceID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, traceIDKey{}, id)
}

// TraceIDOf is the trace id of the call ctx runs: its own, else its
// request's, "" for none.
func TraceIDOf(ctx context.Context) string {
	if id, _ := ctx.Value(traceIDKey{}).(string); id != "" {
		return id
	}
	return TraceOf(ctx).ID()
}
