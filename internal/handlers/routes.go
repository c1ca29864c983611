package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/rs/cors"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// mcpHeaders are the request headers of MCP's Streamable HTTP transport,
// allowed by CORS; Mcp-Session-Id is also exposed (docs/mcp.md).
var mcpHeaders = []string{"Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-ID"}

// filesHeaders are the conditional request headers of the files routes,
// allowed by CORS; ETag, Content-Range and Accept-Ranges are exposed
// (docs/files.md).
var filesHeaders = []string{"If-Match", "If-None-Match", "Range"}

// routes is the whole HTTP surface: every route of api/openapi.yaml (the
// generated binding parses their query and path parameters) and the raw
// ones it documents, each behind the steps it needs, in this order:
//
//	access log → CORS                      every request, before routing
//	recoverer → Host check → bearer token  every route (no token on /healthz, /readyz
//	                                       and the metadata; the approver token on /approvals)
//	body cap                               every route; a tool's refusal counts under the tool
//	?subject=                              the sessions routes: an admin naming another
//	                                       subject's session (namedSubject)
//	session headers                        after auth passed, not on a CORS preflight: a
//	                                       tool route resolves the session into a tools.Call
//	                                       (callOf); any other authenticated route touches
//	                                       the session a header names; /mcp resolves its own;
//	                                       the unauthenticated routes never touch one
//
// Under /model/ every answer, failures of any step included, is the model
// text alone (textAnswers), so that router carries the text mode first and
// its own 404 and 405. A route is added here, once, with its chain.
func (s *rest) routes() http.Handler {
	cfg, log := s.cfg, s.deps.Logger
	r := chi.NewRouter()
	r.Use(accessLog(log), routeAnyMethod)
	if len(cfg.CORSOrigins) > 0 {
		r.Use(cors.New(cors.Options{
			AllowedOrigins: cfg.CORSOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete},
			AllowedHeaders: append(append([]string{"Authorization", "Content-Type", "Accept", tools.HeaderSessionID, tools.HeaderSessionCwd}, append(mcpHeaders, filesHeaders...)...), cfg.Sessions.Aliases...),
			ExposedHeaders: []string{"Mcp-Session-Id", "ETag", "Content-Range", "Accept-Ranges"},
			MaxAge:         300,
		}).Handler)
	}
	// guard is the start of every route's chain, with the route's auth.
	guard := func(auth func(http.Handler) http.Handler) []func(http.Handler) http.Handler {
		m := []func(http.Handler) http.Handler{recoverer(log)}
		if cfg.LoopbackHosts {
			m = append(m, loopbackHosts)
		}
		return append(m, auth)
	}
	// token is the agent's auth with the scope a route needs; approver
	// also takes the approver token (docs/identity.md, "Scopes").
	token := func(scope scopeRule) func(http.Handler) http.Handler { return s.authn(scope, cfg.Token) }
	approver := s.authn(decidesOnPost, cfg.Token, cfg.ApproverToken)
	read := token(needs(identity.ScopeRead))
	capped := bodyCap(cfg.MaxBodyBytes, nil)

	// The generated binding, one per kind of parameter error.
	g := api.ServerInterfaceWrapper{Handler: s, ErrorHandlerFunc: pathParamError}
	catalog := api.ServerInterfaceWrapper{Handler: s, ErrorHandlerFunc: formatParamError}
	queue := api.ServerInterfaceWrapper{Handler: s, ErrorHandlerFunc: approvalsParamError}

	// The routes nobody authenticates never touch a session: an anonymous
	// client must not fill the store past --max-sessions and evict the
	// agents' read state (docs/identity.md, "What a
	// subject owns").
	r.Group(func(r chi.Router) {
		r.Use(guard(open)...)
		r.Use(capped)
		r.HandleFunc("/healthz", only(http.MethodGet, g.Healthz))
		r.HandleFunc("/readyz", only(http.MethodGet, g.Readyz))
		if cfg.OAuth != nil {
			// RFC 9728 metadata: public, like /healthz (docs/identity.md).
			for _, path := range []string{identity.MetadataPath, identity.MCPMetadataPath} {
				r.Handle(path, cfg.OAuth.Resource.MetadataHandler(path))
			}
		}
		if s.deps.Console != nil {
			r.Handle("/ui", s.deps.Console)
			r.Handle("/ui/*", s.deps.Console)
		}
	})

	r.Group(func(r chi.Router) {
		r.Use(guard(token(needs("")))...)
		r.Use(capped, s.touch)
		// Unknown paths and methods outside /model/ and /approvals/.
		r.NotFound(noSuchEndpoint)
		r.MethodNotAllowed(methodNotAllowed)
	})
	r.Group(func(r chi.Router) {
		r.Use(guard(read)...)
		r.Use(capped, s.touch)
		r.Get("/tools", catalog.ListTools)
		r.Get("/events", s.events())
		r.Get("/openapi.yaml", serveDocument("application/yaml", api.SpecYAML))
		r.Get("/openapi-full.json", serveDocument("application/json", s.specJSON))
		r.Get("/openapi.json", s.toolView)
		r.HandleFunc("/status", only(http.MethodGet, g.GetStatus))
	})
	// The sessions routes: ?subject= is resolved (and an admin's checked)
	// before the session step, so a refused request touches nothing.
	sessionRoute := func(scope string) chi.Router {
		return r.With(append(guard(token(needs(scope))), capped, s.namedSubject, s.touch)...)
	}
	sessionRoute("").Delete("/sessions/{id}", g.DeleteSession)
	sessionRoute(identity.ScopeRead).Get("/sessions/{id}/changes", g.ListChanges)
	sessionRoute(identity.ScopeWrite).Post("/sessions/{id}/revert", g.RevertSession)
	r.Group(func(r chi.Router) {
		r.Use(guard(s.metricsAuth())...)
		r.Use(capped, s.touch)
		r.Get("/metrics", s.deps.Metrics.ServeHTTP)
	})

	// The files routes (docs/files.md): no body cap, since an upload is
	// bounded by --max-upload-bytes as the provider streams it.
	files := api.ServerInterfaceWrapper{Handler: s, ErrorHandlerFunc: filesParamError}
	r.Group(func(r chi.Router) {
		r.Use(guard(token(writesOnChange))...)
		r.Use(s.filesCall)
		r.With(capped).Get("/files", files.ListFiles)
		r.With(capped).Get("/files/*", filePath(files.DownloadFile))
		r.With(capped).Delete("/files/*", filePath(files.DeleteFile))
		r.Put("/files/*", filePath(files.UploadFile))
	})

	for _, t := range s.toolRoutes(g) {
		r.With(append(guard(token(toolScope(t.name))), s.toolCap(t.name), s.toolCall)...).Post("/tools/"+t.name, t.json)
	}

	model := chi.NewRouter()
	model.Use(modelText)
	model.Group(func(r chi.Router) {
		r.Use(guard(token(needs("")))...)
		r.Use(capped, s.touch)
		r.NotFound(noSuchEndpoint)
		r.MethodNotAllowed(methodNotAllowed)
	})
	for _, t := range s.toolRoutes(g) {
		model.With(append(guard(token(toolScope(t.name))), s.toolCap(t.name), s.toolCall)...).Post("/"+t.name, t.model)
	}
	r.Mount(modelPrefix, model)

	r.Group(func(r chi.Router) {
		r.Use(guard(approver)...)
		r.Use(capped, s.touch)
		r.HandleFunc("/approvals", only(http.MethodGet, queue.ListApprovals))
		decide := chi.NewRouter()
		decide.NotFound(noSuchEndpoint)
		decide.MethodNotAllowed(methodNotAllowed)
		decide.Post("/{id}", g.DecideApproval)
		r.Mount("/approvals/", decide)
	})

	if s.deps.MCP != nil {
		// The SDK serves the methods chi knows; any other is refused as
		// chi refuses it everywhere else.
		mcp := s.mcpAuth(s.deps.MCP)
		r.With(append(guard(read), capped)...).HandleFunc(mcpPath, func(w http.ResponseWriter, r *http.Request) {
			if !chiMethods[r.Method] {
				methodNotAllowed(w, r)
				return
			}
			mcp.ServeHTTP(w, r)
		})
	}
	return r
}

// otherMethod stands, in routing, for every method chi does not know
// (WebDAV's PROPFIND, say), so that such a request is routed by its path
// like any other: 404 where no route is, 405 where one is (chi alone would
// answer 405 before looking at the path). No route serves it.
const otherMethod = "TOOLFS-OTHER-METHOD"

func init() { chi.RegisterMethod(otherMethod) }

// chiMethods are the methods chi routes by themselves.
var chiMethods = map[string]bool{
	http.MethodConnect: true, http.MethodDelete: true, http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true,
	http.MethodPatch: true, http.MethodPost: true, http.MethodPut: true, "QUERY": true, http.MethodTrace: true,
}

// routeAnyMethod routes a request of any other method as otherMethod.
func routeAnyMethod(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !chiMethods[r.Method] {
			chi.RouteContext(r.Context()).RouteMethod = otherMethod
		}
		next.ServeHTTP(w, r)
	})
}

// mcpPath is where the MCP transport is mounted.
const mcpPath = "/mcp"

// toolRoute is one tool's two routes: /tools/<name> (JSON) and
// /model/<name> (the model text).
type toolRoute struct {
	name        string
	json, model http.HandlerFunc
}

func (s *rest) toolRoutes(g api.ServerInterfaceWrapper) []toolRoute {
	return []toolRoute{
		{tools.ToolRead, g.ReadTool, g.ModelRead},
		{tools.ToolWrite, g.WriteTool, g.ModelWrite},
		{tools.ToolEdit, g.EditTool, g.ModelEdit},
		{tools.ToolApplyPatch, g.ApplyPatchTool, g.ModelApplyPatch},
		{tools.ToolEditLines, g.EditLinesTool, g.ModelEditLines},
		{tools.ToolGlob, g.GlobTool, g.ModelGlob},
		{tools.ToolGrep, g.GrepTool, g.ModelGrep},
		{tools.ToolMove, g.MoveTool, g.ModelMove},
		{tools.ToolDelete, g.DeleteTool, g.ModelDelete},
		{tools.ToolMkdir, g.MkdirTool, g.ModelMkdir},
	}
}

// only serves h for method and answers 405 to any other, through the
// route's own chain (the router's 405 is the one of the default chain: the
// agent's token).
func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			methodNotAllowed(w, r)
			return
		}
		h(w, r)
	}
}

// events serves GET /events, or says the change feed is off.
func (s *rest) events() http.HandlerFunc {
	if s.deps.Events == nil {
		return func(w http.ResponseWriter, r *http.Request) {
			writeProblem(w, fault.CodeNoSuchEndpoint, "no such endpoint: GET /events (the change feed is off: --events=false)")
		}
	}
	return s.deps.Events.Handler(writeProblem, viewer).ServeHTTP
}

// serveDocument serves a fixed document.
func serveDocument(contentType string, doc []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(doc)
	}
}

// toolView serves GET /openapi.json, built from the catalog on each request
// (docs/frontends.md).
func (s *rest) toolView(w http.ResponseWriter, r *http.Request) {
	dialect, terr := dialectOf(r)
	if terr != nil {
		writeError(w, terr)
		return
	}
	view := newToolView(s.x.CatalogIn(dialect).Allowed(canWrite(r)), s.version, serverURL(s.cfg.PublicURL, r), s.cfg.Token != "" || s.cfg.OAuth != nil, dialect)
	writeJSON(w, http.StatusOK, "application/json", view)
}

// The generated binding's error hooks: what is left to refuse once the
// route matched is a query parameter given twice or malformed, or a
// malformed path value.

// pathParamError refuses a malformed path value (a session or approval id).
func pathParamError(w http.ResponseWriter, _ *http.Request, err error) {
	writeProblem(w, fault.CodeInvalidSession, "malformed session header or id: "+firstLine(err.Error()))
}

// formatParamError refuses GET /tools with format given twice.
func formatParamError(w http.ResponseWriter, _ *http.Request, _ error) {
	writeProblem(w, fault.CodeInvalidArgument, "give format at most once: format=openai, format=anthropic or format=mcp")
}

// approvalsParamError refuses GET /approvals with an after that is not an
// integer, in the words of the contract's check (ListApprovals checks its
// minimum); any other refusal as pathParamError.
func approvalsParamError(w http.ResponseWriter, r *http.Request, err error) {
	var pe *api.InvalidParamFormatError
	var ne *strconv.NumError
	if errors.As(err, &pe) && pe.ParamName == "after" && errors.As(err, &ne) {
		msg := "value " + ne.Num + ": an invalid integer: " + ne.Err.Error()
		if ne.Num == "" {
			msg = "empty value is not allowed"
		}
		writeProblem(w, fault.CodeInvalidArgument, msgAfterPrefix+msg)
		return
	}
	pathParamError(w, r, err)
}
