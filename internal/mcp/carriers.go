package mcp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
)

// headerCarrier names, on a POST as the SDK hands its headers to a tool
// call, the request that carries the call. Set here only: a client's own
// value is replaced or removed before the SDK sees the request.
const headerCarrier = "X-Toolfs-Mcp-Carrier"

// errCarrierGone is the cause of a call cancelled because the HTTP request
// that carried it ended.
var errCarrierGone = errors.New("the HTTP request carrying the call ended")

// carriers ties each tool call to the HTTP request that carried it: to the
// request's answer budget (docs/mcp.md, "Limits"), and on the stateful
// revisions to its end. The SDK runs a stateful call on the session's
// context, which outlives the request; with JSON answers and no event store
// nobody can receive the answer once the request is gone, so the call (and
// a pending approval it waits for) ends with it (docs/mcp.md,
// "Cancellation"). An entry lives exactly as long as its request.
type carriers struct {
	mu   sync.Mutex
	next uint64
	open map[string]carrier
}

type carrier struct {
	// ctx is the request's context; nil on the sessionless revision, whose
	// calls the SDK ties to their request itself.
	ctx     context.Context
	answers *budget
}

func newCarriers() *carriers { return &carriers{open: map[string]carrier{}} }

// carry registers r as a carrier with its budget (its context too unless
// sessionless), names it in r's headers, and returns the function that
// forgets it once r is served.
func (c *carriers) carry(r *http.Request, sessionless bool, answers *budget) (forget func()) {
	e := carrier{ctx: r.Context(), answers: answers}
	if sessionless {
		e.ctx = nil
	}
	c.mu.Lock()
	c.next++
	ref := strconv.FormatUint(c.next, 10)
	c.open[ref] = e
	c.mu.Unlock()
	r.Header.Set(headerCarrier, ref)
	return func() {
		c.mu.Lock()
		delete(c.open, ref)
		c.mu.Unlock()
	}
}

// bind returns ctx, cancelled also when the stateful request named in
// header ends (at once when it already has), and that request's budget.
// Without a name ctx is returned as it is, with no budget.
func (c *carriers) bind(ctx context.Context, header http.Header) (context.Context, *budget, context.CancelFunc) {
	ref := header.Get(headerCarrier)
	if ref == "" {
		return ctx, nil, func() {}
	}
	c.mu.Lock()
	e, ok := c.open[ref]
	c.mu.Unlock()
	if ok && e.ctx == nil {
		return ctx, e.answers, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	if !ok {
		cancel(errCarrierGone)
		return ctx, nil, func() {}
	}
	stop := context.AfterFunc(e.ctx, func() { cancel(errCarrierGone) })
	return ctx, e.answers, func() { stop(); cancel(nil) }
}
