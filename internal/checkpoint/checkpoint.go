// Package checkpoint keeps, for every session, the history of the changes
// its writes and edits made and the content each one replaced, and undoes
// them on request, guarded by versions (docs/checkpoints.md).
//
// The history lives under the workspace root, in the server's private
// folder (<root>/.toolfs-api/checkpoints/), so it survives restarts
// whatever the session store, and every server process on the root shares
// it:
//
//	blobs/<sha256>         the replaced contents, content-addressed (one copy each)
//	sessions/<digest>.log  one append-only JSON-lines log per session
//	locks/s<n>.lock        the sessions' cross-process locks (by bucket)
//	gc.lock                held shared while a blob is not yet referenced, exclusive to delete blobs
//
// A write or edit is recorded through a Recording, the fs.Keeper the
// provider calls under the target's lock: the replaced content is copied
// into blobs/ (synced) while the new content is staged, and the change is
// appended to the session's log (synced) before the new content is
// published, so every answered mutation has its record. Revert undoes a
// session's changes after a point over every file involved at once, and
// journals itself in the same log before it publishes anything, so a
// revert a crash interrupted is completed when the store is opened again.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/journal"
)

// Defaults of Options.
const (
	DefaultBytes         = 256 << 20 // --checkpoint-bytes
	DefaultMaxFileBytes  = 16 << 20  // --checkpoint-max-file-bytes
	DefaultMaxChanges    = 16384
	DefaultSweepInterval = time.Minute
	// DefaultDiffMaxBytes and DefaultDiffBudgetBytes bound a revert's diffs
	// (docs/checkpoints.md, "The answer"): a side this large is never
	// diffed, and one answer shows this much of diffs in all, so a revert's
	// memory and answer do not grow with its files.
	DefaultDiffMaxBytes    = 256 << 10
	DefaultDiffBudgetBytes = 1 << 20
)

// FolderName is the store's folder in the server's private folder.
const FolderName = "checkpoints"

// JournalFolderName is the folder of a journal-only store (Options.JournalOnly).
const JournalFolderName = "journal"

// Provider is what the store needs of the file provider: resolving the
// recorded paths again, locking several targets at once with the verbs a
// revert publishes through, and a checked private folder. fs.Local is one.
type Provider interface {
	Resolve(ctx context.Context, op, path, cwd string) (fs.Target, error)
	// RealPath is a target's real path relative to the root, as
	// fs.Replaced.Path gives it.
	RealPath(t fs.Target) string
	fs.TargetsLocker
	PrivateFolder(name string, create bool) (*fs.Folder, error)
}

var _ Provider = (*fs.Local)(nil)

// Options configure a Store. FS is required; zero values take the defaults.
type Options struct {
	FS Provider
	// Bytes bounds the kept contents (blobs/) of all sessions together:
	// past it, the oldest changes lose their kept content first (they stay
	// listed, no longer revertible).
	Bytes int64
	// MaxFileBytes is the largest content kept: a change that replaced a
	// larger file is recorded as not revertible. At most Bytes.
	MaxFileBytes int64
	// MaxChanges bounds the changes recorded in all sessions together: past
	// it, the oldest are dropped from their histories.
	MaxChanges int
	// TTL forgets a history its session has not used (recorded, reverted,
	// listed or touched) for that long; 0 never does.
	TTL time.Duration
	// SweepInterval is how often the bounds and the TTL are enforced in the
	// background besides when they are reached; negative: only then.
	SweepInterval time.Duration
	// DiffMaxBytes is the size at and above which a revert neither reads a
	// file's text nor diffs it: no diff shown, no line counts for its own
	// change (DefaultDiffMaxBytes when 0).
	DiffMaxBytes int64
	// DiffBudgetBytes bounds the diffs of one revert's answer in all (their
	// texts and paths, DefaultDiffBudgetBytes when 0): past it, a file's
	// diff is left out and the answer names the file.
	DiffBudgetBytes int64
	Logger          *slog.Logger
	// JournalOnly makes a store that keeps no history: only the journals of
	// changes of several files (Journal) while they are made, each session's
	// log removed once its change is done, in JournalFolderName rather than
	// FolderName. It is what makes such a change all or nothing across a
	// crash on a server without checkpoints (docs/checkpoints.md, "Without
	// checkpoints"). Such a store is for Journal alone: Recording, Revert and
	// Changes are not used on it.
	JournalOnly bool
	// Replay is the records of dead processes' journal segments
	// (journal.Orphan), put back into blobs/ and the logs before the
	// crash's other work is completed (docs/journal.md).
	Replay []journal.Record
	// Segments finds a record in the journal segments of every process on
	// the root (a *journal.Journal): a kept content another replica holds
	// only in its journal until its seal is read from there (nil: none).
	Segments interface {
		Find(kind journal.Kind, match func(journal.Record) bool) (journal.Record, bool)
	}
	// Now is the clock (time.Now when nil), for tests.
	Now func() time.Time
}

// Store is the checkpoint store over one workspace root. It is safe for
// concurrent use, also by several processes on one root; Close must not race
// other calls.
type Store struct {
	fs  Provider
	opt Options
	log *slog.Logger

	mu    sync.Mutex // dirs
	dirs  *folders
	cache historyCache

	sessionLocks [sessionBuckets]chan struct{} // the in-process side of the session locks
	gc           gcLock
	gcMu         sync.Mutex // one collection at a time in this process

	// Estimates of what blobs/ holds and of the changes recorded: exact
	// after each collection, then raised by what this process adds.
	bytes, changes atomic.Int64
	touched        touchTimes

	kick     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	recovery Recovery
	replayed Replayed
	dirty    dirtyFiles
	held     heldBlobs
	hooks    testHooks
}

// testHooks let tests stop a revert where only a crash stops it.
type testHooks struct {
	published func(i int) // after a revert published its i-th file
	journaled func()      // after a revert's journal is synced
}

// folders are the store's folders, opened and checked once.
type folders struct {
	root, blobs, sessions, locks *fs.Folder
}

func (d *folders) close() {
	for _, f := range []*fs.Folder{d.blobs, d.sessions, d.locks, d.root} {
		if f != nil {
			f.Close()
		}
	}
}

// Recovery is what opening the store completed: mutations a crash left
// between their record and their answer (settled by looking at the file),
// and reverts it interrupted, finished or undone as a whole.
type Recovery struct {
	Settled, RolledForward, RolledBack int
	// Failed names the reverts that could be neither finished nor undone
	// (a file changed both ways), as "<session log>:<seq>".
	Failed []string
}

// Open opens the store of opts.FS's root: it completes what a crash
// interrupted (Recovery), enforces the bounds once and starts the
// background sweep. A root without the store's folder is not written
// until the first change.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.FS == nil {
		return nil, errors.New("checkpoint: Options.FS is required")
	}
	if opts.Bytes < 0 || opts.MaxFileBytes < 0 || opts.MaxChanges < 0 || opts.TTL < 0 || opts.DiffMaxBytes < 0 || opts.DiffBudgetBytes < 0 {
		return nil, errors.New("checkpoint: negative bound")
	}
	bounds := Settings{Bytes: opts.Bytes, MaxFileBytes: opts.MaxFileBytes}.WithDefaults()
	opts.Bytes, opts.MaxFileBytes = bounds.Bytes, bounds.MaxFileBytes
	if opts.MaxFileBytes > opts.Bytes {
		return nil, fmt.Errorf("checkpoint: the largest kept file (%d bytes) cannot exceed the bound on all kept contents (%d bytes)", opts.MaxFileBytes, opts.Bytes)
	}
	if opts.MaxChanges == 0 {
		opts.MaxChanges = DefaultMaxChanges
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.DiffMaxBytes == 0 {
		opts.DiffMaxBytes = DefaultDiffMaxBytes
	}
	if opts.DiffBudgetBytes == 0 {
		opts.DiffBudgetBytes = DefaultDiffBudgetBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{fs: opts.FS, opt: opts, log: opts.Logger, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	for i := range s.sessionLocks {
		s.sessionLocks[i] = make(chan struct{}, 1)
	}
	s.cache.init(opts.MaxChanges)
	s.touched.init()
	d, err := s.folders(false)
	if err != nil {
		return nil, err
	}
	if d != nil {
		if len(opts.Replay) > 0 {
			if s.replayed, err = s.replay(ctx, d, opts.Replay); err != nil {
				d.close()
				return nil, fmt.Errorf("checkpoint: replaying the journal: %w", err)
			}
		}
		s.recovery = s.recoverAll(ctx)
		if err := s.collect(ctx); err != nil {
			s.log.Warn("checkpoints: enforcing the bounds at start-up failed", "err", err)
		}
	}
	go s.sweeper()
	return s, nil
}

// Replayed reports what Open put back from the journal.
func (s *Store) Replayed() Replayed { return s.replayed }

// Recovered reports what Open completed.
func (s *Store) Recovered() Recovery { return s.recovery }

// Close stops the background sweep and releases the folders.
func (s *Store) Close() error {
	close(s.stop)
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirs != nil {
		s.dirs.close()
		s.dirs = nil
	}
	return nil
}

// folders opens the store's folders (making them with create); without
// create, a missing store is (nil, nil). A failure is not kept.
func (s *Store) folders(create bool) (*folders, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirs != nil {
		return s.dirs, nil
	}
	name := FolderName
	if s.opt.JournalOnly {
		name = JournalFolderName
	}
	root, err := s.fs.PrivateFolder(name, create)
	if err != nil || root == nil {
		return nil, err
	}
	d := &folders{root: root}
	for _, p := range []struct {
		f    **fs.Folder
		name string
	}{{&d.blobs, "blobs"}, {&d.sessions, "sessions"}, {&d.locks, "locks"}} {
		// The parts are made even without create: the store's folder
		// exists, so this root is one we write.
		if *p.f, err = root.Folder(p.name, true); err != nil {
			d.close()
			return nil, err
		}
	}
	s.dirs = d
	return d, nil
}

// Refusal is what a refused revert names, as the Err of its *fault.Error
// (errors.As finds it): with fault.CodeStaleVersion the Paths that
// changed, with fault.CodeNotRevertible the Seq and Path of the change.
type Refusal struct {
	Paths []string
	Seq   int64
	Path  string
	Err   error // the cause, for logs
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return "revert refused"
}

func (r *Refusal) Unwrap() error { return r.Err }

// refused is a *fault.Error of code and message whose Err is r.
func refused(code fault.Code, message string, r *Refusal) *fault.Error {
	return &fault.Error{Code: code, Message: message, Err: r}
}

// ioErr is a failure of the store itself, for op ("record", "revert",
// "list", "forget").
func ioErr(op string, err error) error {
	var fe *fault.Error
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &fault.Error{Code: fault.CodeAborted, Message: op + " aborted", Err: err}
	}
	return &fault.Error{Code: fault.CodeIO, Message: "cannot " + op + ": the checkpoint store cannot be used", Err: err}
}

// now is the clock, in UTC.
func (s *Store) now() time.Time { return s.opt.Now().UTC() }
