package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
// holding "1" and the client's initialize params (at most maxParams bytes),
// or "0" once the session ended (DELETE): a tombstone, so that a replica
// that still holds the session closes it and answers 404. Every key expires
// after the idle timeout, renewed by each request on any replica (one
// GETEX, which also tells whether the session still exists).
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	v, err := s.client.GetEx(ctx, s.key(id), s.ttl).Bytes()
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

// encodeParams is the initialize params as kept in Redis, bounded by
// maxParams.
func encodeParams(p *sdk.InitializeParams) []byte {
	b, err := json.Marshal(p)
	if err == nil && len(b) <= maxParams {
		return b
	}
	small := &sdk.InitializeParams{ProtocolVersion: p.ProtocolVersion, Capabilities: &sdk.ClientCapabilities{}}
	if p.ClientInfo != nil {
		small.ClientInfo = &sdk.Implementation{Name: truncate(p.ClientInfo.Name, 256), Version: truncate(p.ClientInfo.Version, 256)}
	}
	b, _ = json.Marshal(small)
	return b
}

// minimalParams are the params of a session Redis lost, from what its
// requests still say: the protocol version.
func minimalParams(version string) []byte {
	if version == "" {
		version = "2025-03-26" // the SDK's assumption for a request without the header
	}
	b, _ := json.Marshal(&sdk.InitializeParams{ProtocolVersion: version, Capabilities: &sdk.ClientCapabilities{},
		ClientInfo: &sdk.Implementation{Name: "unknown", Version: "0"}})
	return b
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
		if perr := h.shared.put(ctx, ir.Session.ID(), encodeParams(ir.Params)); perr != nil {
			// The session works on this replica; its next request shares it.
			h.log.Warn("mcp: cannot share a new session", "err", perr)
		}
		return res, err
	}
}

// adopt starts, on this replica, the SDK session that serves the shared
// session id: an initialize with the client's own params and its
// notifications/initialized, sent to the SDK's handler as the client sent
// them to the replica that minted the id, so the SDK holds it as it holds
// its own. One adoption at a time: two requests of one session that arrive
// together adopt it once.
func (h *Handler) adopt(ctx context.Context, id string, params []byte) (string, error) {
	h.adopting.Lock()
	defer h.adopting.Unlock()
	local, ok, expired := h.table.get(id)
	if expired != nil {
		h.closeLocal(*expired)
	}
	if ok {
		return local, nil
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == "" {
		params, p.ProtocolVersion = minimalParams(""), "2025-03-26"
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
	rec, err = h.internal(ctx, local, p.ProtocolVersion, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return "", err
	}
	if rec.status/100 != 2 {
		return "", fmt.Errorf("the SDK answered the adopting notifications/initialized with %d", rec.status)
	}
	h.closeLocal(h.table.add(id, local, subjectOf(ctx))...)
	return local, nil
}

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
