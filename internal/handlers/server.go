// Package handlers is the REST transport of toolfs-api: the routes of
// api/openapi.yaml (routes.go), each turned into one call of the tool
// executor (internal/tools), with the session headers, the code → status
// table, JSON and streamed bodies, auth, CORS and the Host check. It holds
// no tool logic (docs/architecture.md).
package handlers

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/telemetry"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Config is what the REST layer needs to know beyond its dependencies.
type Config struct {
	Token             string        // "" = no auth
	CORSOrigins       []string      // nil = no CORS headers at all
	MaxBodyBytes      int64         // request bodies above this get 413
	StreamWriteWindow time.Duration // each streamed chunk must reach the client within this
	// UploadPace is how fast a PUT /files body must come; the zero Pace
	// leaves the server's read timeout on uploads too.
	UploadPace Pace
	// LoopbackHosts refuses requests whose Host is not a loopback name. Set
	// it when serving on loopback without a token: it stops DNS rebinding,
	// where a web page points its own name at 127.0.0.1 and calls the API.
	LoopbackHosts bool
	// Sessions resolves each request's session from its headers
	// (--session-headers, --default-session).
	Sessions tools.Sessions
	// PublicURL is the base URL clients reach the server at, without a
	// trailing slash (--public-url): the servers entry of GET
	// /openapi.json. "" = the request's scheme and Host.
	PublicURL string
	// ApproverToken, when set, is the only bearer token that may decide
	// approvals (POST /approvals/{id}); it also lists them, and reaches
	// nothing else (docs/sandbox.md).
	ApproverToken string
	// MetricsToken, when set, is a bearer token accepted on GET /metrics
	// and nowhere else, for a scraper; /metrics then takes it or Token
	// (or, with OAuth, an access token with toolfs:read), even when Token
	// is empty (docs/running.md, "Watching it").
	MetricsToken string
	// OAuth, when set, makes the server an OAuth 2.1 resource server
	// (docs/identity.md): every route but /healthz and the metadata takes
	// an access token its verifier accepts (Token, and ApproverToken on
	// the approvals routes, still pass), with the scope the route needs.
	OAuth *identity.Guard
	// What GET /status reports besides readiness (docs/console.md):
	// the binary's version, --profile, --edit-dialect, --sandbox-mode.
	Version, Profile, Dialect, SandboxMode string
}

// Deps are what the REST layer calls.
type Deps struct {
	// Executor runs every tool call and holds the pending approvals
	// (required).
	Executor *tools.Executor
	// Metrics serves GET /metrics (required; internal/metrics).
	Metrics http.Handler
	// Logger receives the access log and panics (required).
	Logger *slog.Logger
	// MCP, when set, is served at /mcp behind the same auth, Host check,
	// CORS and body cap; it resolves sessions itself (docs/mcp.md).
	MCP    http.Handler
	Events *events.Hub // nil: GET /events answers 404 (docs/events.md)
	// Ready says whether the server can serve, and if not why, for GET
	// /readyz (docs/deployment.md, "Readiness"); nil: always ready.
	Ready func() (ok bool, reason string)
	// Sessions counts the sessions with observed state for GET /status;
	// nil, or a negative count, when the store cannot say.
	Sessions func() int
	// Console, when set, is served at /ui and under /ui/ with no token
	// (static files; the page asks for one), behind CORS and the Host
	// check (docs/console.md).
	Console http.Handler
	// Tracing makes the trace span of every call of a tool route and of
	// /files (docs/running.md, "Traces"); nil: none.
	Tracing *telemetry.Tracing
}

// NewServer builds the REST surface (routes.go): the generated routes over
// the executor, auth, CORS, the Host check, the body cap, the session
// headers, metrics, /openapi.yaml and the frontend views (/openapi.json,
// /openapi-full.json, /model/<tool>; docs/frontends.md).
func NewServer(cfg Config, deps Deps) (http.Handler, error) {
	spec, err := api.GetSpec()
	if err != nil {
		return nil, err
	}
	specJSON, err := api.SpecJSON()
	if err != nil {
		return nil, err
	}
	s := &rest{
		x: deps.Executor, cfg: cfg, deps: deps, version: spec.Info.Version, specJSON: specJSON,
		sessions: newSessionHeaders(cfg.Sessions), token: cfg.Token, approverToken: cfg.ApproverToken,
	}
	return s.routes(), nil
}
