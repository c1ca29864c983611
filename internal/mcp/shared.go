package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
)

// sharedSessions keeps the MCP sessions of the revisions that have them in
// Redis, so that any replica serves any of them (docs/mcp.md, "Sessions
// across replicas"). One key per session, under the prefix:
//
//	mcp:<32 hex digits of the id's SHA-256>
//
// holding "1" and the client's initialize params (at most maxParams bytes)
// with the digest of the subject that opened the session in their _meta
// (ownerKey), or "0" once the session ended (DELETE): a tombstone, so that
// a replica that still holds the session closes it and answers 404. Every
// key expires after the idle timeout, renewed by each request of the
// session's own subject on any replica (one GETEX, which also tells whether
// the session still exists).
type sharedSessions struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// maxParams bounds the initialize params kept per session; larger ones are
// kept as their protocol version and client name only (the server uses
// nothing else of them).
const maxParams = 4096

// sharedTimeout bounds one Redis call of a request.
const sharedTimeout = 2 * time.Second

type sessionState int

const (
	sessionLive sessionState = iota
	sessionMissing
	sessionEnded
)

func (s *sharedSessions) key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + "mcp:" + hex.EncodeToString(sum[:16])
}

// put shares a live session with its params.
func (s *sharedSessions) put(ctx context.Context, id string, params []byte) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	return s.client.Set(ctx, s.key(id), append([]byte("1"), params...), s.ttl).Err()
}

// touch renews the session's expiry and gives its params and state.
func (s *sharedSessions) touch(ctx context.Context, id string) ([]byte, sessionState, error) {
	return s.get(ctx, id, true)
}

// peek gives the session's params and state, leaving its expiry: a request
// whose subject is not yet known to be the session's own renews nothing.
func (s *sharedSessions) peek(ctx context.Context, id string) ([]byte, sessionState, error) {
	return s.get(ctx, id, false)
}

func (s *sharedSessions) get(ctx context.Context, id string, renew bool) ([]byte, sessionState, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	var cmd *redis.StringCmd
	if renew {
		cmd = s.client.GetEx(ctx, s.key(id), s.ttl)
	} else {
		cmd = s.client.Get(ctx, s.key(id))
	}
	v, err := cmd.Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, sessionMissing, nil
	case err != nil:
		return nil, 0, err
	case len(v) == 0 || v[0] != '1':
		return nil, sessionEnded, nil
	}
	return v[1:], sessionLive, nil
}

// end leaves a tombstone for the rest of the session's expiry. A failure
// is only logged by the caller's replica's next touch: the session then
// lives on until its expiry.
func (s *sharedSessions) end(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	return s.client.Set(ctx, s.key(id), "0", s.ttl).Err()
}

// ownerKey names, in the _meta of a shared session's params, the digest of
// the subject that opened it (ownerOf): a replica that adopts the session
// binds it to that subject, never to whoever brings the id there
// (docs/identity.md, "MCP sessions"). It rides in the params so that a
// replica of an earlier release, which replays them to its SDK as they
// are, still reads the record.
const ownerKey = "toolfs/owner"

// ownerOf is what a shared session keeps of its subject: a fixed-size
// digest, whatever the subject's length, and never the subject itself; ""
// for none (no identities, or the static --token).
func ownerOf(subject string) string {
	if subject == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(subject))
	return hex.EncodeToString(sum[:12])
}

// encodeParams is the initialize params as kept in Redis, with the owner's
// digest, bounded by maxParams.
func encodeParams(p *sdk.InitializeParams, owner string) []byte {
	q := *p
	q.Meta = maps.Clone(p.Meta)
	if q.Meta == nil {
		q.Meta = sdk.Meta{}
	}
	q.Meta[ownerKey] = owner
	b, err := json.Marshal(&q)
	if err == nil && len(b) <= maxParams {
		return b
	}
	small := &sdk.InitializeParams{Meta: sdk.Meta{ownerKey: owner}, ProtocolVersion: p.ProtocolVersion, Capabilities: &sdk.ClientCapabilities{}}
	if p.ClientInfo != nil {
		small.ClientInfo = &sdk.Implementation{Name: truncate(p.ClientInfo.Name, 256), Version: truncate(p.ClientInfo.Version, 256)}
	}
	b, _ = json.Marshal(small)
	return b
}

// minimalParams are the params of a session Redis lost, from what its
// requests still say: the protocol version; and the owner's digest.
func minimalParams(version, owner string) []byte {
	if version == "" {
		version = "2025-03-26" // the SDK's assumption for a request without the header
	}
	return encodeParams(&sdk.InitializeParams{ProtocolVersion: version, Capabilities: &sdk.ClientCapabilities{},
		ClientInfo: &sdk.Implementation{Name: "unknown", Version: "0"}}, owner)
}

// record is what a replica reads of a shared session's params: the
// protocol version ("" when unreadable) and the owner's digest; known is
// false for a record an earlier release wrote, which names no owner.
type record struct {
	version string
	owner   string
	known   bool
}

func readRecord(params []byte) record {
	var p struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Meta            map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return record{}
	}
	r := record{version: p.ProtocolVersion}
	if raw, ok := p.Meta[ownerKey]; ok { // a map's keys match exactly, unlike a struct's
		r.known = json.Unmarshal(raw, &r.owner) == nil
	}
	return r
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// shareInitialize puts each session an initialize starts in Redis before
// its answer leaves, so that the client's next request, whichever replica
// it reaches, finds it. A session adopted from Redis is not put again.
func (h *Handler) shareInitialize(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		ir, ok := req.(*sdk.ServerRequest[*sdk.InitializeParams])
		if !ok || err != nil || h.shared == nil || ir.Session == nil || ir.Session.ID() == "" || ir.Params == nil {
			return res, err
		}
		if ir.Extra != nil && ir.Extra.Header.Get(headerAdopt) != "" {
			return res, err
		}
		var subject string
		if ir.Extra != nil && ir.Extra.TokenInfo != nil {
			subject = ir.Extra.TokenInfo.UserID
		}
		if perr := h.shared.put(ctx, ir.Session.ID(), encodeParams(ir.Params, ownerOf(subject))); perr != nil {
			// The session works on this replica; its next request shares it.
			h.log.Warn("mcp: cannot share a new session", "err", perr)
		}
		return res, err
	}
}

// adopt starts, on this replica, the SDK session that serves the shared
// session id for subject, whose record resolve has checked: an initialize
// with the client's own params and its notifications/initialized, sent to
// the SDK's handler as the client sent them to the replica that minted the
// id, so the SDK holds it as it holds its own, bound to subject (ctx
// carries its TokenInfo). One adoption at a time: two requests of one
// session that arrive together adopt it once; errForeign when another
// subject's request adopted it first (a record of an earlier release names
// no owner).
func (h *Handler) adopt(ctx context.Context, id, subject string, params []byte) (string, error) {
	h.adopting.Lock()
	defer h.adopting.Unlock()
	local, found, expired := h.table.get(id, subject)
	if expired != nil {
		h.closeLocal(*expired)
	}
	switch found {
	case lookupFound:
		return local, nil
	case lookupForeign:
		return "", errForeign
	}
	version := readRecord(params).version
	if version == "" {
		params, version = minimalParams("", ownerOf(subject)), "2025-03-26"
	}
	body := append(append([]byte(`{"jsonrpc":"2.0","id":"toolfs-adopt","method":"initialize","params":`), params...), '}')
	rec, err := h.internal(ctx, "", "", body)
	if err != nil {
		return "", err
	}
	local = rec.header.Get(headerSessionID)
	if rec.status != http.StatusOK || local == "" {
		return "", fmt.Errorf("the SDK answered the adopting initialize with %d: %s", rec.status, truncate(rec.body.String(), 256))
	}
	rec, err = h.internal(ctx, local, version, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return "", err
	}
	if rec.status/100 != 2 {
		return "", fmt.Errorf("the SDK answered the adopting notifications/initialized with %d", rec.status)
	}
	h.closeLocal(h.table.add(id, local, subject)...)
	return local, nil
}

// errForeign refuses a request in an MCP session of another subject.
var errForeign = errors.New("the MCP session belongs to another subject")

// internal sends one message of an adoption to the SDK's stateful handler.
func (h *Handler) internal(ctx context.Context, session, version string, body []byte) (*recorded, error) {
	r, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, "/mcp", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set(headerAdopt, "1")
	if session != "" {
		r.Header.Set(headerSessionID, session)
		r.Header.Set("MCP-Protocol-Version", version)
	}
	rec := &recorded{header: http.Header{}, status: http.StatusOK}
	h.stateful.ServeHTTP(rec, r)
	return rec, nil
}

// recorded is the answer to an internal request.
type recorded struct {
	mu     sync.Mutex
	header http.Header
	status int
	wrote  bool
	body   strings.Builder
}

func (r *recorded) Header() http.Header { return r.header }

func (r *recorded) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}

func (r *recorded) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wrote = true
	if r.body.Len() < 4096 {
		r.body.Write(p)
	}
	return len(p), nil
}
