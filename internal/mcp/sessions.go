package mcp

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionTable bounds the MCP sessions of the stateful handler, whose own
// table is bounded only in time (SessionTimeout): past max, the least
// recently used session is closed (its client gets 404 and starts a new
// one, as the transport specification says), like the policy's own store
// (docs/mcp.md, "Sessions").
type sessionTable struct {
	mu    sync.Mutex
	max   int
	order *list.List // of session ids, most recently used first
	at    map[string]*list.Element
}

func newSessionTable(max int) *sessionTable {
	return &sessionTable{max: max, order: list.New(), at: map[string]*list.Element{}}
}

// add records a new session and returns the one to close, if any ("").
func (t *sessionTable) add(id string) (evict string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.at[id]; ok {
		t.order.MoveToFront(e)
		return ""
	}
	t.at[id] = t.order.PushFront(id)
	if t.order.Len() <= t.max {
		return ""
	}
	last := t.order.Back()
	t.order.Remove(last)
	evict = last.Value.(string)
	delete(t.at, evict)
	return evict
}

// touch counts a request of a known session as use.
func (t *sessionTable) touch(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.at[id]; ok {
		t.order.MoveToFront(e)
	}
}

func (t *sessionTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.at[id]; ok {
		t.order.Remove(e)
		delete(t.at, id)
	}
}

// serveStateful serves a request of a revision with MCP sessions and keeps
// the table: a new session is added (closing the least recently used past
// the bound), a request of a known one touches it, a DELETE ends it and
// forgets its policy session.
func (h *Handler) serveStateful(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(headerSessionID)
	h.stateful.ServeHTTP(w, r)
	switch {
	case id == "":
		if created := w.Header().Get(headerSessionID); created != "" {
			if old := h.table.add(created); old != "" {
				h.end(old)
			}
		}
	case r.Method == http.MethodDelete:
		h.table.remove(id)
		h.x.ForgetSession(derive(id))
	default:
		h.table.touch(id)
	}
}

// end closes an MCP session and forgets its policy session: its client
// starts a new MCP session, so no call can use it again.
func (h *Handler) end(id string) {
	for s := range h.srv.Sessions() {
		if s.ID() == id {
			s.Close()
		}
	}
	h.x.ForgetSession(derive(id))
}

// Close closes every MCP session, which ends their GET streams: a server
// shutting down calls it (http.Server.RegisterOnShutdown) so that draining
// does not wait for streams that never end on their own.
func (h *Handler) Close() {
	for s := range h.srv.Sessions() {
		s.Close()
	}
}

const headerSessionID = "Mcp-Session-Id"

// sessionOf derives the policy session of an MCP session (derive); ""
// without one (the sessionless revisions).
func sessionOf(s *sdk.ServerSession) string {
	if s == nil {
		return ""
	}
	return derive(s.ID())
}

// derive is the policy session of the MCP session id: "mcp-" and 32 hex
// digits of its SHA-256, stable for that MCP session and a valid session id
// whatever the SDK mints. The hash keeps the Mcp-Session-Id, which lets its
// holder speak in that session, out of logs and anything else that shows
// session ids. "" derives "".
func derive(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return "mcp-" + hex.EncodeToString(sum[:16])
}
