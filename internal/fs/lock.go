package fs

import (
	"context"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// lockBuckets is the fixed number of cross-process lock files: keys share
// them by hash, so the folder never grows and unrelated targets rarely wait
// on each other.
const lockBuckets = 1024

// keyLocks serializes mutations per TargetKey inside one process. Entries
// are reference counted and deleted when unused, so the map stays as small
// as the number of targets being mutated right now.
type keyLocks struct {
	mu sync.Mutex
	m  map[TargetKey]*keyLock
}

type keyLock struct {
	held chan struct{} // capacity 1: a send takes the lock, so waiting can be cancelled
	refs int
}

// lock waits for key's lock or ctx, whichever comes first.
func (k *keyLocks) lock(ctx context.Context, key TargetKey) (unlock func(), err error) {
	k.mu.Lock()
	e := k.m[key]
	if e == nil {
		e = &keyLock{held: make(chan struct{}, 1)}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	select {
	case e.held <- struct{}{}:
		return func() { <-e.held; k.release(key, e) }, nil
	case <-ctx.Done():
		k.release(key, e)
		return nil, ctx.Err()
	}
}

func (k *keyLocks) release(key TargetKey, e *keyLock) {
	k.mu.Lock()
	if e.refs--; e.refs == 0 {
		delete(k.m, key)
	}
	k.mu.Unlock()
}

// bucketLocks are the cross-process locks: an exclusive flock on
// <root>/.toolfs-api/locks/<hash(rel) % lockBuckets>.lock, opened relative to
// the kept descriptor of that folder. rel is the target's real path relative
// to the root, so servers that reach the root through a symlink or another
// mount path pick the same bucket. flock belongs to an open file
// description, so two providers in one process exclude each other too.
type bucketLocks struct{ dir int }

// bucketOf is the bucket number of a root-relative real path.
func bucketOf(rel string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(rel))
	return h.Sum64() % lockBuckets
}

func bucketName(n uint64) string { return strconv.FormatUint(n, 10) + ".lock" }

// lock takes the bucket's flock, polling without blocking so ctx can cancel
// the wait.
func (b bucketLocks) lock(ctx context.Context, rel string) (unlock func(), err error) {
	return lockFileAt(ctx, b.dir, bucketName(bucketOf(rel)), unix.LOCK_EX)
}

// lockFileAt takes a flock (how: LOCK_EX or LOCK_SH) on the lock file name
// in dir, made (0600) when missing and never followed, polling without
// blocking (50 µs growing to 5 ms) so ctx can cancel the wait. Closing the
// descriptor, which unlock does, releases it.
func lockFileAt(ctx context.Context, dir int, name string, how int) (unlock func(), err error) {
	fd, err := unix.Openat(dir, name, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			unix.Close(fd)
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			unix.Close(fd)
			return nil, ctx.Err()
		}
	}
}

// lockTarget takes the in-process lock, then the cross-process one (unless
// the provider was built with InProcessLocksOnly).
func (l *Local) lockTarget(ctx context.Context, key TargetKey) (unlock func(), err error) {
	unlockKey, err := l.locks.lock(ctx, key)
	if err != nil {
		return nil, err
	}
	if l.inProcessOnly {
		return unlockKey, nil
	}
	p, err := l.private.get(true)
	if err != nil {
		unlockKey()
		return nil, err
	}
	rel, _ := within(l.rootReal, string(key))
	unlockFile, err := bucketLocks{dir: p.locks}.lock(ctx, rel)
	if err != nil {
		unlockKey()
		return nil, err
	}
	return func() { unlockFile(); unlockKey() }, nil
}
