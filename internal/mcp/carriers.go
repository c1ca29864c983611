package mcp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// headerCarrier names, on a POST as the SDK hands its headers to a tool
// call, the request that carries the call. Set here only: a client's own
// value is replaced or removed before the SDK sees the request.
const headerCarrier = "X-Toolfs-Mcp-Carrier"

// errCarrierGone is the cause of a call cancelled because the HTTP request
// that carried it ended.
var errCarrierGone = errors.New("the HTTP request carrying the call ended")

// carriers ties each tool call to the HTTP request that carried it: to the
// request's answer budget (docs/mcp.md, "Limits") and to its end. The SDK
// runs a call of a stateful session on the session's context, which
// outlives the request; with JSON answers and no event store nobody can
// receive the answer once the request is gone, so the call (and a pending
// approval it waits for) ends with it (docs/mcp.md, "Cancellation"). The
// sessionless revision's calls end with their request anyway. An entry
// lives exactly as long as its request.
type carriers struct {
	mu   sync.Mutex
	next uint64
	open map[string]carrier
}

// carrier is one request: its context, cancelled too when its answers pass
// their budget, and the budget.
type carrier struct {
	ctx     context.Context
	answers *budget
	args    []byte       // of its one tools/call, when lifted out of its body
	texts   *held        // its answers' texts, encoded once (held)
	trace   *tools.Trace // the trace id its access log line names
}

func newCarriers() *carriers { return &carriers{open: map[string]carrier{}} }

// carry registers r as a carrier with its budget, the arguments lifted out
// of its body (nil: none) and the texts its answers hold, names it in r's
// headers, and returns the function that forgets it once r is served.
func (c *carriers) carry(r *http.Request, answers *budget, args []byte, texts *held) (forget func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	answers.cancel = cancel
	c.mu.Lock()
	c.next++
	ref := strconv.FormatUint(c.next, 10)
	c.open[ref] = carrier{ctx: ctx, answers: answers, args: args, texts: texts, trace: tools.TraceOf(r.Context())}
	c.mu.Unlock()
	r.Header.Set(headerCarrier, ref)
	return func() {
		c.mu.Lock()
		delete(c.open, ref)
		c.mu.Unlock()
		cancel(errCarrierGone)
	}
}

// bind returns ctx, cancelled also when the request named in header ends or
// passes its budget (at once when it already has), and that request's
// carrier: its budget, lifted arguments and held texts. Without a name ctx
// is returned as it is, with an empty carrier (no budget, nothing held).
func (c *carriers) bind(ctx context.Context, header http.Header) (context.Context, carrier, context.CancelFunc) {
	ref := header.Get(headerCarrier)
	if ref == "" {
		return ctx, carrier{}, func() {}
	}
	c.mu.Lock()
	e, ok := c.open[ref]
	c.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	if !ok {
		cancel(errCarrierGone)
		return ctx, carrier{}, func() {}
	}
	stop := context.AfterFunc(e.ctx, func() {
		if cause := context.Cause(e.ctx); errors.Is(cause, errOverBudget) {
			cancel(cause)
		} else {
			cancel(errCarrierGone)
		}
	})
	return ctx, e, func() { stop(); cancel(nil) }
}
