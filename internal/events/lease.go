package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Watch starts reporting the changes made under cfg.Workspace's root outside the API
// to hub. With a memory hub it is NewWatcher. With a Redis hub the
// replicas of one workspace share one root, and each change is to be
// reported once, not once per replica: only the replica holding the
// workspace's watcher lease in Redis watches (docs/decisions.md, "One
// watcher per workspace"). Each replica tries to take the lease; the
// holder renews it every WatchConfig.Lease/3 and stops watching when it
// cannot, and when it dies another takes over within about Lease. A
// replica that begins watching publishes an overflow: the changes made
// while nobody watched (between two holders, or before the first) were
// not seen. Close stops watching and hands the lease back.
func Watch(hub *Hub, cfg WatchConfig) (io.Closer, error) {
	if hub.shared == nil {
		w, err := NewWatcher(hub, cfg)
		if err != nil {
			return nil, err
		}
		hub.obs.watchingNow(true)
		return w, nil
	}
	l := newLease(hub, cfg)
	// The first attempt runs now, so a root that cannot be watched stops
	// start-up as it does without Redis.
	if err := l.attempt(); err != nil {
		l.release()
		return nil, err
	}
	go l.run()
	return l, nil
}

// lease runs a Watcher while this replica holds the watcher lease.
type lease struct {
	hub   *Hub
	cfg   WatchConfig
	key   string
	me    string
	ttl   time.Duration
	every time.Duration

	// Owned by run (and by Watch before run starts).
	held   bool     // this replica holds the lease
	w      *Watcher // non-nil while held
	lastOK time.Time
	// watching mirrors w != nil for other goroutines (tests).
	watching atomic.Bool

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// DefaultLease is how long the watcher lease outlives its holder's last
// renewal.
const DefaultLease = 3 * time.Second

func newLease(hub *Hub, cfg WatchConfig) *lease {
	ttl := cfg.Lease
	if ttl <= 0 {
		ttl = DefaultLease
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return &lease{
		hub: hub, cfg: cfg, key: hub.shared.prefix + "events:watcher",
		me:  host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:]),
		ttl: ttl, every: ttl / 3,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// renewScript extends the lease if ARGV[1] holds it (1), else 0; with
// ARGV[2] = "0" it hands it back instead.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then return redis.call('DEL', KEYS[1]) end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
`)

func (l *lease) run() {
	defer close(l.done)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := l.attempt(); err != nil {
				l.hub.log().Error("events: cannot watch the root for external changes; another replica may take over", "err", err)
				l.release()
			}
		case <-l.stop:
			return
		}
	}
}

// attempt takes the lease when it is free, or renews it when held, and
// starts or stops watching accordingly. An error is the watcher's: the
// root cannot be watched.
func (l *lease) attempt() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.every)
	defer cancel()
	st := l.hub.shared
	if l.held {
		held, err := renewScript.Run(ctx, st.client, []string{l.key}, l.me, l.ttl.Milliseconds()).Int()
		switch {
		case err == nil && held == 1:
			l.lastOK = time.Now()
		case err == nil:
			l.hub.log().Warn("events: the watcher lease passed to another replica; not watching here any more")
			l.unwatch()
		default:
			st.failed("lease", err)
			// The lease may expire once ttl has passed since the last
			// renewal: stop a period before, so two replicas never
			// watch at once.
			if time.Since(l.lastOK) >= l.ttl-l.every {
				l.unwatch()
			}
		}
		return nil
	}
	ok, err := st.client.SetNX(ctx, l.key, l.me, l.ttl).Result()
	if err != nil {
		st.failed("lease", err)
		return nil
	}
	if !ok {
		return nil
	}
	l.held, l.lastOK = true, time.Now()
	w, err := NewWatcher(l.hub, l.cfg)
	if err != nil {
		return err
	}
	l.w = w
	l.watching.Store(true)
	l.hub.obs.watchingNow(true)
	l.hub.log().Info("events: this replica holds the watcher lease and watches the root for external changes")
	// Changes made while nobody watched were not seen.
	l.hub.Publish(Event{Type: TypeOverflow})
	return nil
}

func (l *lease) unwatch() {
	l.held = false
	if l.w != nil {
		l.w.Close()
		l.w = nil
		l.watching.Store(false)
		l.hub.obs.watchingNow(false)
		observer{l.cfg.Metrics}.watching(0)
	}
}

// release stops watching and hands the lease back, so another replica
// takes over at its next attempt rather than when the lease expires.
func (l *lease) release() {
	held := l.held
	l.unwatch()
	if !held {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = renewScript.Run(ctx, l.hub.shared.client, []string{l.key}, l.me, "0").Err()
}

// Close stops watching and hands the lease back.
func (l *lease) Close() error {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.release()
	})
	return nil
}
