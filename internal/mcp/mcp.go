// Package mcp is the MCP transport of toolfs-api: the executor's tools over
// the Model Context Protocol's Streamable HTTP transport at /mcp
// (docs/mcp.md), on the official Go SDK. Like the REST adapter it holds no
// tool logic: a tools/call becomes one executor call, its result one text
// block holding the REST output, its *fault.Error an isError result holding
// the REST problem's output.
package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/telemetry"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Transport is the metrics label of a call made over MCP.
const Transport = "mcp"

// firstSessionless is the first protocol revision without protocol
// sessions: its requests carry it in MCP-Protocol-Version and are served
// statelessly, older ones by the stateful handler (docs/mcp.md, "Protocol
// versions").
const firstSessionless = "2026-07-28"

// Config is what the MCP transport needs beyond the executor.
type Config struct {
	// Sessions resolves a call's session from the request's headers, then
	// the MCP session, then --default-session (docs/api.md, "Sessions").
	Sessions tools.Sessions
	// Origins are the browser origins allowed besides the server's own
	// (--cors-origins); any other Origin is refused with 403.
	Origins []string
	// Structured adds the REST metadata to each success as
	// structuredContent (--mcp-structured).
	Structured bool
	// MaxBodyBytes caps a request body (--max-body-bytes; 0: 32 MiB, never
	// the SDK's own 4 MiB, which would refuse a large write).
	MaxBodyBytes int64
	// AnswerBudget bounds the bytes of the answers of one HTTP request
	// (0: a batch of MaxBatch reads under the executor's caps, plus one
	// image read's answer, plus 4 MiB; docs/mcp.md, "Limits").
	AnswerBudget int64
	// SessionTimeout closes an MCP session idle this long, which bounds the
	// SDK's table of sessions in time (--session-ttl; required).
	SessionTimeout time.Duration
	// MaxSessions bounds the MCP sessions open at once; past it the least
	// recently used is closed (--max-sessions; required).
	MaxSessions int
	// Version is the server version announced to clients ("" = "dev").
	Version string
	// Logger receives the SDK's own logs (nil: discarded).
	Logger *slog.Logger
	// Deny answers a POST refused for its token's scope (a tools/call of a
	// tool that writes, from a token without toolfs:write) through the
	// server's one problem writer, with the challenge (docs/identity.md);
	// nil: a JSON-RPC error with the challenge.
	Deny func(http.ResponseWriter, *http.Request, *identity.Denial)
	// Redis, when set, shares the MCP sessions between the replicas that
	// use it (docs/mcp.md, "Sessions across replicas"), under Prefix
	// ("" = "toolfs:"); nil keeps them in this process.
	Redis  redis.UniversalClient
	Prefix string
	// ElicitKey seals the request state of an escalation asked with a
	// call's answer (32 bytes; docs/sandbox.md, "Approving in the
	// client"): --elicitation-key, or one the replicas share through
	// Redis; nil: a random key of this process.
	ElicitKey []byte
	// Tracing makes the trace span of every tools/call (docs/running.md,
	// "Traces"); nil: none.
	Tracing *telemetry.Tracing
}

// Handler serves /mcp: the stateful SDK handler for the protocol revisions
// that have sessions, the stateless one for the newer ones, both over one
// SDK server whose tools run on the executor.
type Handler struct {
	stateful, stateless http.Handler
	origins             map[string]bool
	srv                 *sdk.Server
	x                   *tools.Executor
	table               *sessionTable
	shared              *sharedSessions // nil: sessions in this process only
	adopting            sync.Mutex      // one adoption at a time
	log                 *slog.Logger
	carriers            *carriers
	maxBody             int64 // of one request
	budget              int64 // of the answers of one request
	denyWith            func(http.ResponseWriter, *http.Request, *identity.Denial)
}

// New returns the /mcp handler over x. The tool list is the executor's
// catalog at this moment (glob and grep only when they can run).
func New(cfg Config, x *tools.Executor) *Handler {
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.SessionTimeout <= 0 || cfg.MaxSessions <= 0 {
		// The bounds are the policy's flags, whose defaults live there
		// alone (docs/architecture.md, "Where each kind of change goes").
		panic("mcp: Config.SessionTimeout and Config.MaxSessions must be positive (--session-ttl, --max-sessions)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 32 << 20
	}
	if cfg.AnswerBudget <= 0 {
		caps := x.Caps()
		if caps == (render.Caps{}) {
			caps = render.DefaultCaps()
		}
		cfg.AnswerBudget = defaultBudget(caps, cfg.Structured) + imageAnswerBound(x.ImageMaxBytes(), cfg.Structured)
	}
	h := &Handler{
		origins:  map[string]bool{},
		x:        x,
		table:    newSessionTable(cfg.MaxSessions, cfg.SessionTimeout),
		log:      cfg.Logger,
		carriers: newCarriers(),
		maxBody:  cfg.MaxBodyBytes,
		budget:   cfg.AnswerBudget,
		denyWith: cfg.Deny,
	}
	if cfg.Redis != nil {
		if cfg.Prefix == "" {
			cfg.Prefix = "toolfs:"
		}
		h.shared = &sharedSessions{client: cfg.Redis, prefix: cfg.Prefix, ttl: cfg.SessionTimeout}
	}
	srv := newServer(cfg, x, h.carriers, h.shareInitialize)
	h.srv = srv
	get := func(*http.Request) *sdk.Server { return srv }
	opts := sdk.StreamableHTTPOptions{
		// One JSON answer per request: no tool sends progress, and a plain
		// body passes every proxy.
		JSONResponse: true,
		Logger:       cfg.Logger,
		// The table closes an idle session (sessionTable); the SDK's own
		// timer, a minute later, only backs it up.
		SessionTimeout:      cfg.SessionTimeout + time.Minute,
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
		// The REST middleware checks Host as it does for every route
		// (loopback names only without --token), so the SDK's own check,
		// which would also refuse a proxy's Host with a token, is off.
		DisableLocalhostProtection: true,
	}
	stateless := opts
	stateless.Stateless = true
	stateless.PropagateRequestCancellation = true
	h.stateful = sdk.NewStreamableHTTPHandler(get, &opts)
	h.stateless = sdk.NewStreamableHTTPHandler(get, &stateless)
	for _, o := range cfg.Origins {
		h.origins[strings.ToLower(o)] = true
	}
	return h
}

// ServeHTTP validates Origin and hands the request to the handler of its
// protocol revision. A POST's body is read once, first: with identities, a
// token without the write scope whose body may call a tool that writes is
// refused with the scope challenge (callsWritingTool); then it is held to
// the limits of one request (docs/mcp.md, "Limits"): a batch of more than
// MaxBatch messages is refused before the SDK sees it, and its answers are
// counted against the budget.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.allowedOrigin(r) {
		forbidden(w, "origin "+render.Quote(r.Header.Get("Origin"))+" is not allowed: send no Origin, the server's own, or one of --cors-origins")
		return
	}
	serve := h.serveStateful
	if r.Header.Get("MCP-Protocol-Version") >= firstSessionless {
		serve = h.stateless.ServeHTTP
	}
	// The edit dialect of the URL the client is configured with
	// (docs/edits.md, "Edit dialects"), handed to tools/list and each
	// tools/call in a header only this handler sets.
	r.Header.Del(headerDialect)
	dialect, ok := dialectOf(r)
	if !ok {
		refuse(w, render.MsgDialect(r.URL.Query().Get("dialect")))
		return
	}
	if dialect != "" {
		r.Header.Set(headerDialect, string(dialect))
	}
	if r.Method != http.MethodPost {
		r.Header.Del(headerCarrier)
		serve(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.maxBody) // also when served without the REST middleware
	p, scoped := needsWrite(r)
	req := readRequest(r, scoped)
	switch {
	case req.writes:
		h.deny(w, r, identity.Require(p, identity.ScopeWrite))
		return
	case req.batch > MaxBatch:
		refuse(w, batchMessage(req.batch))
		return
	}
	tools.TraceOf(r.Context()).Note(req.traceID) // for the access log, after the header's
	answers, texts := &budget{limit: h.budget}, &held{}
	defer h.carriers.carry(r, answers, req.args, texts)()
	aw := &answerWriter{ResponseWriter: w, b: answers, texts: texts}
	serve(aw, r)
	aw.finish()
}

// allowedOrigin reports whether r's Origin is absent, a configured CORS
// origin, or the server's own (its host[:port] is the request's Host), as
// the MCP transport specification requires against DNS rebinding.
func (h *Handler) allowedOrigin(r *http.Request) bool {
	values := r.Header.Values("Origin")
	if len(values) == 0 {
		return true
	}
	if len(values) > 1 {
		return false
	}
	o := strings.ToLower(values[0])
	if h.origins[o] {
		return true
	}
	host, ok := strings.CutPrefix(o, "http://")
	if !ok {
		host, ok = strings.CutPrefix(o, "https://")
	}
	return ok && host != "" && host == strings.ToLower(r.Host)
}

// forbidden answers 403 with a JSON-RPC error without an id, the body the
// MCP transport specification gives a refused request.
func forbidden(w http.ResponseWriter, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"error":   map[string]any{"code": -32600, "message": message},
	})
	w.Write(b)
}

// NewServer returns an SDK server of the executor's tools, as /mcp serves
// them, to run on another transport: --stdio runs it on the process's
// standard input and output (docs/mcp.md, "Over stdio"). Of cfg it uses
// Sessions, Structured, Version and Logger; a call carries no HTTP
// headers, so it is in the session --default-session names. Nothing bounds
// what one message of the transport may ask besides the transport itself
// and the executor's caps.
func NewServer(cfg Config, x *tools.Executor) *sdk.Server {
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// One session on one stream, which carries elicitation requests
	// whatever store the server shares.
	cfg.Redis = nil
	return newServer(cfg, x, newCarriers(), nil)
}

// headerDialect names, on a request as the SDK hands its headers to a
// method, the edit dialect of the request's URL (?dialect=); set here
// only: a client's own value is removed before the SDK sees the request.
const headerDialect = "X-Toolfs-Mcp-Dialect"

// dialectOf is the dialect a request's URL asks for: "" when none (or an
// empty one), ok false for an unknown name or one given twice.
func dialectOf(r *http.Request) (render.Dialect, bool) {
	values := r.URL.Query()["dialect"]
	switch {
	case len(values) == 0 || len(values) == 1 && values[0] == "":
		return "", true
	case len(values) > 1:
		return "", false
	}
	return render.ParseDialect(values[0])
}

// requestDialect is the dialect ServeHTTP found for the request that
// carried req.
func requestDialect(req sdk.Request) render.Dialect {
	if extra := req.GetExtra(); extra != nil {
		return render.Dialect(extra.Header.Get(headerDialect))
	}
	return ""
}

// newServer registers every dialect's tools on one SDK server; tools/list
// and the instructions then follow the dialect of each request
// (dialectView).
func newServer(cfg Config, x *tools.Executor, c *carriers, share sdk.Middleware) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "toolfs-api", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions: instructions(x.CatalogIn("")),
		Logger:       cfg.Logger,
		SetCacheable: setCacheable,
	})
	key := cfg.ElicitKey
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	seal, err := newSealer(key)
	if err != nil {
		panic("mcp: " + err.Error()) // the builder checked the key's length
	}
	// With the sessions shared through Redis no stream outlives its request
	// (no GET stream: "Sessions across replicas"), so nothing can carry an
	// elicitation request to the client: /approvals asks instead.
	a := adapter{x: x, sessions: cfg.Sessions, structured: cfg.Structured, carriers: c, sealer: seal, inSession: cfg.Redis == nil, tracing: cfg.Tracing}
	for _, t := range append(x.CatalogIn(render.DialectAll).Tools, x.HistoryCatalog()...) {
		srv.AddTool(&sdk.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: t.Parameters,
			Annotations: annotations(tools.AnnotationsOf(t.Name)),
		}, a.handler(t.Name))
	}
	mw := []sdk.Middleware{dialectView(x)}
	if share != nil {
		mw = append(mw, share)
	}
	srv.AddReceivingMiddleware(mw...)
	return srv
}

// instructions are the server's instructions: the guidance texts of cat,
// one paragraph each, in catalog order.
func instructions(cat tools.Catalog) string {
	guidance := make([]string, 0, len(cat.Tools))
	for _, t := range cat.Tools {
		guidance = append(guidance, t.Guidance)
	}
	return strings.Join(guidance, "\n\n")
}

// dialectView makes tools/list the request's dialect's catalog, in
// catalog order (read, write, the dialect's edit tool, glob, grep; the SDK
// sorts tools by name), with the checkpoint tools after it (extended
// profile only; docs/checkpoints.md); and the instructions of initialize
// (server/discover on the sessionless revisions) that catalog's guidance. Every registered tool stays callable
// (docs/edits.md, "Edit dialects").
func dialectView(x *tools.Executor) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			switch r := res.(type) {
			case *sdk.ListToolsResult:
				cat := x.CatalogIn(requestDialect(req))
				cat.Tools = append(cat.Tools, x.HistoryCatalog()...)
				order := map[string]int{}
				for i, t := range cat.Allowed(canWrite(req)).Tools {
					order[t.Name] = i + 1
				}
				r.Tools = slices.DeleteFunc(r.Tools, func(t *sdk.Tool) bool { return order[t.Name] == 0 })
				slices.SortStableFunc(r.Tools, func(a, b *sdk.Tool) int { return order[a.Name] - order[b.Name] })
			case *sdk.InitializeResult:
				if d := requestDialect(req); d != "" || !canWrite(req) {
					r.Instructions = instructions(x.CatalogIn(d).Allowed(canWrite(req)))
				}
			case *sdk.DiscoverResult: // the sessionless revisions' initialize
				if d := requestDialect(req); d != "" || !canWrite(req) {
					r.Instructions = instructions(x.CatalogIn(d).Allowed(canWrite(req)))
				}
			}
			return res, err
		}
	}
}

// canWrite reports whether req's caller may call the tools that write:
// any caller without identities, or a token holding toolfs:write; tools/list
// lists only what it may call (docs/identity.md, "What a token may do, it
// sees").
func canWrite(req sdk.Request) bool {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return true
	}
	return slices.Contains(extra.TokenInfo.Scopes, identity.ScopeWrite)
}

// annotations converts the catalog's hints to the SDK's type, leaving out
// destructiveHint where MCP gives it no meaning (a read-only tool).
func annotations(a tools.Annotations) *sdk.ToolAnnotations {
	out := &sdk.ToolAnnotations{ReadOnlyHint: a.ReadOnlyHint, OpenWorldHint: &a.OpenWorldHint}
	if !a.ReadOnlyHint {
		out.DestructiveHint = &a.DestructiveHint
	}
	return out
}

// adapter turns a tools/call into an executor call.
type adapter struct {
	x          *tools.Executor
	sessions   tools.Sessions
	structured bool
	carriers   *carriers
	sealer     *sealer
	// inSession: the revisions with sessions may ask the client's user
	// inside the session (ServerSession.Elicit).
	inSession bool
	tracing   *telemetry.Tracing // nil: no spans
}

// handler runs one tool through Executor.Run: a read is one whole window,
// bounded by the read caps as on REST (an MCP result is one message, so
// nothing is streamed). The call ends when its client cancels it, its
// session ends, or the HTTP request that carried it ends or passes its
// answer budget (carriers). A result that passes the budget is dropped.
func (a adapter) handler(tool string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var header http.Header
		if req.Extra != nil {
			header = req.Extra.Header
		}
		ctx, carried, stop := a.carriers.bind(ctx, header)
		defer stop()
		if carried.answers.spent() { // another answer of the request passed the budget
			return nil, errOverBudget
		}
		args := carried.args
		if args == nil {
			args = req.Params.Arguments
		}
		res, text := a.call(ctx, tool, header, req, args, carried.texts != nil, carried.trace)
		if !carried.answers.charge(res, text) { // the SDK holds no answer past the budget
			return nil, errOverBudget
		}
		if res.InputRequests != nil { // a question, no content to hold
			return res, nil
		}
		return carried.texts.lower(res, text), nil
	}
}

// call runs the tool for req and gives its result, a failure included.
// The arguments are the request's own, or those readRequest lifted out of
// its body. With encoded, a read's text comes already encoded as JSON
// (readText), in text, and the result's first content is its empty slot.
//
// The call's trace id, in its audit records, is its span's (a child of the
// traceparent that wins, callTraceparent), or without tracing the
// traceparent's own; with tracing and no traceparent the span's new one is
// also noted for the access log line of the request that carried the call
// (note; nil over stdio).
func (a adapter) call(ctx context.Context, tool string, header http.Header, req *sdk.CallToolRequest, raw []byte, encoded bool, note *tools.Trace) (_ *sdk.CallToolResult, text []byte) {
	c := tools.Call{Transport: Transport, Start: time.Now(), Dialect: render.Dialect(header.Get(headerDialect))}
	traceparent, tracestate := callTraceparent(req, header)
	traceID := tools.TraceID(traceparent)
	if a.tracing != nil {
		var span *telemetry.Span
		ctx, span = a.tracing.Start(ctx, Transport, traceparent, tracestate, c.Start)
		defer span.End(0)
		c.Span, traceID = span, span.TraceID()
		note.Note(traceID)
	}
	ctx = tools.WithTraceID(ctx, traceID)
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		// A verified caller (docs/identity.md): its subject scopes the
		// session; ServeHTTP refused a write without the write scope
		// already, this holds whatever reaches a tool another way.
		ti := req.Extra.TokenInfo
		c.Subject, c.Admin = ti.UserID, slices.Contains(ti.Scopes, identity.ScopeAdmin)
		if tools.Writes(tool) && !slices.Contains(ti.Scopes, identity.ScopeWrite) {
			err := fault.New(fault.CodeInsufficientScope, "the access token lacks the scope "+identity.ScopeWrite)
			a.x.Refuse(c, tool, err)
			return failure(err), nil
		}
	}
	// The audit records' request id is the HTTP request's that carried the
	// call (docs/audit.md): in a stateful session ctx descends from the
	// session's initialize and holds that request's id.
	if id := header.Get(tools.RequestIDHeader); tools.ValidRequestID(id) {
		ctx = tools.WithRequestID(ctx, id)
	}
	session, cwd, err := a.sessions.Resolve(header.Values, sessionOf(header, req.Session))
	if err != nil {
		a.x.Refuse(c, tool, err)
		return failure(err), nil
	}
	c.Session, c.Cwd = session, cwd
	var later *retryAsker
	if req.Session != nil && canElicit(req) {
		// The client's user can be asked (docs/sandbox.md, "Approving in
		// the client").
		if revision(header, req) >= firstSessionless {
			later = &retryAsker{sealer: a.sealer, x: a.x, params: req.Params,
				binding: requestState{Subject: c.Subject, Session: session, Args: argsDigest(tool, raw)}}
			c.Asker = later
		} else if a.inSession {
			c.Asker = sessionAsker{ss: req.Session}
		}
	}
	c, end := a.x.Use(c)
	defer end()
	if len(raw) == 0 {
		raw = []byte("{}") // a call without arguments
	}
	var out tools.Result
	if encoded && tool == tools.ToolRead { // Executor.Run's read, its text encoded from the window
		rd, err := a.x.Read(ctx, c, raw)
		if err != nil {
			return failure(err), nil
		}
		r, err := rd.Window(ctx)
		if err != nil {
			return failure(err), nil
		}
		text, out.Metadata = readText(r), r.Meta
	} else if out, err = a.x.Run(ctx, c, tool, raw); err != nil {
		if err.Code == fault.CodeInputRequired && later != nil && later.asked != nil {
			return later.asked, nil
		}
		return failure(err), nil
	}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out.Output}}}
	if m, ok := out.Metadata.(tools.ReadMetadata); ok && m.Image != nil {
		// The picture after its text block (docs/media.md): clients that
		// drop images still tell the model what is there.
		res.Content = append(res.Content, &sdk.ImageContent{MIMEType: m.Image.MediaType, Data: m.Image.Data})
	}
	if a.structured {
		// Encoded here, once, byte for byte as the SDK sends it (compact,
		// HTML characters escaped, as its json.Marshal of the result leaves
		// a RawMessage), so that the budget counts its bytes and held can
		// carry it past the SDK's encoders.
		b, err := json.Marshal(out.Metadata)
		if err != nil {
			return failure(fault.New(fault.CodeInternal, "cannot encode the metadata: "+err.Error())), nil
		}
		res.StructuredContent = json.RawMessage(b)
	}
	return res, text
}

// revision is the protocol revision of req: its session's, else the
// request's MCP-Protocol-Version header.
func revision(header http.Header, req *sdk.CallToolRequest) string {
	if p := req.Session.InitializeParams(); p != nil && p.ProtocolVersion != "" {
		return p.ProtocolVersion
	}
	return header.Get("MCP-Protocol-Version")
}

// failure is a tool's failure as MCP gives it to the model: isError and the
// REST problem's output, remedy included.
func failure(err *fault.Error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: tools.Output(err)}}}
}
