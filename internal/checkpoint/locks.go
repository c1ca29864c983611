package checkpoint

import (
	"context"
	"hash/fnv"
	"strconv"
	"sync"
	"time"
)

// sessionBuckets is the number of session locks: sessions share them by
// hash, so locks/ never grows, and sharing one only serializes two
// sessions (nobody holds two session locks at once).
const sessionBuckets = 64

// gcLockName is the lock file of the collection (see gcLock).
const gcLockName = "gc.lock"

// The lock order, everywhere: the targets' locks (fs), then the gc lock,
// then one session lock. A write or edit holds its target's lock when its
// Recording takes the others; a revert locks every target first; the
// collection holds no target lock.

// sessionLock takes the lock of the session log name: an in-process lock
// (a channel, so the wait can be cancelled, and what the race detector
// sees) and then the bucket's lock file, for the other processes.
func (s *Store) sessionLock(ctx context.Context, d *folders, name string) (unlock func(), err error) {
	h := fnv.New32a()
	h.Write([]byte(name))
	b := h.Sum32() % sessionBuckets
	ch := s.sessionLocks[b]
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	unlockFile, err := d.locks.Lock(ctx, "s"+strconv.FormatUint(uint64(b), 10)+".lock", false)
	if err != nil {
		<-ch
		return nil, err
	}
	return func() { unlockFile(); <-ch }, nil
}

// gcLock keeps the collection from deleting a blob that is written but not
// yet referenced by a synced log line: whoever writes a blob holds it
// shared until the line referencing it is synced (or the blob is given
// up); the collection holds it exclusive while it decides and deletes.
// In-process, an RWMutex (writers first); across processes, one shared
// flock held while any goroutine of this process holds the read side.
type gcLock struct {
	rw     sync.RWMutex
	mu     sync.Mutex
	n      int
	unlock func()
}

// rlock takes the shared side.
func (g *gcLock) rlock(ctx context.Context, d *folders) (unlock func(), err error) {
	g.rw.RLock()
	g.mu.Lock()
	if g.n == 0 {
		u, err := d.root.Lock(ctx, gcLockName, true)
		if err != nil {
			g.mu.Unlock()
			g.rw.RUnlock()
			return nil, err
		}
		g.unlock = u
	}
	g.n++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			if g.n--; g.n == 0 {
				g.unlock()
				g.unlock = nil
			}
			g.mu.Unlock()
			g.rw.RUnlock()
		})
	}, nil
}

// lock takes the exclusive side.
func (g *gcLock) lock(ctx context.Context, d *folders) (unlock func(), err error) {
	g.rw.Lock()
	u, err := d.root.Lock(ctx, gcLockName, false)
	if err != nil {
		g.rw.Unlock()
		return nil, err
	}
	return func() { u(); g.rw.Unlock() }, nil
}

// touchTimes remembers when each session's log was last touched (Touch),
// so a busy session costs one utimensat per TTL/16, not one per request.
// Bounded: past touchMax sessions it starts again.
type touchTimes struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const touchMax = 4096

func (t *touchTimes) init() { t.m = map[string]time.Time{} }

// due reports whether session should be touched now, and notes it.
func (t *touchTimes) due(session string, now time.Time, every time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.m[session]; ok && now.Sub(last) < every {
		return false
	}
	if len(t.m) >= touchMax {
		clear(t.m)
	}
	t.m[session] = now
	return true
}

func (t *touchTimes) forget(session string) {
	t.mu.Lock()
	delete(t.m, session)
	t.mu.Unlock()
}
