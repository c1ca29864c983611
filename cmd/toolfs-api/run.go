package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolfs/toolfs-api/internal/server"
)

// run is runStdio reading the process's own standard input, for the tests
// that serve HTTP only.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runStdio(ctx, args, getenv, os.Stdin, stdout, stderr)
}

// runStdio starts the server and blocks until ctx is done (or, with
// --stdio, until the client ends its session), then drains in-flight
// requests. It takes the process's fundamentals as arguments so tests can
// run the whole server in-process: flags → server.Config → server.New →
// Listen and Serve (or ServeMCP on stdin and stdout) → Shutdown.
func runStdio(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseConfig(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		var all options
		return writeHelp(stdout, all.flagSet())
	}
	if err != nil {
		return err
	}
	if o.printVersion {
		_, err := fmt.Fprintf(stdout, "toolfs-api %s %s %s/%s\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	}
	cfg := o.Config
	cfg.Version = buildVersion()
	// Access log lines wait at most 100 ms, the others not at all; Close,
	// deferred first so it runs last, writes out what is left.
	lw := newLogWriter(stderr, 100*time.Millisecond, 64<<10)
	defer lw.Close()
	log := newLogger(cfg.LogFormat, lw)
	limit := "GOMEMLIMIT"
	if getenv("GOMEMLIMIT") == "" { // the operator's own limit wins
		n := cfg.MemoryLimit()
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(n))
		limit = strconv.FormatInt(n>>20, 10) + " MiB"
	}

	srv, err := server.New(cfg, log)
	if err != nil {
		if strings.HasPrefix(err.Error(), "--") {
			return err // it names its flag (--diagnostics)
		}
		return fmt.Errorf("--root: %w", err)
	}
	served := make(chan error, 1)
	ended := make(chan struct{}) // --stdio: the client ended its session
	if cfg.Stdio {
		// stdout carries the protocol alone: every log line goes to stderr
		// (docs/mcp.md, "Over stdio").
		log.Info("serving MCP on stdin and stdout", "root", srv.Root, "policy", cfg.Policy, "sandbox-mode", cfg.Tools.SandboxMode,
			"session", cfg.Sessions.Default, "memory-limit", limit)
		go func() {
			if err := srv.ServeStdio(stdin, stdout); err != nil {
				served <- err
				return
			}
			close(ended)
		}()
	} else {
		addr, err := srv.Listen("memory-limit", limit)
		if err != nil {
			srv.Shutdown(context.Background())
			return fmt.Errorf("--addr: %w", err)
		}
		fmt.Fprintf(stdout, "toolfs-api serving %s on http://%s\n", srv.Root, addr)
		go func() { served <- srv.Serve() }()
	}
	// SIGHUP reopens the audit log after a rotation (docs/audit.md);
	// without --audit-log it keeps its default action.
	var hup chan os.Signal
	if cfg.Audit.Path != "" {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
wait:
	for {
		select {
		case err := <-served:
			srv.Shutdown(context.Background())
			return err
		case <-hup:
			if err := srv.ReopenAuditLog(); err != nil {
				log.Error("SIGHUP: cannot reopen the audit log; still writing to the old file", "err", err)
			} else {
				log.Info("SIGHUP: audit log reopened", "path", cfg.Audit.Path)
			}
		case <-ctx.Done():
			break wait
		case <-ended:
			log.Info("the MCP client closed stdin")
			break wait
		}
	}
	log.Info("shutting down: draining in-flight requests", "grace", cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func newLogger(format string, w *logWriter) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(w, nil)
	if format == "json" {
		h = slog.NewJSONHandler(w, nil)
	}
	return slog.New(batching{Handler: h, w: w, access: true, json: format == "json"})
}

// batching leaves the access log's lines (one per request) in the log
// writer's batch and writes every other record out at once: start-up
// lines, warnings and errors are read as they happen.
type batching struct {
	slog.Handler
	w *logWriter
	// access: the handler is slog's own, without attributes or groups
	// added, so WriteAccess may write its bytes by hand.
	access, json bool
}

// accessLines are the buffers WriteAccess formats lines in.
var accessLines = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// WriteAccess writes an access line as the slog handler would, without
// building a record (handlers.AccessWriter; docs/performance.md, "Reads
// at their floor"); false leaves the line to slog.
func (h batching) WriteAccess(l *server.AccessLine) bool {
	if !h.access || !h.Handler.Enabled(context.Background(), slog.LevelInfo) {
		return false
	}
	p := accessLines.Get().(*[]byte)
	b, ok := server.AppendAccessLine((*p)[:0], l, h.json)
	if ok {
		h.w.Write(b)
	}
	if cap(b) <= maxPooledLine { // a long path's buffer is not kept
		*p = b
		accessLines.Put(p)
	}
	return ok
}

// maxPooledLine bounds the buffers accessLines keeps.
const maxPooledLine = 4 << 10

func (h batching) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Message != server.AccessLogMessage {
		h.w.Flush()
	}
	return err
}

func (h batching) WithAttrs(attrs []slog.Attr) slog.Handler {
	return batching{Handler: h.Handler.WithAttrs(attrs), w: h.w}
}

func (h batching) WithGroup(name string) slog.Handler {
	return batching{Handler: h.Handler.WithGroup(name), w: h.w}
}
