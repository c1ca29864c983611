// Package server builds a whole toolfs-api server from options: the local
// provider, the policy, the searcher, the executor, the metrics and the
// transports. It is the one place that wires them (docs/architecture.md),
// used by cmd/toolfs-api, bench/, test/reliability/ and the tests, so a new
// dependency or transport is added once.
package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/handlers"
	"github.com/toolfs/toolfs-api/internal/mcp"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Options are every setting of a server. The zero value of a field is its
// default unless it says otherwise.
type Options struct {
	// Root is the workspace root (required).
	Root string
	// FS configures the local provider (in-process locks only, sweep
	// interval, ...).
	FS fs.LocalOptions
	// Policy switches the read-before-write policy on; off is the bare
	// provider. It is the policy's one on/off setting.
	Policy bool
	// Sessions bounds the policy's memory session store.
	Sessions policy.Config
	// SessionStore is the policy's store when Policy is on (a RedisStore,
	// say); nil makes a memory store from Sessions.
	SessionStore policy.Gate
	// Search configures glob and grep; a zero value finds rg on PATH.
	Search search.Config
	// Caps are the read window's caps (default render.DefaultCaps()).
	Caps render.Caps
	// Profile is the tools' surface (default render.ProfileExtended).
	Profile render.Profile
	// REST is the REST transport's configuration (token, CORS, body cap,
	// session headers, ...). MaxBodyBytes defaults to 32 MiB and
	// StreamWriteWindow to 30s.
	REST handlers.Config
	// MCP configures the /mcp transport (docs/mcp.md). Its Sessions,
	// Origins, MaxBodyBytes and Logger come from REST and Logger;
	// SessionTimeout and MaxSessions default to the policy's session TTL
	// and bound.
	MCP mcp.Config
	// Cache sizes the read caches; nil is tools.DefaultCacheConfig(), and a
	// zero Bytes turns them off.
	Cache *tools.CacheConfig
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Events switches the change feed GET /events on (docs/events.md); nil
	// leaves it off.
	Events *Events
	// Sandbox is the fence on writes and edits ("" = off; docs/sandbox.md).
	Sandbox tools.SandboxMode
	// NoApprovals leaves escalations without an approval channel
	// (--approvals=false): each is denied at once.
	NoApprovals bool
	// Approvals bounds the pending approvals (Max, Timeout); OnOpen and
	// OnEnd are the server's own (metrics, logs).
	Approvals approval.Config
}

// Events configures the change feed.
type Events struct {
	Hub events.Config
	// NoWatch leaves external changes out: no inotify watcher, only the
	// mutations made through the tools.
	NoWatch bool
	// Watch bounds the watcher; its Root, Version, Logger and Metrics are
	// the server's.
	Watch events.WatchConfig
}

// Server is a built server: Handler serves every route. Close releases the
// provider's resources.
type Server struct {
	Handler  http.Handler
	Root     string // the workspace root, as the provider resolved it
	Metrics  *handlers.Metrics
	Executor *tools.Executor
	// Store is the policy's memory session store, nil when the policy is
	// off or Options.SessionStore was given.
	Store    *policy.Store
	Searcher *search.Searcher
	// MCP is the /mcp transport; call its Close when shutting down (its
	// GET streams do not end on their own).
	MCP *mcp.Handler
	// Events is the change feed's hub, nil when it is off. Close it when
	// the HTTP server starts draining: open streams never end by themselves.
	Events *events.Hub
	// Approvals are the pending sandbox escalations. Close it when the HTTP
	// server starts draining: no person can decide them any more.
	Approvals *approval.Store
	local     *fs.Local
	watcher   *events.Watcher
}

// New builds a server from o.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Caps == (render.Caps{}) {
		o.Caps = render.DefaultCaps()
	}
	if o.REST.MaxBodyBytes == 0 {
		o.REST.MaxBodyBytes = 32 << 20
	}
	if o.REST.StreamWriteWindow == 0 {
		o.REST.StreamWriteWindow = 30 * time.Second
	}
	local, err := fs.NewLocal(o.Root, o.FS)
	if err != nil {
		return nil, err
	}
	if c := local.StartupSweep(); c.Removed > 0 || c.InUse > 0 {
		o.Logger.Info("start-up sweep of temporary files", "removed", c.Removed, "in_use", c.InUse)
	}
	s := &Server{Root: local.Root(), Metrics: handlers.NewMetrics(), Searcher: search.New(o.Search), local: local}
	var gate policy.Gate // nil: the policy is off
	switch {
	case !o.Policy:
	case o.SessionStore != nil:
		gate = o.SessionStore
	default:
		s.Store = policy.NewStore(o.Sessions)
		gate = s.Store
	}
	if gate != nil {
		s.Metrics.WatchSessions(gate)
	}
	s.Metrics.WatchSearch(s.Searcher.Sandboxed)
	var onMutation func(tools.Mutation)
	var beforeMutation func(fs.Target)
	if o.Events != nil {
		if onMutation, beforeMutation, err = s.startEvents(*o.Events, o.Logger); err != nil {
			local.Close()
			return nil, err
		}
	}
	cache := tools.DefaultCacheConfig()
	if o.Cache != nil {
		cache = *o.Cache
	}
	s.Approvals = newApprovals(o.Approvals, s.Metrics, o.Logger, s.publishApproval)
	var channel *approval.Store // nil: no approval channel
	if !o.NoApprovals {
		channel = s.Approvals
	}
	s.Executor = tools.New(tools.Options{
		FS: local, Gate: gate, Search: s.Searcher, Caps: o.Caps, Profile: o.Profile,
		Observer: s.Metrics, Logger: o.Logger, OnMutation: onMutation, BeforeMutation: beforeMutation, Cache: cache,
		Sandbox: o.Sandbox, Approvals: channel,
	})
	mc := o.MCP
	mc.Sessions, mc.Origins, mc.MaxBodyBytes, mc.Logger = o.REST.Sessions, o.REST.CORSOrigins, o.REST.MaxBodyBytes, o.Logger
	if mc.SessionTimeout == 0 {
		mc.SessionTimeout = o.Sessions.TTL
	}
	if mc.MaxSessions == 0 {
		mc.MaxSessions = o.Sessions.MaxSessions
	}
	s.MCP = mcp.New(mc, s.Executor)
	s.Handler, err = handlers.NewServer(o.REST, handlers.Deps{
		Executor: s.Executor, Metrics: s.Metrics, Logger: o.Logger, MCP: s.MCP, Events: s.Events,
		Approvals: s.Approvals,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// startEvents builds the change feed's hub and, unless told not to, the
// watcher of external changes; it returns the executor's mutation hooks:
// one publishes each write and edit, the other announces it before it runs
// so its inotify echo is never reported as external (docs/events.md).
func (s *Server) startEvents(o Events, log *slog.Logger) (func(tools.Mutation), func(fs.Target), error) {
	em := events.NewMetrics(s.Metrics.Registry)
	o.Hub.Metrics = em
	s.Events = events.NewHub(o.Hub)
	// Keys are real paths (symlinks resolved), as the watcher reports
	// changes: one file has one path in the feed.
	realRoot, err := filepath.EvalSymlinks(s.Root)
	if err != nil {
		return nil, nil, err
	}
	if !o.NoWatch {
		w := o.Watch
		w.Root, w.Logger, w.Metrics = realRoot, log, em
		w.Version = s.version
		if s.watcher, err = events.NewWatcher(s.Events, w); err != nil {
			s.Events.Close()
			return nil, nil, err
		}
	}
	hub := s.Events
	// The root itself is never a file: it has no relative path.
	relOf := func(t fs.Target) (string, bool) { return strings.CutPrefix(string(t.Key), realRoot+"/") }
	before := func(t fs.Target) {
		if rel, ok := relOf(t); ok {
			hub.Expect(rel)
		}
	}
	return func(m tools.Mutation) {
		rel, ok := relOf(m.Target)
		if !ok {
			return
		}
		t := events.TypeWrite
		if m.Tool == tools.ToolEdit {
			t = events.TypeEdit
		}
		hub.Publish(events.Event{Type: t, Path: rel, Session: m.Session, Version: string(m.Version), Diffs: m.Diffs})
	}, before, nil
}

// version is the provider's version of a root-relative file, so the
// watcher can tell a mutation's own inotify echo from a later change.
func (s *Server) version(rel string) (string, bool) {
	ctx := context.Background()
	t, err := s.local.Resolve(ctx, "read", rel, "")
	if err != nil {
		return "", false
	}
	info, err := s.local.Stat(ctx, t)
	if err != nil || info.Type != fs.TypeFile {
		return "", false
	}
	return string(info.Version), true
}

// newApprovals is the approvals store, its outcomes counted and every
// approval logged when it opens and when it ends (never file contents).
func newApprovals(cfg approval.Config, m *handlers.Metrics, log *slog.Logger, publish func(approval.Approval)) *approval.Store {
	cfg.OnOpen = func(a approval.Approval) {
		log.Info("approval pending", "id", a.ID, "session", a.Session, "tool", a.Tool, "path", a.Path, "mode", a.Mode)
		publish(a)
	}
	cfg.OnEnd = func(a approval.Approval, o approval.Outcome) {
		m.Approval(string(o))
		log.Info("approval ended", "id", a.ID, "decision", string(o), "session", a.Session, "tool", a.Tool, "path", a.Path, "mode", a.Mode)
	}
	st := approval.New(cfg)
	m.WatchApprovals(st.Len)
	return st
}

// publishApproval tells the change feed, when it is on, of a pending
// approval: {type: "approval", path (relative to the root), session,
// approval} (docs/events.md, docs/sandbox.md).
func (s *Server) publishApproval(a approval.Approval) {
	if s.Events == nil {
		return
	}
	rel, ok := strings.CutPrefix(a.Path, s.Root+"/")
	if !ok {
		rel = "" // not spelled under the root: no path rather than an absolute one
	}
	s.Events.Publish(events.Event{Type: events.TypeApproval, Path: rel, Session: a.Session, Approval: a})
}

// Close ends the pending approvals, stops the change feed and releases the
// provider (its root and private-folder descriptors, its sweeper).
func (s *Server) Close() error {
	s.Approvals.Close()
	if s.watcher != nil {
		s.watcher.Close()
	}
	if s.Events != nil {
		s.Events.Close()
	}
	return s.local.Close()
}
