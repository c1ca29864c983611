package handlers

import (
	"context"
	"crypto/subtle"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/telemetry"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// recorder remembers the status and size of a response. It implements
// Flush itself because the generated streaming code asserts http.Flusher
// directly, and Unwrap for http.ResponseController (write deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom passes the server's own ReadFrom on, so a download of an
// *os.File is sent with sendfile(2) (docs/files.md).
func (w *recorder) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := io.Copy(w.ResponseWriter, r)
	w.bytes += n
	return n, err
}

func headerWritten(w http.ResponseWriter) bool { return writtenStatus(w) != 0 }

// writtenStatus is the status the access log's recorder under w saw written, 0
// for none yet (or no recorder).
func writtenStatus(w http.ResponseWriter) int {
	for {
		if r, ok := w.(*recorder); ok {
			return r.status
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return 0
		}
		w = u.Unwrap()
	}
}

// AccessLogMessage is the message of the access log's records, one per
// request.
const AccessLogMessage = "request"

// accessLog writes one structured line per request: never a file's content,
// never a token. It gives the request its id first: the client's
// X-Request-Id when valid (1-128 characters of A-Za-z0-9._:-), else a new
// one; the answer, the access log line and the audit records (docs/audit.md)
// carry it, and /mcp reads it from the request's header. A valid
// traceparent header's trace id goes in the line and the audit records too.
func accessLog(log *slog.Logger) func(http.Handler) http.Handler {
	aw, _ := log.Handler().(AccessWriter)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			// One value slice for the request and the answer (each Set
			// would allocate its own); the header's name is canonical.
			ids := r.Header[tools.RequestIDHeader]
			if len(ids) > 0 && tools.ValidRequestID(ids[0]) {
				ids = ids[:1:1]
			} else {
				ids = []string{tools.NewRequestID()}
				r.Header[tools.RequestIDHeader] = ids
			}
			w.Header()[tools.RequestIDHeader] = ids
			id := ids[0]
			ctx, trace := tools.WithTrace(tools.WithRequestID(r.Context(), id))
			trace.Note(tools.TraceID(r.Header.Get(tools.TraceparentHeader)))
			r = r.WithContext(ctx)
			rec := &recorder{ResponseWriter: w}
			defer func() {
				if aw != nil {
					now := time.Now()
					l := AccessLine{Time: now, Method: r.Method, Path: r.URL.Path, Status: rec.status, Bytes: rec.bytes,
						Duration: now.Sub(start), RequestID: id, TraceID: trace.ID()}
					if aw.WriteAccess(&l) {
						return
					}
				}
				if !log.Enabled(r.Context(), slog.LevelInfo) {
					return
				}
				attrs := []slog.Attr{
					slog.String("method", r.Method),
					slog.String("path", r.URL.Path),
					slog.Int("status", rec.status),
					slog.Int64("bytes", rec.bytes),
					slog.Duration("duration", time.Since(start)),
					slog.String("request_id", id),
				}
				// A caller's trace (docs/running.md, "Traces in the logs").
				if t := trace.ID(); t != "" {
					attrs = append(attrs, slog.String("trace_id", t))
				}
				log.LogAttrs(r.Context(), slog.LevelInfo, AccessLogMessage, attrs...)
			}()
			next.ServeHTTP(rec, r)
		})
	}
}

// recoverer turns a panic into a 500 problem (or a broken transfer when the
// body had started), logging the cause. http.ErrAbortHandler passes through:
// it is how a failed stream is aborted on purpose.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic", "path", r.URL.Path, "panic", v)
				if headerWritten(w) {
					panic(http.ErrAbortHandler)
				}
				writeProblem(w, fault.CodeInternal, "internal error")
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// open is the auth of /healthz: none.
func open(next http.Handler) http.Handler { return next }

// bearerAuth requires "Authorization: Bearer <token>", or one of also,
// comparing in constant time; with no token it lets everything through.
// CORS preflights never need it. The approvals routes also take the
// approver token (which of the two may decide is DecideApproval's to say).
func bearerAuth(token string, also ...string) func(http.Handler) http.Handler {
	if token == "" {
		return open
	}
	want := [][]byte{[]byte("Bearer " + token)}
	for _, t := range also {
		if t != "" {
			want = append(want, []byte("Bearer "+t))
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isPreflight(r) {
				next.ServeHTTP(w, r)
				return
			}
			if !authorizedBy(r, want) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolfs-api"`)
				writeProblem(w, fault.CodeUnauthorized, "missing or wrong bearer token")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// authorizedBy reports whether r's Authorization is one of want
// ("Bearer <token>" each), comparing every one in constant time.
func authorizedBy(r *http.Request, want [][]byte) bool {
	got := []byte(r.Header.Get("Authorization"))
	ok := false
	for _, t := range want {
		ok = subtle.ConstantTimeCompare(got, t) == 1 || ok
	}
	return ok
}

func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// loopbackHosts refuses a request whose Host header is not host[:port]
// naming localhost or a loopback address. A port must be digits:
// "127.0.0.1:80.evil.example" is some other name, not 127.0.0.1.
func loopbackHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			writeProblem(w, fault.CodeForbiddenHost, "host "+render.Quote(r.Host)+" is not served: without --token this server answers only to localhost and loopback addresses")
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

// bodyCap refuses bodies above max with 413 before anything reads them
// into memory, telling refused (when set) of the refusal, and bounds what
// is read of any other body.
func bodyCap(max int64, refused func(*fault.Error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > max {
				err := fault.New(fault.CodeBodyTooLarge, bodyTooLargeMessage(max))
				if refused != nil {
					refused(err)
				}
				writeError(w, err)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, max)
			next.ServeHTTP(w, r)
		})
	}
}

// toolCap is the body cap of a tool's routes: a refused call still counts
// under its tool.
func (s *rest) toolCap(tool string) func(http.Handler) http.Handler {
	return bodyCap(s.cfg.MaxBodyBytes, func(err *fault.Error) {
		s.x.Refuse(tools.Call{Transport: "rest"}, tool, err)
	})
}

// sessionHeaders resolves a request's session and cwd from its headers
// (docs/api.md, "Sessions").
type sessionHeaders struct {
	// tool resolves a tool call's session (--default-session applies);
	// named, any other request's: a route that runs no tool touches only a
	// session its headers name, so GET /metrics does not keep the default
	// session alive.
	tool, named tools.Sessions
	// canonical are the session headers' canonical names, worked out once:
	// Header.Values would canonicalize (and allocate) on every request.
	canonical map[string]string
}

func newSessionHeaders(sessions tools.Sessions) sessionHeaders {
	h := sessionHeaders{tool: sessions, named: sessions, canonical: map[string]string{}}
	h.named.Default = ""
	for _, name := range append([]string{tools.HeaderSessionID, tools.HeaderSessionCwd}, sessions.Aliases...) {
		h.canonical[name] = http.CanonicalHeaderKey(name)
	}
	return h
}

func (h sessionHeaders) resolve(r *http.Request, sessions tools.Sessions) (session, cwd string, err *fault.Error) {
	return sessions.Resolve(func(name string) []string {
		if c, ok := h.canonical[name]; ok {
			return r.Header[c]
		}
		return r.Header.Values(name)
	}, "")
}

// toolCall resolves a tool route's session into the tools.Call the route runs
// (callOf), and counts the request as use of the session: the call's first
// decision or record carries the use when the store can (docs/performance.md
// §7).
func (s *rest) toolCall(next http.Handler) http.Handler {
	return s.callWith(s.sessions.tool, true, next)
}

// callWith resolves a request's session and cwd by sessions into the
// tools.Call its route runs (callOf): toolCall's and filesCall's one step.
// Its routes take no OPTIONS, so a CORS preflight (which auth lets through
// without a credential) is refused here before it touches a session.
//
// dialects: the route takes ?dialect= (a tool route: docs/edits.md, "Edit
// dialects").
func (s *rest) callWith(sessions tools.Sessions, dialects bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPreflight(r) {
			methodNotAllowed(w, r)
			return
		}
		start := time.Now()
		session, cwd, err := s.sessions.resolve(r, sessions)
		if err != nil {
			writeError(w, err)
			return
		}
		var dialect render.Dialect
		if dialects {
			if dialect, err = dialectOf(r); err != nil {
				writeError(w, err)
				return
			}
		}
		c := caller(r)
		c.Session, c.Cwd, c.Transport, c.Start, c.Dialect = session, cwd, "rest", start, dialect
		c, end := s.x.Use(c)
		defer end()
		ctx, endSpan := s.traced(w, r, &c, start)
		defer endSpan()
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, callKey{}, c)))
	})
}

// traced starts the trace span of a REST call that began at start, for
// its route's handler to run in ctx, and sets it as c's; end ends it with
// the answer's status. Tracing off, ctx is r's and end does nothing.
func (s *rest) traced(w http.ResponseWriter, r *http.Request, c *tools.Call, start time.Time) (ctx context.Context, end func()) {
	if s.deps.Tracing == nil {
		return r.Context(), func() {}
	}
	ctx, span := s.startSpan(r.Context(), r, start)
	c.Span = span
	return ctx, func() { span.End(writtenStatus(w)) }
}

// startSpan starts the trace span of a REST call, a child of the request's
// traceparent, and makes its trace id the one the audit records and the
// access log line name: the caller's, or with none the span's new one
// (docs/running.md, "Traces").
func (s *rest) startSpan(ctx context.Context, r *http.Request, start time.Time) (context.Context, *telemetry.Span) {
	tp := r.Header.Get(tools.TraceparentHeader)
	if tools.TraceID(tp) == "" {
		tp = ""
	}
	ctx, span := s.deps.Tracing.Start(ctx, "rest", tp, r.Header.Get(tools.TracestateHeader), start)
	tools.TraceOf(ctx).Note(span.TraceID())
	return tools.WithTraceID(ctx, span.TraceID()), span
}

// touch counts a request of any other route as use of the session its
// headers name, if they name one, and refuses malformed session headers.
// It runs after auth; a CORS preflight, which auth lets through without a
// credential, touches nothing (docs/api.md, "Sessions").
func (s *rest) touch(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPreflight(r) {
			next.ServeHTTP(w, r)
			return
		}
		session, _, err := s.sessions.resolve(r, s.sessions.named)
		if err != nil {
			writeError(w, err)
			return
		}
		c := caller(r)
		c.Session = session
		s.x.Touch(c)
		next.ServeHTTP(w, r)
	})
}

type callKey struct{}

// callOf is the tools.Call that toolCall resolved for a tool route.
func callOf(ctx context.Context) tools.Call {
	c, _ := ctx.Value(callKey{}).(tools.Call)
	return c
}
