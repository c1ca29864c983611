package mcp

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// subjectOf is the verified subject of a request, as the go-sdk's
// auth.RequireBearerToken put it in the context (docs/identity.md); ""
// without identities.
func subjectOf(ctx context.Context) string {
	if ti := auth.TokenInfoFromContext(ctx); ti != nil {
		return ti.UserID
	}
	return ""
}

// sessionTable is this process's MCP sessions of the revisions that have
// them: each public Mcp-Session-Id (the one its client holds) with the id
// of the SDK session that serves it here. A session minted here has the
// same id on both sides; one minted by another replica and adopted here
// (docs/mcp.md, "Sessions across replicas") has the local SDK session's
// own. The table is bounded: past max the least recently used entry goes,
// and an entry idle for the timeout goes when next seen, like the policy's
// own store (docs/mcp.md, "Sessions").
type sessionTable struct {
	mu    sync.Mutex
	max   int
	idle  time.Duration
	now   func() time.Time
	order *list.List // of *tableEntry, most recently used first
	at    map[string]*list.Element
}

type tableEntry struct {
	public, local string
	// subject is the verified subject that opened the session ("" without
	// identities): its policy session is that subject's (docs/identity.md).
	subject string
	used    time.Time
}

func newSessionTable(max int, idle time.Duration) *sessionTable {
	return &sessionTable{max: max, idle: idle, now: time.Now, order: list.New(), at: map[string]*list.Element{}}
}

// add records a session and returns the entries to close: the least
// recently used past the bound.
func (t *sessionTable) add(public, local, subject string) (evicted []tableEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.at[public]; ok {
		en := e.Value.(*tableEntry)
		if en.local != local {
			evicted = append(evicted, *en)
		}
		en.local, en.subject, en.used = local, subject, t.now()
		t.order.MoveToFront(e)
		return evicted
	}
	t.at[public] = t.order.PushFront(&tableEntry{public: public, local: local, subject: subject, used: t.now()})
	for t.order.Len() > t.max {
		last := t.order.Back()
		en := last.Value.(*tableEntry)
		t.order.Remove(last)
		delete(t.at, en.public)
		evicted = append(evicted, *en)
	}
	return evicted
}

// lookup is what the table holds of a public id for a request's subject.
type lookup int

const (
	lookupAbsent  lookup = iota
	lookupFound          // the subject's own session
	lookupForeign        // another subject's: the request must change nothing
)

// get returns the local id of public for a request of subject and counts
// the request as use. An entry idle past the timeout is removed and
// returned as expired. Another subject's entry is left as it was.
func (t *sessionTable) get(public, subject string) (local string, found lookup, expired *tableEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.at[public]
	if !ok {
		return "", lookupAbsent, nil
	}
	en := e.Value.(*tableEntry)
	if t.now().Sub(en.used) >= t.idle {
		t.order.Remove(e)
		delete(t.at, public)
		return "", lookupAbsent, en
	}
	if en.subject != subject {
		return "", lookupForeign, nil
	}
	en.used = t.now()
	t.order.MoveToFront(e)
	return en.local, lookupFound, nil
}

// touch counts the end of a request as use: a call that ran for longer
// than the timeout does not leave its session idle.
func (t *sessionTable) touch(public string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.at[public]; ok {
		e.Value.(*tableEntry).used = t.now()
	}
}

func (t *sessionTable) remove(public string) (local string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.at[public]
	if !ok {
		return "", false
	}
	t.order.Remove(e)
	delete(t.at, public)
	return e.Value.(*tableEntry).local, true
}

// headerPublic names, on a request as the SDK hands its headers to a tool
// call, the public Mcp-Session-Id of the request's session, which derives
// the policy session; headerAdopt marks the initialize by which a replica
// adopts a session another one minted. Both are set here only: a client's
// own values are removed before the SDK sees the request.
const (
	headerPublic = "X-Toolfs-Mcp-Session"
	headerAdopt  = "X-Toolfs-Mcp-Adopt"
)

// serveStateful serves a request of a revision with MCP sessions. Without
// an Mcp-Session-Id the SDK starts a session (an initialize) and the table
// records it. With one, the id is resolved to the local SDK session
// (adopting one that another replica minted, when the sessions are
// shared), the SDK serves the request under the local id, and the answer
// carries the public one again. A DELETE ends the session everywhere and
// forgets its policy session. A request of another subject than the one
// that opened the session is refused before anything changes
// (docs/identity.md, "MCP sessions").
func (h *Handler) serveStateful(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(headerPublic)
	r.Header.Del(headerAdopt)
	id := r.Header.Get(headerSessionID)
	if id == "" {
		h.stateful.ServeHTTP(w, r)
		if created := w.Header().Get(headerSessionID); created != "" {
			h.closeLocal(h.table.add(created, created, subjectOf(r.Context()))...)
		}
		return
	}
	if r.Method == http.MethodGet && h.shared != nil {
		// No standalone stream when the sessions are shared: it would live
		// on one replica and die with it, and the SDK clients end the whole
		// session when reconnecting it fails or it broke five times; this
		// server sends nothing on it (docs/mcp.md, "Sessions across
		// replicas"). 405 is the transport's "no stream offered".
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "Method Not Allowed: this server offers no standalone stream", http.StatusMethodNotAllowed)
		return
	}
	local, answer := h.resolve(r.Context(), id, r.Header.Get("MCP-Protocol-Version"))
	if answer != nil {
		answer(w)
		return
	}
	r.Header.Set(headerSessionID, local)
	r.Header.Set(headerPublic, id)
	rw := &renamer{ResponseWriter: w, local: local, public: id}
	h.stateful.ServeHTTP(rw, r)
	rw.fix()
	if r.Method == http.MethodDelete {
		if rw.status == http.StatusForbidden { // the SDK's own owner check, behind ours
			return
		}
		h.table.remove(id)
		if h.shared != nil {
			h.shared.end(r.Context(), id)
		}
		h.x.ForgetSession(tools.Call{Session: derive(id), Subject: subjectOf(r.Context())})
		return
	}
	h.table.touch(id)
}

// resolve gives the local SDK session of the public id for the request's
// subject, or the answer to send instead: 403 for another subject's session
// (checked before anything of the session changes: its use, its expiry,
// an adoption), 404 for a session that does not exist (any more), 503 when
// an adoption fails or, with identities, when Redis cannot say whose the
// session is (a client keeps its session through a 503, and drops it on a
// 404).
func (h *Handler) resolve(ctx context.Context, id, version string) (local string, answer func(http.ResponseWriter)) {
	subject := subjectOf(ctx)
	local, found, expired := h.table.get(id, subject)
	if expired != nil {
		h.closeLocal(*expired)
	}
	switch {
	case found == lookupForeign:
		return "", foreignSession
	case h.shared == nil && found == lookupAbsent:
		return "", notFound
	case h.shared == nil:
		return local, nil
	case found == lookupFound:
		return h.renew(ctx, id, version, subject, local)
	}
	params, state, err := h.shared.peek(ctx, id)
	switch {
	case err != nil && identified(ctx):
		// Whose the session is cannot be checked: adopting it would bind it
		// to whoever brought the id here.
		h.log.Warn("mcp: the shared sessions are unreachable: cannot check a session's subject", "err", err)
		return "", unavailable
	case err != nil:
		// Redis cannot say whether the session exists: it is adopted with
		// what its request says (its protocol version), so that no client
		// loses its session to an outage; once Redis answers again, a
		// tombstone still ends it and a missing key is shared again.
		h.log.Warn("mcp: the shared sessions are unreachable: adopting the session unchecked", "err", err)
		params = minimalParams(version, "")
	case state != sessionLive:
		return "", notFound
	default:
		if rec := readRecord(params); rec.known && rec.owner != ownerOf(subject) {
			return "", foreignSession
		}
	}
	local, err = h.adopt(ctx, id, subject, params)
	switch {
	case errors.Is(err, errForeign):
		return "", foreignSession
	case err != nil:
		h.log.Warn("mcp: cannot adopt a shared session", "err", err)
		return "", unavailable
	}
	h.shared.touch(ctx, id) // the expiry, now that the subject is the session's own
	return local, nil
}

// renew renews the shared expiry of a session this replica holds for its
// own subject, and follows what Redis says of it: ended elsewhere, it is
// closed here too (404); lost by Redis, it is shared again.
func (h *Handler) renew(ctx context.Context, id, version, subject, local string) (string, func(http.ResponseWriter)) {
	_, state, err := h.shared.touch(ctx, id)
	switch {
	case err != nil:
		// Reads still answer while Redis is down (docs/deployment.md).
	case state == sessionEnded:
		h.table.remove(id)
		h.closeLocal(tableEntry{public: id, local: local})
		return "", notFound
	case state == sessionMissing:
		// Redis lost it (it restarted empty, or it refused the write at
		// initialize): the session is alive here, so it is shared again.
		h.shared.put(ctx, id, minimalParams(version, ownerOf(subject)))
	}
	return local, nil
}

// identified reports whether the request came through the identities'
// auth (auth.RequireBearerToken), whose subject binds MCP sessions.
func identified(ctx context.Context) bool { return auth.TokenInfoFromContext(ctx) != nil }

// closeLocal closes the SDK sessions of the entries. Without shared
// sessions that ends them, so their policy sessions are forgotten too; with
// them the session lives on in Redis and is adopted again on its next
// request.
func (h *Handler) closeLocal(entries ...tableEntry) {
	if len(entries) == 0 {
		return
	}
	locals := map[string]bool{}
	for _, e := range entries {
		locals[e.local] = true
		if h.shared == nil {
			h.x.ForgetSession(tools.Call{Session: derive(e.public), Subject: e.subject})
		}
	}
	for s := range h.srv.Sessions() {
		if locals[s.ID()] {
			s.Close()
		}
	}
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

// notFound is the SDK's own answer to an unknown session.
func notFound(w http.ResponseWriter) { http.Error(w, "session not found", http.StatusNotFound) }

// foreignSession refuses a request in another subject's MCP session.
func foreignSession(w http.ResponseWriter) { forbidden(w, errForeign.Error()) }

// unavailable answers 503 with a JSON-RPC error: the client keeps its
// session and retries.
func unavailable(w http.ResponseWriter) {
	writeRPCError(w, http.StatusServiceUnavailable, "this replica cannot take over the MCP session now; retry shortly")
}

// renamer is what the SDK answers a request of an adopted session through:
// the SDK names its local session in Mcp-Session-Id, the client knows the
// public id.
type renamer struct {
	http.ResponseWriter
	local, public string
	once          sync.Once
	status        int // as the SDK answered; 0 until it writes
}

func (w *renamer) fix() {
	w.once.Do(func() {
		if w.local != w.public && w.Header().Get(headerSessionID) == w.local {
			w.Header().Set(headerSessionID, w.public)
		}
	})
}

func (w *renamer) WriteHeader(code int) {
	w.fix()
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *renamer) Write(p []byte) (int, error) {
	w.fix()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *renamer) Flush() { w.fix(); http.NewResponseController(w.ResponseWriter).Flush() }

func (w *renamer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sessionOf derives the policy session of a call's MCP session (derive)
// from its public id; "" without one (the sessionless revisions).
func sessionOf(header http.Header, s *sdk.ServerSession) string {
	if id := header.Get(headerPublic); id != "" {
		return derive(id)
	}
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
