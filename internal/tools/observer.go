package tools

import (
	"context"
	"time"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// Observer receives the executor's metrics (docs/api.md, "Metrics"). The
// REST layer's Prometheus series implement it; the executor itself imports
// no metrics library. Implementations are safe for concurrent use and never
// receive a path or a session id.
type Observer interface {
	// ToolCall is one finished call: its transport ("rest", "mcp"), tool,
	// outcome (CodeOK or the error's code) and duration.
	ToolCall(transport, tool string, code Code, took time.Duration)
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
}

type nopObserver struct{}

func (nopObserver) ToolCall(string, string, Code, time.Duration) {}
func (nopObserver) ReadFooter(string)                            {}
func (nopObserver) StaleVersion(string)                          {}
func (nopObserver) StatCall()                                    {}
func (nopObserver) SessionStoreError(string)                     {}
func (nopObserver) CacheLookup(string, bool)                     {}

// statCounter counts the provider's Stat calls where they happen, so the
// count is the provider's, whichever step of a call made them: one per
// read, plus one for a session cwd; none per write or edit (the provider
// checks under its lock).
type statCounter struct {
	fs.FileSystem
	count func()
}

func (s statCounter) Stat(ctx context.Context, t fs.Target) (fs.Info, error) {
	s.count()
	return s.FileSystem.Stat(ctx, t)
}
