// Package handlers is the HTTP layer of toolfs-api: it wires the code
// generated from api/openapi.yaml to the tool executor, and owns sessions,
// status codes, JSON and streaming bodies, validation, auth, CORS and
// metrics. It reaches files only through the fs.FileSystem seam.
package handlers

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/go-chi/chi/v5"
	nethttpmw "github.com/oapi-codegen/nethttp-middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/cors"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
)

// Config is what the HTTP layer needs to know beyond its dependencies.
type Config struct {
	Caps              render.Caps
	Token             string        // "" = no auth
	CORSOrigins       []string      // nil = no CORS headers at all
	MaxBodyBytes      int64         // request bodies above this get 413
	StreamWriteWindow time.Duration // each streamed chunk must reach the client within this
	PolicyOn          bool          // false = bare provider: no session required on write/edit
	// LoopbackHosts refuses requests whose Host is not a loopback name. Set
	// it when serving on loopback without a token: it stops DNS rebinding,
	// where a web page points its own name at 127.0.0.1 and calls the API.
	LoopbackHosts bool
}

// Deps are the layers the server calls; every one is required but Search.
type Deps struct {
	FS      fs.FileSystem
	Gate    policy.Gate
	Search  *search.Searcher // nil or unavailable: glob and grep answer SEARCH_FAILED
	Metrics *Metrics
	Logger  *slog.Logger
}

// NewServer builds the whole HTTP surface: the generated routes, the
// validator, auth, CORS, the body cap, metrics and /openapi.yaml.
func NewServer(cfg Config, deps Deps) (http.Handler, error) {
	spec, err := api.GetSpec()
	if err != nil {
		return nil, err
	}
	spec.Servers = nil // the validator would otherwise match the Host header

	x := &executor{cfg: cfg, Deps: deps}
	deps.Metrics.watchSessions(deps.Gate)
	r := chi.NewRouter()
	r.Use(accessLog(deps.Logger), recoverer(deps.Logger))
	if len(cfg.CORSOrigins) > 0 {
		r.Use(cors.New(cors.Options{
			AllowedOrigins: cfg.CORSOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodDelete},
			AllowedHeaders: []string{"Authorization", "Content-Type", "Accept", "X-Session-ID", "X-Session-Cwd"},
			MaxAge:         300,
		}).Handler)
	}
	if cfg.LoopbackHosts {
		r.Use(loopbackHosts)
	}
	r.Use(bearerAuth(cfg.Token), bodyCap(cfg.MaxBodyBytes), sessionHeaders(deps.Gate, x.storeFailed), strictJSON(x.countRejected))
	r.Use(nethttpmw.OapiRequestValidatorWithOptions(spec, &nethttpmw.Options{
		Options: openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, // bearerAuth did it
			MultiError:         true,
		},
		DoNotValidateServers: true,
		// These two are served outside the generated code (oapi-codegen
		// prunes their operations from the embedded spec).
		Skipper: func(r *http.Request) bool {
			return r.Method == http.MethodGet && (r.URL.Path == "/metrics" || r.URL.Path == "/openapi.yaml")
		},
		ErrorHandlerWithOpts: func(_ context.Context, err error, w http.ResponseWriter, r *http.Request, _ nethttpmw.ErrorHandlerOpts) {
			code, msg := validationError(r, err)
			x.countRejected(r, code)
			writeProblem(w, code, msg)
		},
	}))

	r.Get("/metrics", promhttp.HandlerFor(deps.Metrics.Registry, promhttp.HandlerOpts{Registry: deps.Metrics.Registry}).ServeHTTP)
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(api.SpecYAML)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, codeNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, codeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
	})

	strict := api.NewStrictHandlerWithOptions(x, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeProblem(w, codeInvalidArgument, msgBodyJSON)
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errAbortStream) {
				// Headers and part of the body are out: break the transfer so
				// the client never mistakes it for a short success.
				panic(http.ErrAbortHandler)
			}
			deps.Logger.Error("response failed", "path", r.URL.Path, "err", err)
			if !headerWritten(w) {
				writeProblem(w, codeInternal, "internal error")
			}
		},
	})
	api.HandlerWithOptions(strict, api.ChiServerOptions{
		BaseRouter: r,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeProblem(w, codeInvalidArgument, "invalid request parameter: "+firstLine(err.Error()))
		},
	})
	return r, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// bearerAuth requires "Authorization: Bearer <token>" on every endpoint but
// /healthz, comparing in constant time. CORS preflights never reach it.
func bearerAuth(token string) func(http.Handler) http.Handler {
	want := []byte("Bearer " + token)
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
			if subtle.ConstantTimeCompare(got, want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolfs-api"`)
				writeProblem(w, codeUnauthorized, "missing or wrong bearer token")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// loopbackHosts refuses a request whose Host header names anything but
// localhost or a loopback address.
func loopbackHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
		if host != "localhost" && !strings.HasSuffix(host, ".localhost") && (err != nil || !ip.IsLoopback()) {
			writeProblem(w, codeForbiddenHost, "host "+quote(r.Host)+" is not served: without --token this server answers only to localhost and loopback addresses")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// bodyCap refuses bodies above max with 413 before anything reads them into
// memory (the validator reads whole bodies).
func bodyCap(max int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > max {
				writeProblem(w, codeBodyTooLarge, bodyTooLargeMessage(max))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, max)
			next.ServeHTTP(w, r)
		})
	}
}

// call is what the middleware learns about a request before the handlers run.
type call struct {
	session  string  // "" = none
	cwd      *string // X-Session-Cwd as sent
	wantText bool    // Accept prefers text/plain (streamed read)
}

type callKey struct{}

func callFrom(ctx context.Context) call {
	c, _ := ctx.Value(callKey{}).(call)
	return c
}

// sessionHeaders checks X-Session-ID and X-Session-Cwd (a header that is
// present but empty is malformed), counts the request as use of the session,
// and notes whether the client wants a streamed read.
func sessionHeaders(gate policy.Gate, failed func(op string, err error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var c call
			if ids, ok := r.Header["X-Session-Id"]; ok {
				if len(ids) != 1 || !validSessionID(ids[0]) {
					writeProblem(w, codeInvalidSession, "malformed X-Session-ID: it must be 1-128 characters of A-Za-z0-9._:-")
					return
				}
				c.session = ids[0]
				// A lost touch only shortens the session's life: fail closed.
				failed("touch", gate.Touch(c.session))
			}
			if cwds, ok := r.Header["X-Session-Cwd"]; ok {
				if len(cwds) != 1 || strings.TrimSpace(cwds[0]) == "" || strings.IndexByte(cwds[0], 0) >= 0 {
					writeProblem(w, codeInvalidSession, "malformed X-Session-Cwd: it must name an existing folder inside the workspace root")
					return
				}
				c.cwd = &cwds[0]
			}
			c.wantText = prefersText(r.Header.Get("Accept"))
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
		})
	}
}

func validSessionID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// prefersText reports whether the first of the listed media types that we
// serve is text/plain. Quality values are not ranked: clients that stream
// send Accept: text/plain.
func prefersText(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "text/plain", "text/*":
			return true
		case "application/json", "application/*", "*/*":
			return false
		}
	}
	return false
}
