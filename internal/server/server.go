// Package server builds a whole toolfs-api server from options: the local
// provider, the policy, the searcher, the executor, the metrics and the
// transports. It is the one place that wires them (docs/architecture.md),
// used by cmd/toolfs-api, bench/, test/reliability/ and the tests, so a new
// dependency or transport is added once.
package server

import (
	"io"
	"log/slog"
	"net/http"
	"time"

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
	// Logger defaults to discarding.
	Logger *slog.Logger
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
	MCP   *mcp.Handler
	local *fs.Local
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
	s.Executor = tools.New(tools.Options{
		FS: local, Gate: gate, Search: s.Searcher, Caps: o.Caps, Profile: o.Profile,
		Observer: s.Metrics, Logger: o.Logger,
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
		Executor: s.Executor, Metrics: s.Metrics, Logger: o.Logger, MCP: s.MCP,
	})
	if err != nil {
		local.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the provider (its root and private-folder descriptors, its
// sweeper).
func (s *Server) Close() error { return s.local.Close() }
