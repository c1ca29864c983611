package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// TargetsLocker is a FileSystem that can lock several targets at once, for
// an operation that must see and change all of them together (a revert,
// docs/checkpoints.md).
type TargetsLocker interface {
	// LockTargets takes the mutation locks of every target (duplicates
	// count once) in one global order, so two calls over overlapping sets,
	// and single writes and edits, never deadlock. It waits for ctx.
	LockTargets(ctx context.Context, ts []Target) (LockedTargets, error)
	// LockTargetsFor is LockTargets for an operation whose messages say op
	// ("patch", ...; LockTargets says "revert").
	LockTargetsFor(ctx context.Context, op string, ts []Target) (LockedTargets, error)
}

// LockedTargets is a set of targets locked together. Its verbs act on one of
// them under the locks already held; a target outside the set is refused.
// Messages use the verb the set was locked for ("revert" by LockTargets).
type LockedTargets interface {
	// Open opens the target's regular file for reading, as OpenText does; a
	// missing target is a nil reader, Info{Type: TypeMissing} and no error.
	Open(ctx context.Context, t Target) (io.ReadCloser, Info, error)
	// Stage writes a new content for the target (fill writes it, and may be
	// called again from scratch) into a synced temporary file, as a write
	// stages it (missing parent folders are made now); nothing is published
	// until Publish. A present target's permission bits are kept; a missing
	// one gets mode's (0o777), or a new file's when mode is 0.
	Stage(ctx context.Context, t Target, mode uint32, fill func(io.Writer) error) (PendingFile, error)
	// Remove removes the target if it is a regular file at version expect,
	// and syncs its folder; a missing target is not an error when expect is
	// "". Anything else is fault.CodeStaleVersion.
	Remove(ctx context.Context, t Target, expect Version) error
	// Unlock releases every lock. A no-op after the first call.
	Unlock()
}

// PendingFile is content staged for a locked target (LockedTargets.Stage),
// not yet published.
type PendingFile interface {
	// Publish puts the content in place if the target is now a regular file
	// at version expect (expect "": only if the target is absent, never
	// replacing anything), atomically as a write does (docs/decisions-fs.md),
	// and reports the new version and the XXH3 Hash of the bytes written.
	// A target at another version is fault.CodeStaleVersion and nothing changes.
	Publish(expect Version) (Version, Hash, error)
	// Discard removes the temporary file unless it was published. A no-op
	// after Publish or a first Discard.
	Discard()
}

var _ TargetsLocker = (*Local)(nil)

// LockTargets locks every target: first the in-process lock of each Key in
// sorted order, then the cross-process lock file of each bucket in numeric
// order, each bucket once (two flocks of one file in one process would
// wait on each other). A single write or edit holds one Key and then one
// bucket, so it never waits while holding what a LockTargets call waits for
// next.
func (l *Local) LockTargets(ctx context.Context, ts []Target) (LockedTargets, error) {
	return l.LockTargetsFor(ctx, "revert", ts)
}

// LockTargetsFor is LockTargets for an operation whose messages say op
// ("patch", ...).
func (l *Local) LockTargetsFor(ctx context.Context, op string, ts []Target) (LockedTargets, error) {
	keys := make([]TargetKey, 0, len(ts))
	for _, t := range ts {
		keys = append(keys, t.Key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	k := &lockedTargets{l: l, op: op, keys: keys}
	for _, key := range keys {
		unlock, err := l.locks.lock(ctx, key)
		if err != nil {
			k.Unlock()
			return nil, locksErr(op, err)
		}
		k.unlocks = append(k.unlocks, unlock)
	}
	if l.inProcessOnly {
		return k, nil
	}
	p, err := l.private.get(true)
	if err != nil {
		k.Unlock()
		return nil, locksErr(op, err)
	}
	var buckets []uint64
	for _, key := range keys {
		rel, _ := within(l.rootReal, string(key))
		buckets = append(buckets, bucketOf(rel))
	}
	slices.Sort(buckets)
	for _, b := range slices.Compact(buckets) {
		unlock, err := lockFileAt(ctx, p.locks, bucketName(b), unix.LOCK_EX)
		if err != nil {
			k.Unlock()
			return nil, locksErr(op, err)
		}
		k.unlocks = append(k.unlocks, unlock)
	}
	return k, nil
}

// lockedTargets is the local provider's LockedTargets.
type lockedTargets struct {
	l       *Local
	op      string      // the verb of its messages
	keys    []TargetKey // sorted
	unlocks []func()    // in the order taken
}

func (k *lockedTargets) Unlock() {
	for i := len(k.unlocks) - 1; i >= 0; i-- {
		k.unlocks[i]()
	}
	k.unlocks = nil
	k.keys = nil
}

// holds refuses a target whose lock this set does not hold.
func (k *lockedTargets) holds(t Target) error {
	if _, ok := slices.BinarySearch(k.keys, t.Key); !ok {
		return fmt.Errorf("fs: %q is not among the locked targets", t.Display)
	}
	return nil
}

func (k *lockedTargets) Open(ctx context.Context, t Target) (io.ReadCloser, Info, error) {
	if err := k.holds(t); err != nil {
		return nil, Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, Info{}, aborted(k.op, err)
	}
	o, err := k.l.openRegular(t, k.op, true)
	if err == errMissing {
		return nil, Info{Type: TypeMissing, Size: -1}, nil
	}
	if err != nil {
		return nil, Info{}, err
	}
	o.w.close(k.l)
	return &ctxReader{ctx: ctx, f: o.f, display: t.Display, hash: xxh3.New()}, infoOf(&o.st), nil
}

func (k *lockedTargets) Stage(ctx context.Context, t Target, newMode uint32, fill func(io.Writer) error) (PendingFile, error) {
	if err := k.holds(t); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, aborted(k.op, err)
	}
	l := k.l
	w, err := l.walkKey(t, false)
	if err == nil && w.kind == walkMissing && w.dir < 0 {
		w.close(l)
		w, err = l.walkKey(t, true) // make the missing parents
	}
	if err != nil {
		return nil, l.fail(k.op, t.Display, err)
	}
	mode, owner := l.newMode, (*unix.Stat_t)(nil)
	switch {
	case w.kind == walkFound && isRegular(&w.st):
		mode, owner = keptMode(&w.st), &w.st
	case w.kind == walkMissing && w.dir >= 0:
		if newMode != 0 {
			mode = newMode & 0o777
		}
	default:
		w.close(l)
		return nil, notRegular(k.op, t.Display)
	}
	h := xxh3.New()
	tmp, err := l.stage(w.dir, w.name, mode, owner, func(out io.Writer) error {
		h.Reset()
		return fill(io.MultiWriter(out, h))
	})
	if err != nil {
		w.close(l)
		return nil, l.fail(k.op, t.Display, err)
	}
	return &pendingFile{l: l, op: k.op, t: t, w: w, tmp: tmp, hash: h}, nil
}

func (k *lockedTargets) Remove(ctx context.Context, t Target, expect Version) error {
	if err := k.holds(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return aborted(k.op, err)
	}
	l := k.l
	w, err := l.walkKey(t, false)
	if errors.Is(err, errNotDir) {
		w, err = walked{kind: walkMissing, dir: -1}, nil
	}
	if err != nil {
		return l.fail(k.op, t.Display, err)
	}
	defer w.close(l)
	switch {
	case w.kind == walkMissing && expect == "":
		return nil
	case w.kind != walkFound || !isRegular(&w.st) || versionOf(&w.st) != expect:
		return staleLocked(k.op, t.Display)
	}
	if err := unix.Unlinkat(w.dir, w.name, 0); err != nil {
		return l.fail(k.op, t.Display, err)
	}
	if err := syncDir(w.dir); err != nil {
		return l.fail(k.op, t.Display, err)
	}
	return nil
}

// pendingFile is the local provider's PendingFile: a staged file and the
// walk to the target's folder it will be published in.
type pendingFile struct {
	l    *Local
	op   string
	t    Target
	w    walked
	tmp  *staged
	hash *xxh3.Hasher
	done bool
}

func (p *pendingFile) Publish(expect Version) (Version, Hash, error) {
	if p.done {
		return "", "", fmt.Errorf("fs: %q was already published or discarded", p.t.Display)
	}
	defer p.Discard()
	var err error
	if expect == "" {
		err = p.tmp.publishNew()
		if errors.Is(err, unix.EEXIST) {
			return "", "", staleLocked(p.op, p.t.Display)
		}
	} else {
		// The rename replaces whatever the name holds now: a writer outside
		// our locks may have been quicker.
		cur, ok := statAt(p.w.dir, p.w.name)
		if !ok || !isRegular(&cur) || versionOf(&cur) != expect {
			return "", "", staleLocked(p.op, p.t.Display)
		}
		err = p.tmp.publish()
	}
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) {
		return "", "", notRegular(p.op, p.t.Display)
	}
	if err != nil {
		return "", "", p.l.fail(p.op, p.t.Display, err)
	}
	v, err := p.tmp.commit()
	if err != nil {
		return "", "", p.l.fail(p.op, p.t.Display, err)
	}
	return v, hashOf(p.hash), nil
}

func (p *pendingFile) Discard() {
	if p.done {
		return
	}
	p.done = true
	p.tmp.discard()
	p.w.close(p.l)
}

// syncDir fsyncs an open folder; EINVAL means the filesystem cannot sync
// folders, which is not an error.
func syncDir(dir int) error {
	dfd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Fsync(dfd)
	unix.Close(dfd)
	if err == unix.EINVAL {
		return nil
	}
	return err
}

// locksErr maps a failure to lock several targets, which no one path
// names: cancellation, or the lock files (the cause goes to the log).
func locksErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return aborted(op, err)
	}
	return &fault.Error{Code: fault.CodeIO, Message: "cannot " + op + ": the server cannot take the locks of its files in " + PrivateDir, Err: err}
}

// staleLocked is a locked target found changed since its check, by a
// writer that does not take our locks.
func staleLocked(op, display string) *fault.Error {
	return fault.New(fault.CodeStaleVersion, fmt.Sprintf(`cannot %s "%s": file changed since it was checked`, op, display))
}
