package tools

import (
	"context"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// Observer receives the executor's metrics (docs/api.md, "Metrics"). The
// REST layer's Prometheus series implement it; the executor itself imports
// no metrics library. Implementations are safe for concurrent use and never
// receive a path or a session id.
type Observer interface {
	// ToolCall is one finished call: its transport ("rest", "mcp"), tool,
	// outcome (CodeOK or the error's code) and duration.
	ToolCall(transport, tool string, code fault.Code, took time.Duration)
	// ReadFooter is the footer that ended a successful read's window.
	ReadFooter(footer string)
	// StaleVersion is a write or edit refused with FS_STALE_VERSION.
	StaleVersion(tool string)
	// StatCall is one real provider Stat call.
	StatCall()
	// SessionStoreError is a session store operation that failed ("observe",
	// "touch", "decide", "forget"): the store could not be reached.
	SessionStoreError(op string)
	// CacheLookup is one lookup in a read cache (CacheWindow, CacheIndex)
	// and whether it hit.
	CacheLookup(cache string, hit bool)
	// Revert is one revert of a session's changes, by outcome (one of
	// RevertOutcomes).
	Revert(outcome string)
	// Approval is one escalation asked of the call's own client alone
	// (docs/sandbox.md), by how it ended (approve, reject, timeout,
	// cancelled) and the channel (ViaElicitation); those that waited at
	// /approvals are counted by the approvals store's owner.
	Approval(decision, via string)
}

type nopObserver struct{}

func (nopObserver) ToolCall(string, string, fault.Code, time.Duration) {}
func (nopObserver) ReadFooter(string)                                  {}
func (nopObserver) StaleVersion(string)                                {}
func (nopObserver) StatCall()                                          {}
func (nopObserver) SessionStoreError(string)                           {}
func (nopObserver) CacheLookup(string, bool)                           {}
func (nopObserver) Revert(string)                                      {}
func (nopObserver) Approval(string, string)                            {}

// statCounter is the executor's one handle on the provider. It counts the
// provider's Stat calls where they happen, so the count is the provider's,
// whichever step of a call made them: one per read, plus one for a session
// cwd; none per change (the provider checks under its lock).
type statCounter struct {
	fs.FileSystem
	count func()
	// files is the provider's files operations (docs/files.md); nil when
	// it has none. They make no Stat.
	files fs.Files
}

func (s statCounter) Stat(ctx context.Context, t fs.Target) (fs.Info, error) {
	s.count()
	return s.FileSystem.Stat(ctx, t)
}

// ResolveStat resolves path and stats its target, in one walk when the
// provider can (fs.ResolveStater); either way it counts one Stat, once the
// path resolved, as Resolve and then Stat would.
func (s statCounter) ResolveStat(ctx context.Context, op, path, cwd string) (fs.Target, fs.Info, error) {
	if rs, ok := s.FileSystem.(fs.ResolveStater); ok {
		t, info, err := rs.ResolveStat(ctx, op, path, cwd)
		if err == nil {
			s.count()
		}
		return t, info, err
	}
	t, err := s.FileSystem.Resolve(ctx, op, path, cwd)
	if err != nil {
		return fs.Target{}, fs.Info{}, err
	}
	info, err := s.Stat(ctx, t)
	return t, info, err
}
