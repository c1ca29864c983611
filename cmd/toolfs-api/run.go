package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/handlers"
	"github.com/toolfs/toolfs-api/internal/mcp"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// run starts the server and blocks until ctx is done, then drains in-flight
// requests. It takes the process's fundamentals as arguments so tests can
// run the whole server in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	// Access log lines wait at most 100 ms, the others not at all; Close,
	// deferred first so it runs last, writes out what is left.
	lw := newLogWriter(stderr, 100*time.Millisecond, 64<<10)
	defer lw.Close()
	log := newLogger(cfg.logFormat, lw)
	limit := "GOMEMLIMIT"
	if getenv("GOMEMLIMIT") == "" { // the operator's own limit wins
		n := memoryLimit(cfg)
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(n))
		limit = strconv.FormatInt(n>>20, 10) + " MiB"
	}

	storeCfg := policy.Config{TTL: cfg.sessionTTL, MaxSessions: cfg.maxSessions, MaxPathsPerSession: cfg.maxPaths}
	var store policy.Gate // nil: the memory store
	if cfg.policy && cfg.sessionStore != "memory" {
		opts, err := redisOptions(cfg.sessionStore)
		if err != nil {
			return err
		}
		// go-redis logs through one process-wide logger; its messages
		// repeat the causes the store's errors carry, so they go to debug.
		redis.SetLogger(redisLogger{log})
		client := redis.NewClient(opts)
		defer client.Close()
		rs := policy.NewRedisStore(client, storeCfg, policy.RedisOptions{Prefix: cfg.sessionKeyPrefix})
		// Start-up does not wait for Redis: reads work without it, and the
		// client connects once it is up (docs/deployment.md).
		if err := rs.Ping(ctx); err != nil {
			log.Warn("session store unreachable at start-up: writes and edits answer 503 until it is up", "session-store", redactURL(cfg.sessionStore), "err", err)
		}
		store = rs
	}
	built, err := server.New(server.Options{
		Root:         cfg.root,
		FS:           fs.LocalOptions{InProcessLocksOnly: cfg.lockDir == "off"},
		Policy:       cfg.policy,
		Sessions:     storeCfg,
		SessionStore: store,
		Search:       search.Config{RgPath: cfg.rgPath, Timeout: cfg.searchTimeout, MaxConcurrent: cfg.maxSearches, Sandbox: search.SandboxMode(cfg.searchSandbox)},
		Caps:         render.Caps{Limit: cfg.readLimit, MaxLineLength: cfg.readMaxLineLength, MaxBytes: cfg.readMaxBytes},
		Profile:      render.Profile(cfg.profile),
		REST: handlers.Config{
			Token:             cfg.token,
			CORSOrigins:       cfg.origins(),
			MaxBodyBytes:      cfg.maxBodyBytes,
			StreamWriteWindow: 30 * time.Second,
			LoopbackHosts:     cfg.token == "" && cfg.loopback(),
			Sessions:          cfg.sessions(),
			PublicURL:         cfg.publicBase(),
			ApproverToken:     cfg.approverToken,
		},
		Sandbox:     tools.SandboxMode(cfg.sandboxMode),
		NoApprovals: !cfg.approvals,
		Approvals:   approval.Config{Max: cfg.maxApprovals, Timeout: cfg.approvalTimeout},
		MCP:         mcp.Config{Structured: cfg.mcpStructured},
		Cache:       &tools.CacheConfig{Bytes: cfg.cacheBytes, RacyWindow: cfg.cacheRacyWindow},
		Logger:      log,
		Events:      eventsOptions(cfg),
	})
	if err != nil {
		return fmt.Errorf("--root: %w", err)
	}
	defer built.Close()
	switch sr := built.Searcher; {
	case !sr.Available():
		log.Warn("glob and grep are unavailable", "reason", sr.UnavailableReason(), "rg-path", cfg.rgPath, "search-sandbox", cfg.searchSandbox)
	case !sr.Sandboxed():
		log.Warn("search sandbox off: rg runs unconfined, so a folder swapped for a symlink during a search can lead it outside the root (--search-sandbox best-effort without Landlock)")
	default:
		log.Info("search sandbox on: rg is confined to the root by Landlock")
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	// Request contexts derive from base, so streams stop when the grace ends.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           built.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(built.MCP.Close) // MCP GET streams never end on their own
	if built.Events != nil {
		// Event streams never end by themselves: end them when the drain
		// starts, or they would hold it until the grace runs out.
		srv.RegisterOnShutdown(built.Events.Close)
	}
	// Pending approvals would hold the drain until their timeout: end them
	// (cancelled) as it starts.
	srv.RegisterOnShutdown(built.Approvals.Close)
	if cfg.sandboxMode != "off" && cfg.approvals && cfg.token != "" && cfg.approverToken == "" {
		log.Warn("escalations can be approved with the agent's own --token: set --approver-token so only a person's client can decide them")
	}
	fmt.Fprintf(stdout, "toolfs-api serving %s on http://%s\n", built.Root, ln.Addr())
	log.Info("listening", "addr", ln.Addr().String(), "root", built.Root, "policy", cfg.policy, "sandbox-mode", cfg.sandboxMode, "auth", cfg.token != "", "session-store", redactURL(cfg.sessionStore), "memory-limit", limit)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests", "grace", cfg.shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		cancelBase()
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// memoryHeadroom is the Go memory the server may use besides its caches
// and its session store: requests in flight, the runtime, the collector's
// work.
const memoryHeadroom = 32 << 20

// memoryLimit is the Go runtime's soft memory limit (docs/decisions.md,
// "Memory"): the bounds of the read caches and of the memory session
// store, plus memoryHeadroom. The collector's default target is twice the
// live heap, so full caches alone would double; under this limit it
// collects sooner instead.
func memoryLimit(cfg config) int64 {
	n := cfg.cacheBytes + memoryHeadroom
	if cfg.policy && cfg.sessionStore == "memory" {
		n += policy.DefaultMaxBytes
	}
	return n
}

// eventsOptions is the change feed's configuration (docs/events.md); nil
// with --events=false.
func eventsOptions(cfg config) *server.Events {
	if !cfg.events {
		return nil
	}
	return &server.Events{
		Hub:     events.Config{MaxSubscribers: cfg.eventsMaxSubs, Heartbeat: cfg.eventsHeartbeat},
		NoWatch: cfg.eventsMaxWatches == 0,
		Watch:   events.WatchConfig{MaxWatches: cfg.eventsMaxWatches},
	}
}

// redisLogger routes go-redis's own messages to the server's log at debug
// level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

func newLogger(format string, w *logWriter) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(w, nil)
	if format == "json" {
		h = slog.NewJSONHandler(w, nil)
	}
	return slog.New(batching{h, w})
}

// batching leaves the access log's lines (one per request) in the log
// writer's batch and writes every other record out at once: start-up
// lines, warnings and errors are read as they happen.
type batching struct {
	slog.Handler
	w *logWriter
}

func (h batching) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Message != handlers.AccessLogMessage {
		h.w.Flush()
	}
	return err
}

func (h batching) WithAttrs(attrs []slog.Attr) slog.Handler {
	return batching{h.Handler.WithAttrs(attrs), h.w}
}

func (h batching) WithGroup(name string) slog.Handler {
	return batching{h.Handler.WithGroup(name), h.w}
}
