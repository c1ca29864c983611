package fs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Keeper keeps what a write, edit, upload or delete replaces, so that the
// change can be undone later (the checkpoints, docs/checkpoints.md). The
// provider calls it under the target's locks, never for a dry run, in this
// order:
//   - Keep, once every check passed and the new content is about to be
//     staged (an upload's is staged already), with the file the mutation
//     replaces. A write's and an edit's run on its own goroutine while the
//     new content is staged.
//   - Prepare, once Keep returned and the new content is staged, with the
//     new content's SHA-256 (nil for a delete: there is none), just before
//     the version is checked a last time and the content published. A
//     write's and an edit's staged content may still be syncing then: its
//     publication waits for the sync (stageSyncing).
//   - Done, exactly once after Keep, whatever happened: with what was
//     published, or nil when nothing was.
//
// An error from Keep or Prepare fails the mutation with nothing published
// (fault.CodeIO, unless the error is an *fault.Error or a cancellation). With a Keeper,
// a write publishes only over the file it kept: one that a writer outside
// the server's locks swapped in meanwhile is fault.CodeStaleVersion, even for an
// unconditional write.
type Keeper interface {
	Keep(ctx context.Context, r Replaced) error
	Prepare(ctx context.Context, sha256 *[32]byte) error
	Done(p *Published)
}

// RenameNoter is a Keeper that hears of the new content as soon as it is
// in place (renamed, its version known) and before the folder's sync that
// makes the rename durable (SPEC §9): what it records then can be made
// durable beside that sync (docs/journal.md). Renamed is called at most
// once, after Prepare, by a write, an edit and an upload; Done still
// follows, also when the folder's sync then fails.
type RenameNoter interface {
	Renamed(v Version, size int64)
}

// Replaced is the file a write or edit is about to replace, as its Keeper
// sees it.
type Replaced struct {
	// Path is the target's real path relative to the root (symlinks
	// resolved), which Resolve turns back into the same Target.
	Path string
	// Exists is false for a write that creates the file.
	Exists  bool
	Version Version
	Size    int64
	// Mode is its permission bits (0o777), which a revert that recreates
	// the file gives it again.
	Mode uint32
	// Content reads the replaced bytes (concurrent reads are fine) until
	// Keep returns; nil when the file is absent or could not be opened for
	// reading (a write-only file, say).
	Content io.ReaderAt
}

// Published is what a mutation published, as its Keeper hears of it.
type Published struct {
	// Version is the new version ("" for a delete, or when the folder's
	// sync failed after the publication).
	Version Version
	// Before and After are the LF-normalized texts before and after the
	// change (a create's Before is ""), nil when the provider declined a
	// diff basis (at or above its limit, or not UTF-8).
	Before, After *string
}

// keeping is one mutation's use of its Keeper. A nil *keeping (no Keeper)
// does nothing.
type keeping struct {
	k        Keeper
	done     chan struct{}
	err      error
	finished bool
}

// startKeeping runs k.Keep(r) on its own goroutine; nil when k is nil.
func startKeeping(ctx context.Context, k Keeper, r Replaced) *keeping {
	if k == nil {
		return nil
	}
	kp := &keeping{k: k, done: make(chan struct{})}
	go func() {
		defer close(kp.done)
		kp.err = k.Keep(ctx, r)
	}()
	return kp
}

// prepare waits for Keep and calls Prepare with the staged content's
// SHA-256 (nil: the mutation removes the file), mapping a failure for op
// on display.
func (kp *keeping) prepare(ctx context.Context, op, display string, sum *[32]byte) error {
	if kp == nil {
		return nil
	}
	<-kp.done
	err := kp.err
	if err == nil {
		err = kp.k.Prepare(ctx, sum)
	}
	if err != nil {
		return keepErr(op, display, err)
	}
	return nil
}

// renamed tells a RenameNoter the new content's version and size.
func (kp *keeping) renamed(v Version, size int64) {
	if kp == nil {
		return
	}
	if n, ok := kp.k.(RenameNoter); ok {
		n.Renamed(v, size)
	}
}

// published calls Done with what was published.
func (kp *keeping) published(p *Published) {
	if kp == nil || kp.finished {
		return
	}
	kp.finished = true
	kp.k.Done(p)
}

// abandon calls Done(nil) unless published did: deferred by every
// mutation that started keeping, it waits for Keep first, since Keep reads
// the file the mutation closes after it.
func (kp *keeping) abandon() {
	if kp == nil || kp.finished {
		return
	}
	<-kp.done
	kp.finished = true
	kp.k.Done(nil)
}

func keepErr(op, display string, err error) error {
	var e *fault.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return aborted(op, err)
	}
	return &fault.Error{Code: fault.CodeIO, Message: fmt.Sprintf(`cannot %s "%s": the server cannot keep a checkpoint of the file`, op, display), Err: err}
}

// relOf is the real root-relative path of a Key this provider made.
func (l *Local) relOf(t Target) string {
	rel, _ := within(l.rootReal, string(t.Key))
	return rel
}

// RealPath is the target's real path relative to the root, as a Keeper
// hears it (Replaced.Path): Resolve of it gives back the same Target, and a
// Target it no longer gives back is reached through a link that changed.
func (l *Local) RealPath(t Target) string { return l.relOf(t) }

// ReadAt reads the old file at off (io.ReaderAt), for its Keeper.
func (o *oldFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pread(o.fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}
