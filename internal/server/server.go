// Package server builds a whole toolfs-api server from one Config: the
// local provider, the policy and its session store, the searcher, the
// executor, the metrics, the change feed, the approvals and the transports
// (REST with its views, and MCP at /mcp), and serves them until Shutdown,
// which owns the drain order. It is the one place that wires them
// (docs/architecture.md), used by cmd/toolfs-api, bench/, test/ and the
// tests (servertest), so a new dependency, store or transport is added
// once.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/console"
	"github.com/toolfs/toolfs-api/internal/diagnostics"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/handlers"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/journal"
	"github.com/toolfs/toolfs-api/internal/mcp"
	"github.com/toolfs/toolfs-api/internal/metrics"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/sandbox"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/telemetry"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// AccessLogMessage is the message of the access log's records, one per
// request (cmd/toolfs-api batches them).
const AccessLogMessage = handlers.AccessLogMessage

// AccessLine is one request's access log record; a logger whose handler
// has a WriteAccess(*AccessLine) bool method writes it itself
// (handlers.AccessWriter).
type AccessLine = handlers.AccessLine

// AppendAccessLine appends l as slog's text (or JSON) handler would write
// the access log's record, or reports false (handlers.AppendAccessLine).
func AppendAccessLine(dst []byte, l *AccessLine, json bool) ([]byte, bool) {
	return handlers.AppendAccessLine(dst, l, json)
}

// LockFiles is where the default --lock-dir keeps the cross-process lock
// files, as the flag's help names it (docs/decisions-fs.md).
const LockFiles = "<root>/" + fs.PrivateDir + "/locks"

// RunSandboxChildIfRequested runs the sandbox's child, which confines rg
// and the checkers (docs/search.md, docs/diagnostics.md), and exits when
// this process is one; otherwise it returns at once. main calls it first:
// the sandbox re-executes the server's binary.
func RunSandboxChildIfRequested() { sandbox.RunChildIfRequested() }

// Server is a built server. Handler serves every route; Listen and Serve
// serve it on Config.Addr, or a test serves Handler itself. Shutdown ends
// it, whichever way it was served.
type Server struct {
	Handler http.Handler
	Root    string // the workspace root, as the provider resolved it
	// Store is the policy's memory session store; nil when the policy is
	// off or the store is Redis.
	Store    *policy.Store
	Searcher *search.Searcher

	cfg       Config
	log       *slog.Logger
	local     *fs.Local
	gate      policy.Gate   // WithSessionStore's, else built by sessionStore
	redis     *redis.Client // nil: no Redis store
	metrics   *metrics.Metrics
	executor  *tools.Executor
	mcp       *mcp.Handler
	mcpConfig mcp.Config
	// sessions are the MCP sessions ServeMCP serves; draining closes them.
	sessions struct {
		sync.Mutex
		open     []*sdk.ServerSession
		draining bool
	}
	hub       *events.Hub // nil: the change feed is off
	approvals *approval.Store
	ckpt      *checkpoint.Store   // nil: --checkpoints=false
	journal   *checkpoint.Store   // with --checkpoints=false: the journal-only store
	checkers  *diagnostics.Runner // nil: no --diagnostics
	audit     *audit.Log          // nil: no --audit-log
	wal       *journal.Journal    // the journal of records; nil: --journal=false, or nothing recorded
	ready     *readiness          // GET /readyz's checks

	http       *http.Server
	listener   net.Listener
	base       context.Context // of every request and MCP call
	cancelBase context.CancelFunc
	// endStreams ends what never ends by itself (pending approvals, MCP
	// GET streams, event streams), once, when the drain starts.
	endStreams func()
	shutdown   func(context.Context) error
	// parts are what New made, closed in reverse by release.
	parts parts
	// The early ends of the drain: each closes its part once (parts.add).
	closeApprovals, closeMCP, closeHub func() error
}

// Option gives New a dependency it would otherwise build from Config.
type Option func(*Server)

// WithSessionStore makes gate the policy's session store in place of the
// one Config.SessionStore names (tests: a Redis store on a test's clock).
// New refuses it with the policy off.
func WithSessionStore(gate policy.Gate) Option {
	return func(s *Server) { s.gate = gate }
}

// New builds a server from cfg, logging to log (nil: discarded). A zero
// field of cfg takes its default where Config says so; a value no server
// can run with is refused, as Validate words it.
func New(cfg Config, log *slog.Logger, opts ...Option) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validateSettings(); err != nil {
		return nil, err
	}
	if cfg.Stdio {
		cfg.Events.Enabled = false
	}
	s := &Server{cfg: cfg, log: log, metrics: metrics.New()}
	s.metrics.BuildInfo(cfg.Version, runtime.Version())
	for _, o := range opts {
		o(s)
	}
	if s.gate != nil && !cfg.Policy.Enabled {
		return nil, errors.New("server: a session store was given with the policy off")
	}
	ok, walKept := false, false
	defer func() {
		if !ok {
			if s.wal != nil && !walKept {
				s.wal.Close() // before the files its records describe
			}
			s.release() // what was made, in reverse
		}
	}()
	// First made, so flushed last of what a call uses: after the drain
	// every span has ended.
	tracing, err := telemetry.New(cfg.Telemetry, cfg.Version, log)
	if err != nil {
		return nil, err
	}
	if tracing != nil {
		s.parts.add("traces", tracing.Shutdown)
		log.Info("traces: a span per tool call over OTLP", "endpoint", cfg.Telemetry.Endpoint, "protocol", cfg.Telemetry.OTLPProtocol())
	}
	gate, err := s.sessionStore()
	if err != nil {
		return nil, err
	}
	s.local, err = fs.NewLocal(cfg.Root, fs.LocalOptions{InProcessLocksOnly: cfg.LockDir == "off"})
	if err != nil {
		return nil, err
	}
	s.parts.add("provider", s.local.Close)
	s.Root = s.local.Root()
	if c := s.local.StartupSweep(); c.Removed > 0 || c.InUse > 0 {
		log.Info("start-up sweep of temporary files", "removed", c.Removed, "in_use", c.InUse)
	}
	orphans, err := s.openJournal()
	if err != nil {
		return nil, err
	}
	if err := s.openCheckpoints(records(orphans)); err != nil {
		return nil, err
	}
	s.Searcher = search.New(cfg.Search.Config())
	s.logSearch()
	s.metrics.WatchSearch(s.Searcher.Sandboxed)
	var onMutation func(tools.Mutation)
	var beforeMutation func(fs.Target)
	if cfg.Events.Enabled {
		if onMutation, beforeMutation, err = s.startEvents(); err != nil {
			return nil, err
		}
	}
	if s.checkers, err = s.newCheckers(); err != nil {
		return nil, err
	}
	s.approvals = s.newApprovals()
	s.closeApprovals = s.parts.add("approvals", noErr(s.approvals.Close))
	guard, verifier, err := s.identities()
	if err != nil {
		return nil, err
	}
	if err := s.replayAudit(orphans); err != nil {
		return nil, err
	}
	if cfg.Audit.Path != "" {
		if s.audit, err = audit.Open(cfg.Audit.Path, audit.Options{OnError: s.metrics.AuditWriteError}); err != nil {
			return nil, fmt.Errorf("--audit-log %s: %w", cfg.Audit.Path, err)
		}
		// Closed after the drain, so every request in flight got its record.
		s.parts.add("audit log", s.audit.Close)
		log.Info("audit log", "path", cfg.Audit.Path)
	}
	if err := s.retireOrphans(orphans); err != nil {
		return nil, err
	}
	if s.wal != nil {
		// A part only now, after the audit log and the histories whose
		// records it syncs, so it is closed before them.
		s.parts.add("journal of records", s.wal.Close)
		walKept = true
	}
	s.executor = tools.New(tools.Options{
		FS: s.local, Gate: gate, Search: s.Searcher,
		Caps:     cfg.Tools.Caps(),
		Images:   cfg.Images,
		Profile:  render.Profile(cfg.Tools.Profile),
		Dialect:  render.Dialect(cfg.Tools.EditDialect),
		Observer: s.metrics, Logger: log, OnMutation: onMutation, BeforeMutation: beforeMutation,
		Cache: cfg.Cache,
		Fence: tools.Fence(cfg.Tools.SandboxMode), Approvals: s.approvals, DenyEscalations: cfg.Approvals.Deny,
		ApproveBy: cfg.approveBy(),
		// --stdio serves no /approvals: only the client's own user can be
		// asked (docs/mcp.md, "Over stdio").
		ApprovalsUnreachable: cfg.Stdio,
		Checkpoints:          s.ckpt, Journal: s.journal,
		Diagnostics: s.checkers,
		Files:       cfg.Files,
		Audit:       s.audit, AuditToken: cfg.Token != "" || cfg.ApproverToken != "",
		WAL: s.wal,
	})
	sessions := cfg.Sessions.Sessions()
	key, _ := cfg.elicitationKey() // Validate checked it
	if key, err = s.approvals.Key(key); err != nil {
		// Each replica seals with its own key: an answer retried on another
		// is refused, and its client asked again there.
		log.Warn("the replicas cannot share the elicitation key through Redis: this one uses its own", "err", err)
		key = nil
	}
	s.mcpConfig = mcp.Config{
		ElicitKey: key,
		Sessions:  sessions, Origins: commaList(cfg.CORSOrigins), Structured: cfg.MCP.Structured, MaxBodyBytes: cfg.MaxBodyBytes,
		SessionTimeout: cfg.Policy.TTL, MaxSessions: cfg.Policy.MaxSessions, AnswerBudget: cfg.MCPAnswerBudget, Logger: log,
		Redis: s.shared(), Prefix: cfg.SessionKeyPrefix, Deny: handlers.Deny(log), Version: cfg.Version,
		Tracing: tracing,
	}
	s.mcp = mcp.New(s.mcpConfig, s.executor)
	s.closeMCP = s.parts.add("MCP sessions", noErr(s.mcp.Close))
	s.ready = newReadiness(s.dependencies(verifier), log)
	s.parts.add("readiness checks", noErr(s.ready.Close))
	ui, err := s.console(guard != nil)
	if err != nil {
		return nil, err
	}
	s.Handler, err = handlers.NewServer(handlers.Config{
		Token: cfg.Token, ApproverToken: cfg.ApproverToken, MetricsToken: cfg.MetricsToken, CORSOrigins: commaList(cfg.CORSOrigins),
		MaxBodyBytes: cfg.MaxBodyBytes, StreamWriteWindow: cfg.StreamWriteWindow,
		UploadPace:    cfg.Upload,
		LoopbackHosts: cfg.Token == "" && guard == nil && cfg.loopback(),
		Sessions:      sessions, PublicURL: strings.TrimRight(cfg.PublicURL, "/"),
		OAuth: guard, Version: cfg.Version, Profile: cfg.Tools.Profile, Dialect: cfg.Tools.EditDialect, SandboxMode: cfg.Tools.SandboxMode,
	}, handlers.Deps{
		Executor: s.executor, Metrics: s.metrics.Handler(), Logger: log, MCP: s.mcp, Events: s.hub, Ready: s.ready.Ready,
		Sessions: s.sessionCount(gate), Console: ui, Tracing: tracing,
	})
	if err != nil {
		return nil, err
	}
	if cfg.ApproverToken != "" && cfg.approveBy() != tools.ApproveByApprovals {
		log.Warn("--approve-by " + string(cfg.approveBy()) + " with --approver-token: an MCP client's own user can approve escalations too")
	}
	if cfg.Tools.SandboxMode != string(tools.FenceOff) && !cfg.Approvals.Deny && cfg.Token != "" && cfg.ApproverToken == "" {
		log.Warn("escalations can be approved with the agent's own --token: set --approver-token so only a person's client can decide them")
	}

	// Request contexts derive from base, so streams stop when the grace
	// ends.
	base, cancel := context.WithCancel(context.Background())
	s.base, s.cancelBase = base, cancel
	s.http = &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	s.endStreams = sync.OnceFunc(func() {
		// Pending approvals would hold the drain until their timeout, MCP
		// GET streams and event streams until the grace runs out: none of
		// them ends by itself.
		s.closeApprovals()
		s.closeMCP()
		if s.closeHub != nil {
			s.closeHub()
		}
	})
	s.http.RegisterOnShutdown(s.endStreams)
	var once sync.Once
	var shutdownErr error
	s.shutdown = func(ctx context.Context) error {
		once.Do(func() { shutdownErr = s.drain(ctx) })
		return shutdownErr
	}
	ok = true
	return s, nil
}

// Listen opens Config.Addr and logs that the server listens there, with
// attrs after the server's own; it returns the address (the port chosen
// for ":0").
func (s *Server) Listen(attrs ...any) (net.Addr, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, err
	}
	s.listener = ln
	s.log.Info("listening", append([]any{"addr", ln.Addr().String(), "root", s.Root, "policy", s.cfg.Policy.Enabled, "sandbox-mode", s.cfg.Tools.SandboxMode,
		"auth", s.cfg.Token != "", "oauth-issuer", s.cfg.Identity.Issuer, "session-store", redactURL(s.cfg.SessionStore)}, attrs...)...)
	return ln.Addr(), nil
}

// ServeMCP serves one MCP session of the tools on t (--stdio: the
// process's standard input and output, docs/mcp.md "Over stdio"), built as
// /mcp builds its own, until the client ends it or Shutdown closes it; then
// it returns nil. Shutdown stops it taking calls and waits for those in
// flight, as it waits for HTTP requests.
func (s *Server) ServeMCP(t sdk.Transport) error {
	srv := mcp.NewServer(s.mcpConfig, s.executor)
	// The SDK never cancels a call of a session by the session's context:
	// a call still running when the drain's grace runs out is cancelled as
	// an HTTP request's is.
	base := s.base
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer context.AfterFunc(base, cancel)()
			defer cancel()
			return next(ctx, method, req)
		}
	})
	ss, err := srv.Connect(context.Background(), t, nil)
	if err != nil {
		return err
	}
	s.sessions.Lock()
	draining := s.sessions.draining
	if !draining {
		s.sessions.open = append(s.sessions.open, ss)
	}
	s.sessions.Unlock()
	if draining {
		ss.Close()
	}
	return ss.Wait()
}

// ServeStdio is ServeMCP on r and w, newline-delimited JSON-RPC as the
// MCP stdio transport speaks it (--stdio: the process's stdin and stdout).
// One message is at most --max-body-bytes, not the SDK's 16 MiB default,
// so a write as large as HTTP takes passes. w is never closed.
func (s *Server) ServeStdio(r io.Reader, w io.Writer) error {
	return s.ServeMCP(&sdk.IOTransport{Reader: io.NopCloser(r), Writer: nopCloser{w}, MaxLineLength: int(s.cfg.MaxBodyBytes)})
}

// nopCloser is a writer the transport may close without closing it.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// closeSessions closes ServeMCP's sessions, each once the calls in flight
// in it have ended; the channel is closed when all of them are.
func (s *Server) closeSessions() <-chan struct{} {
	s.sessions.Lock()
	s.sessions.draining = true
	open := s.sessions.open
	s.sessions.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for _, ss := range open {
			wg.Go(func() { ss.Close() })
		}
		wg.Wait()
	}()
	return done
}

// Serve serves Handler on what Listen opened until Shutdown, then returns
// nil.
func (s *Server) Serve() error {
	if s.listener == nil {
		return errors.New("server: Serve before Listen")
	}
	if err := s.http.Serve(s.listener); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown drains the server, in this order: it stops accepting
// connections and ends the pending approvals, the MCP GET streams and the
// event streams (none ends by itself); it waits for the requests in flight
// until ctx is done, then cancels what is left; then it closes what New
// made in the reverse order of making (the readiness checks, the audit
// log, the checkers, the watcher of external changes, the change feed, the
// histories, the provider with its root and private-folder descriptors and
// its sweeper, the Redis client). Each step runs once, however often
// Shutdown is called; the error is ctx's when requests were still
// running.
func (s *Server) Shutdown(ctx context.Context) error { return s.shutdown(ctx) }

func (s *Server) drain(ctx context.Context) error {
	sessions := s.closeSessions()
	err := s.http.Shutdown(ctx)
	if err == nil {
		select {
		case <-sessions:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		s.cancelBase()
		s.http.Close()
	}
	s.endStreams() // waits for the hook Shutdown started, or runs it
	s.cancelBase()
	s.release()
	return err
}

// ReopenAuditLog opens --audit-log's path anew (SIGHUP, after a rotation
// renamed the file: docs/audit.md); without the flag it does nothing. On
// error the log keeps writing to its old file.
func (s *Server) ReopenAuditLog() error {
	if s.audit == nil {
		return nil
	}
	return s.audit.Reopen()
}

// AuditStats are the audit log's counts (zero without --audit-log).
func (s *Server) AuditStats() audit.Stats {
	if s.audit == nil {
		return audit.Stats{}
	}
	return s.audit.Stats()
}

// release closes what New made, in the reverse order of making (parts):
// after the drain, or when New fails half way.
func (s *Server) release() { s.parts.closeAll(s.log) }

// identities builds the verifier of --oauth-issuer's tokens (nil without
// the flag): it discovers the issuer's metadata and fetches its keys now,
// so a wrong issuer stops start-up rather than refusing every request
// later (docs/identity.md).
func (s *Server) identities() (*identity.Guard, *identity.Verifier, error) {
	cfg := s.cfg
	if cfg.Identity.Issuer == "" {
		return nil, nil, nil
	}
	public := strings.TrimRight(cfg.PublicURL, "/")
	audiences := commaList(cfg.Identity.Audience)
	if len(audiences) == 0 {
		audiences = identity.DefaultAudiences(public)
	}
	log := s.log
	ctx, cancel := context.WithTimeout(context.Background(), 2*identity.DefaultFetchTimeout)
	defer cancel()
	v, err := identity.NewVerifier(ctx, identity.Options{
		Issuer: cfg.Identity.Issuer, Audiences: audiences, Leeway: cfg.Identity.Leeway, MinRefresh: cfg.Identity.MinRefresh,
		OnKeyFetch: func(f identity.KeyFetch) {
			if f.Err != nil {
				log.Warn("oauth: cannot fetch the issuer's keys; keeping the ones held", "reason", f.Reason, "err", f.Err)
				return
			}
			log.Info("oauth: fetched the issuer's keys", "reason", f.Reason, "keys", f.Keys)
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("--oauth-issuer %s: %w", cfg.Identity.Issuer, err)
	}
	log.Info("oauth: a resource server for the issuer", "issuer", v.Issuer(), "audiences", audiences, "metadata", public+identity.MetadataPath)
	return &identity.Guard{Resource: identity.Resource{PublicURL: public, Issuer: v.Issuer()}, Verifier: v}, v, nil
}

// newCheckers reads --diagnostics and prepares its checkers (nil without
// the flag). A bad file stops start-up with the package's message, which
// names the field at fault (docs/diagnostics.md, "Configuration").
func (s *Server) newCheckers() (*diagnostics.Runner, error) {
	set := s.cfg.Diagnostics
	if set.File == "" {
		return nil, nil
	}
	checkers, err := diagnostics.LoadConfig(set.File)
	if err == nil {
		var r *diagnostics.Runner
		r, err = diagnostics.New(diagnostics.Config{
			Root: s.Root, Checkers: checkers, Timeout: set.Timeout,
			Sandbox: sandbox.Requirement(s.cfg.Search.Sandbox), Logger: s.log,
		})
		if err == nil {
			s.parts.add("checkers", r.Close)
			s.log.Info("diagnostics", "checkers", r.Checkers(), "confined", r.Confined(), "timeout", set.Timeout.String())
			return r, nil
		}
	}
	return nil, fmt.Errorf("--diagnostics %s: %w", set.File, err)
}

// The journal-only store's bounds: a file of a change of several files is
// kept whole up to apply_patch's own bound on a file it reads
// (tools.MaxPatchFileBytes), and the store's bound only evicts done changes,
// which it does not keep anyway.
const (
	journalMaxFileBytes = tools.MaxPatchFileBytes
	journalBytes        = 1 << 30
)

// checkpointStartup bounds the start-up's recovery of the change
// histories and its first enforcement of their bounds.
const checkpointStartup = 10 * time.Second

// openCheckpoints opens the change histories of the root, completing what
// a crash interrupted (a revert is finished or undone as a whole;
// docs/checkpoints.md, "Crashes"). A history lives as long as its session
// (--session-ttl, counted from its last use).
//
// With --checkpoints=false it opens the journal-only store instead, which
// keeps a change of several files (apply_patch) all or nothing across a
// crash and nothing once it is done (docs/checkpoints.md, "Without
// checkpoints"): every file a patch reads is kept while it is made
// (journalMaxFileBytes, the most apply_patch reads of one file).
func (s *Server) openCheckpoints(replay []journal.Record) error {
	cfg := s.cfg
	opts := checkpoint.Options{
		FS: s.local, Bytes: cfg.Checkpoints.Bytes, MaxFileBytes: cfg.Checkpoints.MaxFileBytes, TTL: cfg.Policy.TTL, Logger: s.log,
		Replay: replay,
	}
	if s.wal != nil { // a nil *journal.Journal is not a nil Segments
		opts.Segments = s.wal
	}
	if !cfg.Checkpoints.Enabled {
		opts = checkpoint.Options{FS: s.local, JournalOnly: true, Bytes: journalBytes, MaxFileBytes: journalMaxFileBytes, Logger: s.log}
	}
	// A lock another live process on the root holds (a replica mid-write)
	// delays start-up by this much at most: what it guards is that
	// process's to finish, and the bounds are enforced again later
	// (docs/checkpoints.md, "Crashes").
	ctx, cancel := context.WithTimeout(context.Background(), checkpointStartup)
	defer cancel()
	st, err := checkpoint.Open(ctx, opts)
	if err != nil {
		return fmt.Errorf("checkpoints: %w", err)
	}
	if !cfg.Checkpoints.Enabled {
		s.journal = st
		s.parts.add("journal-only store", st.Close)
	} else {
		s.ckpt = st
		s.parts.add("checkpoints", st.Close)
	}
	if r := st.Recovered(); r.Settled > 0 || r.RolledForward > 0 || r.RolledBack > 0 || len(r.Failed) > 0 {
		attrs := []any{"settled", r.Settled, "reverts_finished", r.RolledForward, "reverts_undone", r.RolledBack}
		if len(r.Failed) > 0 {
			s.log.Error("checkpoints: interrupted reverts could be neither finished nor undone", append(attrs, "failed", r.Failed)...)
		} else {
			s.log.Info("checkpoints: completed what a crash interrupted", attrs...)
		}
	}
	return nil
}

// sessionStore is the policy's gate: nil with the policy off, the memory
// store, or the Redis store of Config.SessionStore. Start-up does not wait
// for Redis: reads work without it, and the client connects once it is up
// (docs/deployment.md).
func (s *Server) sessionStore() (policy.Gate, error) {
	cfg := s.cfg
	if cfg.SessionStore != "memory" {
		// The session store's Redis also shares the pending approvals and
		// the change feed between replicas, with the policy on or off
		// (docs/deployment.md, "Approvals and the change feed").
		opts, err := redisOptions(cfg.SessionStore)
		if err != nil {
			return nil, err
		}
		// go-redis logs through one process-wide logger; its messages
		// repeat the causes the store's errors carry, so they go to debug.
		redis.SetLogger(redisLogger{s.log})
		s.redis = redis.NewClient(opts)
		s.parts.add("Redis client", s.redis.Close)
	}
	if !cfg.Policy.Enabled {
		return nil, nil
	}
	if s.gate != nil {
		s.metrics.WatchSessions(s.gate)
		return s.gate, nil
	}
	storeCfg := cfg.Policy.Config()
	var gate policy.Gate
	if cfg.SessionStore == "memory" {
		s.Store = policy.NewStore(storeCfg)
		gate = s.Store
	} else {
		// Start-up does not wait for it: the readiness checks log whether
		// it can serve, and why not (refused credentials or database, or
		// unreachable).
		gate = policy.NewRedisStore(s.redis, storeCfg, policy.RedisOptions{Prefix: cfg.SessionKeyPrefix})
	}
	s.metrics.WatchSessions(gate)
	return gate, nil
}

// dependencies are what /readyz checks: the Redis of --session-store
// and the issuer of --oauth-issuer, when configured.
func (s *Server) dependencies(v *identity.Verifier) []dependency {
	var deps []dependency
	if s.redis != nil {
		deps = append(deps, redisDependency(s.redis, s.cfg.SessionStore))
	}
	if v != nil {
		deps = append(deps, issuerDependency(v, v.Issuer()))
	}
	return deps
}

// shared is the Redis that shares approvals and the change feed between
// replicas: the session store's, or nil (an interface holding no client).
func (s *Server) shared() redis.UniversalClient {
	if s.redis == nil {
		return nil
	}
	return s.redis
}

// redisLogger routes go-redis's own messages to the server's log at debug
// level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// logSearch says whether glob and grep can run, and confined or not.
func (s *Server) logSearch() {
	switch sr := s.Searcher; {
	case !sr.Available():
		s.log.Warn("glob and grep are unavailable", "reason", sr.UnavailableReason(), "rg-path", s.cfg.Search.RgPath, "search-sandbox", s.cfg.Search.Sandbox)
	case !sr.Sandboxed():
		s.log.Warn("search sandbox off: rg runs unconfined, so a folder swapped for a symlink during a search can lead it outside the root (--search-sandbox best-effort without Landlock)")
	default:
		s.log.Info("search sandbox on: rg is confined to the root by Landlock")
	}
}

// startEvents builds the change feed's hub and, unless
// Config.Events.MaxWatches is 0, the watcher of external changes; it returns
// the executor's mutation hooks: one publishes each write and edit, the
// other announces it before it runs so its inotify echo is never reported
// as external (docs/events.md).
func (s *Server) startEvents() (func(tools.Mutation), func(fs.Target), error) {
	cfg := s.cfg
	em := events.NewMetrics(s.metrics.Registerer())
	s.hub = events.NewHub(events.Config{MaxSubscribers: cfg.Events.MaxSubscribers, Heartbeat: cfg.Events.Heartbeat, Metrics: em,
		Redis: s.shared(), Prefix: cfg.SessionKeyPrefix, Logger: s.log})
	s.closeHub = s.parts.add("change feed", noErr(s.hub.Close))
	if cfg.Events.MaxWatches > 0 {
		w, err := events.Watch(s.hub, events.WatchConfig{
			Workspace: s.local, MaxWatches: cfg.Events.MaxWatches, Quiet: cfg.EventsQuiet, Version: s.version, Logger: s.log, Metrics: em,
		})
		if err != nil {
			return nil, nil, err
		}
		s.parts.add("watcher", w.Close)
	}
	hub, local := s.hub, s.local
	// Where the file really is, as the watcher reports changes: one file
	// has one path in the feed. The root itself is never a file.
	relOf := func(t fs.Target) (string, bool) {
		rel, ok := local.Rel(t)
		return rel, ok && rel != ""
	}
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
		switch m.Tool {
		case tools.ToolEdit, tools.ToolEditLines:
			t = events.TypeEdit
		case tools.ToolRevert:
			t = events.TypeRevert
		case tools.OpUpload:
			t = events.TypeUpload
		case tools.OpDelete:
			t = events.TypeDelete
		case tools.ToolMkdir:
			t = events.TypeMkdir
		case tools.ToolMove:
			// The source is removed, the destination written.
			t = events.TypeWrite
			if m.Version == "" {
				t = events.TypeDelete
			}
		case tools.ToolApplyPatch:
			// Each file of a patch: an edit, or a delete when the patch
			// removed it (a deletion, or the source of a move).
			t = events.TypeEdit
			if m.Version == "" {
				t = events.TypeDelete
			}
		}
		hub.Publish(events.Event{Type: t, Path: rel, Session: m.Session, Subject: m.Subject, Version: string(m.Version), Diffs: m.Diffs})
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
// approval logged when it opens and when it ends (never file contents);
// with the change feed on, a new approval is published too.
func (s *Server) newApprovals() *approval.Store {
	log, m := s.log, s.metrics
	st := approval.New(approval.Config{
		Max: s.cfg.Approvals.Max, Timeout: s.cfg.Approvals.Timeout,
		Redis: s.shared(), Prefix: s.cfg.SessionKeyPrefix,
		OnOpen: func(a approval.Approval) {
			log.Info("approval pending", "id", a.ID, "session", a.Session, "tool", a.Tool, "path", a.Path, "mode", a.Mode)
			s.publishApproval(a)
		},
		OnEnd: func(a approval.Approval, o approval.Outcome) {
			m.Approval(string(o), a.Via)
			log.Info("approval ended", "id", a.ID, "decision", string(o), "via", a.Via, "session", a.Session, "tool", a.Tool, "path", a.Path, "mode", a.Mode)
		},
	})
	m.WatchApprovals(st.Len)
	return st
}

// publishApproval tells the change feed, when it is on, of a pending
// approval: {type: "approval", path (relative to the root), session,
// approval} (docs/events.md, docs/sandbox.md).
func (s *Server) publishApproval(a approval.Approval) {
	if s.hub == nil {
		return
	}
	rel, ok := strings.CutPrefix(a.Path, s.Root+"/")
	if !ok {
		rel = "" // not spelled under the root: no path rather than an absolute one
	}
	s.hub.Publish(events.Event{Type: events.TypeApproval, Path: rel, Session: a.Session, Subject: a.Subject, Approval: a})
}

// console builds the web console of --ui (docs/console.md), or nil.
func (s *Server) console(oauth bool) (http.Handler, error) {
	cfg := s.cfg
	if !cfg.Console.Enabled {
		return nil, nil
	}
	c := console.Config{Auth: console.AuthNone, Approver: cfg.ApproverToken != ""}
	switch {
	case oauth:
		c.Auth, c.Issuer, c.ClientID, c.Resource = console.AuthOAuth, cfg.Identity.Issuer, cfg.Console.ClientID, strings.TrimRight(cfg.PublicURL, "/")
		c.Scope = strings.Join([]string{identity.ScopeRead, identity.ScopeWrite, identity.ScopeApprove}, " ")
	case cfg.Token != "" || cfg.ApproverToken != "":
		c.Auth = console.AuthToken
	}
	return console.Handler(c, handlers.NoSuchEndpoint, handlers.MethodNotAllowed)
}

// sessionCount counts the sessions with observed state for GET /status;
// -1 when the store cannot say.
func (s *Server) sessionCount(gate policy.Gate) func() int {
	st, ok := gate.(interface {
		Stats() (sessions, observations int)
	})
	if !ok {
		return nil
	}
	return func() int { n, _ := st.Stats(); return n }
}
