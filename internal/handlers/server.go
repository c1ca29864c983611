// Package handlers is the REST transport of toolfs-api: the routes
// generated from api/openapi.yaml, each turned into one call of the tool
// executor (internal/tools), with the session headers, the code → status
// table, JSON and streamed bodies, auth, CORS, the Host check and the
// Prometheus series. It holds no tool logic (docs/architecture.md).
package handlers

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/go-chi/chi/v5"
	nethttpmw "github.com/oapi-codegen/nethttp-middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/cors"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Config is what the REST layer needs to know beyond its dependencies.
type Config struct {
	Token             string        // "" = no auth
	CORSOrigins       []string      // nil = no CORS headers at all
	MaxBodyBytes      int64         // request bodies above this get 413
	StreamWriteWindow time.Duration // each streamed chunk must reach the client within this
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
}

// Deps are what the REST layer calls; every one is required.
type Deps struct {
	Executor *tools.Executor
	Metrics  *Metrics // served at /metrics
	Logger   *slog.Logger
	// MCP, when set, is served at /mcp behind the same auth, Host check,
	// CORS and body cap; it resolves sessions itself (docs/mcp.md).
	MCP    http.Handler
	Events *events.Hub // nil: GET /events answers 404 (docs/events.md)
	// Approvals are the pending sandbox escalations served at /approvals
	// (docs/sandbox.md); nil: an empty store, nothing ever pending.
	Approvals *approval.Store
}

// mcpHeaders are the request headers of MCP's Streamable HTTP transport,
// allowed by CORS; Mcp-Session-Id is also exposed (docs/mcp.md).
var mcpHeaders = []string{"Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-ID"}

// NewServer builds the REST surface: the generated routes over the
// executor, the validator for the routes without a tool body, auth, CORS,
// the Host check, the body cap, metrics, /openapi.yaml and the frontend
// views (/openapi.json, /openapi-full.json, /model/<tool>; docs/frontends.md).
func NewServer(cfg Config, deps Deps) (http.Handler, error) {
	spec, err := api.GetSpec()
	if err != nil {
		return nil, err
	}
	spec.Servers = nil // the validator would otherwise match the Host header
	specJSON, err := api.SpecJSON()
	if err != nil {
		return nil, err
	}
	version := spec.Info.Version

	if deps.Approvals == nil {
		deps.Approvals = approval.New(approval.Config{})
	}
	si := &rest{x: deps.Executor, maxBody: cfg.MaxBodyBytes, writeWindow: cfg.StreamWriteWindow,
		approvals: deps.Approvals, token: cfg.Token, approverToken: cfg.ApproverToken}
	r := chi.NewRouter()
	r.Use(accessLog(deps.Logger), modelAnswers, recoverer(deps.Logger))
	if len(cfg.CORSOrigins) > 0 {
		r.Use(cors.New(cors.Options{
			AllowedOrigins: cfg.CORSOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodDelete},
			AllowedHeaders: append(append([]string{"Authorization", "Content-Type", "Accept", tools.HeaderSessionID, tools.HeaderSessionCwd}, mcpHeaders...), cfg.Sessions.Aliases...),
			ExposedHeaders: []string{"Mcp-Session-Id"},
			MaxAge:         300,
		}).Handler)
	}
	if cfg.LoopbackHosts {
		r.Use(loopbackHosts)
	}
	r.Use(bearerAuth(cfg.Token, cfg.ApproverToken), bodyCap(cfg.MaxBodyBytes, deps.Executor), sessionHeaders(cfg.Sessions, deps.Executor))
	r.Use(nethttpmw.OapiRequestValidatorWithOptions(spec, &nethttpmw.Options{
		Options: openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, // bearerAuth did it
			MultiError:         true,
		},
		DoNotValidateServers: true,
		// A tool body is decoded once, by the executor. /metrics, /events
		// and the documents are served outside the generated code
		// (oapi-codegen prunes their operations from the embedded spec).
		// GET /tools checks its format itself, with a message naming the
		// formats.
		Skipper: func(r *http.Request) bool {
			switch {
			case r.URL.Path == mcpPath:
				return true
			case r.Method == http.MethodPost:
				// A decision's body is read by DecideApproval, with
				// its own message.
				return isTool(r.URL.Path) || isApprovals(r.URL.Path)
			case r.Method == http.MethodGet:
				switch r.URL.Path {
				case "/metrics", "/events", "/openapi.yaml", "/openapi.json", "/openapi-full.json", "/tools":
					return true
				}
			}
			return false
		},
		ErrorHandlerWithOpts: func(_ context.Context, err error, w http.ResponseWriter, r *http.Request, _ nethttpmw.ErrorHandlerOpts) {
			writeError(w, validationError(r, err))
		},
	}))

	r.Get("/metrics", promhttp.HandlerFor(deps.Metrics.Registry, promhttp.HandlerOpts{Registry: deps.Metrics.Registry}).ServeHTTP)
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(api.SpecYAML)
	})
	if deps.Events != nil {
		r.Get("/events", deps.Events.Handler(func(w http.ResponseWriter, code, message string) {
			writeProblem(w, tools.Code(code), message)
		}).ServeHTTP)
	} else {
		r.Get("/events", func(w http.ResponseWriter, r *http.Request) {
			writeProblem(w, tools.CodeNoSuchEndpoint, "no such endpoint: GET /events (the change feed is off: --events=false)")
		})
	}
	r.Get("/openapi-full.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(specJSON)
	})
	r.Get("/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		view := newToolView(deps.Executor.Catalog(), version, serverURL(cfg.PublicURL, r), cfg.Token != "")
		writeJSON(w, http.StatusOK, "application/json", view)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, tools.CodeNoSuchEndpoint, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, tools.CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
	})
	if deps.MCP != nil {
		r.Handle(mcpPath, deps.MCP)
	}
	api.HandlerWithOptions(si, api.ChiServerOptions{
		BaseRouter: r,
		// Parameter binding: sessionHeaders checked the session headers
		// already, so what is left is GET /tools' format given twice, or a
		// malformed header or path value.
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.URL.Path == "/tools" {
				writeProblem(w, tools.CodeInvalidArgument, "give format at most once: format=openai, format=anthropic or format=mcp")
				return
			}
			writeProblem(w, tools.CodeInvalidSession, "malformed session header or id: "+firstLine(err.Error()))
		},
	})
	return r, nil
}

// mcpPath is where the MCP transport is mounted.
const mcpPath = "/mcp"

// isTool reports whether path is one of the tool routes, /tools/<name> or
// /model/<name>.
func isTool(path string) bool {
	_, ok := toolOf(path)
	return ok
}

// toolOf is the tool a tool route calls.
func toolOf(path string) (string, bool) {
	name, ok := strings.CutPrefix(path, "/tools/")
	if !ok {
		name, ok = strings.CutPrefix(path, modelPrefix)
	}
	return name, ok && slices.Contains(tools.Names, name)
}

// bearerAuth requires "Authorization: Bearer <token>" on every endpoint but
// /healthz, comparing in constant time. CORS preflights never reach it. On
// the approvals endpoints the approver token passes too (which of the two
// may decide is DecideApproval's to say).
func bearerAuth(token, approverToken string) func(http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	approver := []byte("Bearer " + approverToken)
	return func(next http.Handler) http.Handler {
		if token == "" {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" || isPreflight(r) {
				next.ServeHTTP(w, r)
				return
			}
			got := []byte(r.Header.Get("Authorization"))
			ok := subtle.ConstantTimeCompare(got, want) == 1
			if !ok && approverToken != "" && isApprovals(r.URL.Path) {
				ok = subtle.ConstantTimeCompare(got, approver) == 1
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolfs-api"`)
				writeProblem(w, tools.CodeUnauthorized, "missing or wrong bearer token")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// loopbackHosts refuses a request whose Host header is not host[:port]
// naming localhost or a loopback address. A port must be digits:
// "127.0.0.1:80.evil.example" is some other name, not 127.0.0.1.
func loopbackHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			writeProblem(w, tools.CodeForbiddenHost, "host "+quote(r.Host)+" is not served: without --token this server answers only to localhost and loopback addresses")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	host, ok := splitHostPort(hostport)
	if !ok {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// splitHostPort parses a Host header as host[:port] (RFC 9110 §7.2): a
// bracketed IPv6 literal or a name without ':', then optionally ':' and at
// most five digits.
func splitHostPort(s string) (host string, ok bool) {
	rest := s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", false
		}
		host, rest = s[1:end], s[end+1:]
	} else {
		i := strings.IndexByte(s, ':')
		if i < 0 {
			i = len(s)
		}
		host, rest = s[:i], s[i:]
	}
	if host == "" {
		return "", false
	}
	if rest == "" {
		return host, true
	}
	port, ok := strings.CutPrefix(rest, ":")
	if !ok || len(port) > 5 {
		return "", false
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return "", false
		}
	}
	return host, true
}

func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// bodyCap refuses bodies above max with 413 before anything reads them
// into memory; a refused tool call still counts under its tool.
func bodyCap(max int64, x *tools.Executor) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > max {
				err := tools.NewError(tools.CodeBodyTooLarge, bodyTooLargeMessage(max))
				if tool, ok := toolOf(r.URL.Path); ok && r.Method == http.MethodPost {
					x.Refuse(tools.Call{Transport: "rest"}, tool, err)
				}
				writeError(w, err)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, max)
			next.ServeHTTP(w, r)
		})
	}
}

type callKey struct{}

func callFrom(ctx context.Context) tools.Call {
	c, _ := ctx.Value(callKey{}).(tools.Call)
	return c
}

// sessionHeaders resolves the request's session and cwd from its headers
// (docs/api.md, "Sessions"), counts the request as use of the session, and
// hands the routes a tools.Call.
func sessionHeaders(sessions tools.Sessions, x *tools.Executor) func(http.Handler) http.Handler {
	// The session headers' canonical names, worked out once: Header.Values
	// would canonicalize (and allocate) on every request.
	canonical := map[string]string{}
	for _, name := range append([]string{tools.HeaderSessionID, tools.HeaderSessionCwd}, sessions.Aliases...) {
		canonical[name] = http.CanonicalHeaderKey(name)
	}
	// A route that runs no tool touches only a session its headers name:
	// GET /metrics must not keep the default session alive.
	named := sessions
	named.Default = ""
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mcpPath { // its tool calls resolve their own
				next.ServeHTTP(w, r)
				return
			}
			start := time.Now()
			header := func(name string) []string {
				if c, ok := canonical[name]; ok {
					return r.Header[c]
				}
				return r.Header.Values(name)
			}
			tool := isTool(r.URL.Path)
			resolver := named
			if tool {
				resolver = sessions
			}
			session, cwd, err := resolver.Resolve(header, "")
			if err != nil {
				writeError(w, err)
				return
			}
			// The generated binding refuses a header sent twice; Resolve has
			// judged every value, so the binding sees the one they stand for
			// (docs/decisions.md, "A session header sent twice").
			for _, name := range []string{tools.HeaderSessionID, tools.HeaderSessionCwd} {
				if v, present := tools.HeaderValue(name, r.Header.Values(name)); present {
					r.Header.Set(name, v)
				} else {
					r.Header.Del(name)
				}
			}
			c := tools.Call{Session: session, Cwd: cwd, Transport: "rest", Start: start}
			if tool {
				// The call's first decision or record counts as this use
				// when the store can carry it (docs/performance.md §7).
				var end func()
				c, end = x.Use(c)
				defer end()
			} else if session != "" {
				x.Touch(session)
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
		})
	}
}
