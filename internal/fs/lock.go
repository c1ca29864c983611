package fs

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
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

// size is the number of live entries (for tests).
func (k *keyLocks) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

// bucketLocks are the cross-process locks: an exclusive flock on
// <dir>/<hash(key) % lockBuckets>.lock. flock belongs to an open file
// description, so two providers in one process exclude each other too.
type bucketLocks struct{ dir string }

func newBucketLocks(dir string) (*bucketLocks, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fs: lock folder %q: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("fs: lock folder %q: %w", dir, err)
	}
	// Anyone who can write the folder could swap the lock files for
	// symlinks or hold them forever.
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Getuid()) || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("fs: lock folder %q must be a folder owned by this user and writable by it alone", dir)
	}
	return &bucketLocks{dir: dir}, nil
}

// lock takes the bucket's flock, polling without blocking so ctx can cancel
// the wait.
func (b *bucketLocks) lock(ctx context.Context, key TargetKey) (unlock func(), err error) {
	h := fnv.New64a()
	h.Write([]byte(key))
	name := filepath.Join(b.dir, strconv.FormatUint(h.Sum64()%lockBuckets, 10)+".lock")
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil // closing releases the flock
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

// lockTarget takes the in-process lock, then the cross-process one.
func (l *Local) lockTarget(ctx context.Context, key TargetKey) (unlock func(), err error) {
	unlockKey, err := l.locks.lock(ctx, key)
	if err != nil {
		return nil, err
	}
	if l.lockFiles == nil {
		return unlockKey, nil
	}
	unlockFile, err := l.lockFiles.lock(ctx, key)
	if err != nil {
		unlockKey()
		return nil, err
	}
	return func() { unlockFile(); unlockKey() }, nil
}
