package mcp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
)

// headerCarrier names, on a stateful POST as the SDK hands its headers to a
// tool call, the request that carries the call. Set here only: a client's
// own value is replaced or removed before the SDK sees the request.
const headerCarrier = "X-Toolfs-Mcp-Carrier"

// errCarrierGone is the cause of a call cancelled because the HTTP request
// that carried it ended.
var errCarrierGone = errors.New("the HTTP request carrying the call ended")

// carriers ties each tool call of a stateful MCP session to the HTTP
// request that carried it. The SDK runs such a call on the session's
// context, which outlives the request; with JSON answers and no event store
// nobody can receive the answer once the request is gone, so the call (and
// a pending approval it waits for) ends with it (docs/mcp.md,
// "Cancellation"). An entry lives exactly as long as its request.
type carriers struct {
	mu   sync.Mutex
	next uint64
	open map[string]context.Context
}

func newCarriers() *carriers { return &carriers{open: map[string]context.Context{}} }

// carry registers r as a carrier, names it in r's headers, and returns the
// function that forgets it once r is served.
func (c *carriers) carry(r *http.Request) (forget func()) {
	c.mu.Lock()
	c.next++
	ref := strconv.FormatUint(c.next, 10)
	c.open[ref] = r.Context()
	c.mu.Unlock()
	r.Header.Set(headerCarrier, ref)
	return func() {
		c.mu.Lock()
		delete(c.open, ref)
		c.mu.Unlock()
	}
}

// bind returns ctx, cancelled also when the request named in header ends
// (at once when it already has). Without a name (the sessionless handler,
// which ties calls to their request itself) ctx is returned as it is.
func (c *carriers) bind(ctx context.Context, header http.Header) (context.Context, context.CancelFunc) {
	ref := header.Get(headerCarrier)
	if ref == "" {
		return ctx, func() {}
	}
	c.mu.Lock()
	carrier, ok := c.open[ref]
	c.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	if !ok {
		cancel(errCarrierGone)
		return ctx, func() {}
	}
	stop := context.AfterFunc(carrier, func() { cancel(errCarrierGone) })
	return ctx, func() { stop(); cancel(nil) }
}
