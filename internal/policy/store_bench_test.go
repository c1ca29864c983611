package policy

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// Run with:
//
//	go test -run '^$' -bench . -benchmem -count 5 ./internal/policy/
//
// Each Store benchmark has a Baseline twin: the original's state, an
// unbounded map of maps behind one mutex, with no LRU, TTL or cloning. The
// ratio is the price of being bounded.

const (
	benchSessions = 64
	benchPaths    = 256
)

// benchKeys are realistic real paths and versions (dev:ino:size:mtime:ctime).
func benchKeys(n int) ([]fs.TargetKey, []fs.Version) {
	keys := make([]fs.TargetKey, n)
	versions := make([]fs.Version, n)
	for i := range n {
		keys[i] = fs.TargetKey(fmt.Sprintf("/home/user/project/internal/pkg%02d/file%04d.go", i%100, i))
		versions[i] = fs.Version(fmt.Sprintf("2049:%d:4096:1767323045123456789:1767323045123456789", 1000000+i))
	}
	return keys, versions
}

func benchSessionIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("session-%04d", i)
	}
	return ids
}

// observeDecider is the part of a Gate the benchmarks exercise.
type observeDecider interface {
	ObservePresent(session string, key fs.TargetKey, v fs.Version, _ fs.Hash) error
	EditGuard(session string, t fs.Target) (*fs.Observed, error)
}

// baseline is the original's state: unbounded, one mutex.
type baseline struct {
	mu       sync.Mutex
	sessions map[string]map[fs.TargetKey]fs.Version
}

func newBaseline() *baseline {
	return &baseline{sessions: make(map[string]map[fs.TargetKey]fs.Version)}
}

func (b *baseline) ObservePresent(session string, key fs.TargetKey, v fs.Version, _ fs.Hash) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.sessions[session]
	if m == nil {
		m = make(map[fs.TargetKey]fs.Version)
		b.sessions[session] = m
	}
	m[key] = v
	return nil
}

func (b *baseline) EditGuard(session string, t fs.Target) (*fs.Observed, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.sessions[session][t.Key]
	if !ok {
		return nil, notObserved(t)
	}
	return &fs.Observed{Version: v}, nil
}

// observeAndDecide is one read followed by one edit decision on the same
// target, cycling through sessions and paths.
func observeAndDecide(b *testing.B, g observeDecider) {
	ids := benchSessionIDs(benchSessions)
	keys, versions := benchKeys(benchPaths)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		session, k := ids[i%benchSessions], i%benchPaths
		g.ObservePresent(session, keys[k], versions[k], "")
		if _, err := g.EditGuard(session, fs.Target{Key: keys[k]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkObserveAndDecide(b *testing.B) {
	b.Run("Store", func(b *testing.B) { observeAndDecide(b, NewStore(Config{})) })
	b.Run("Baseline", func(b *testing.B) { observeAndDecide(b, newBaseline()) })
	b.Run("Redis", func(b *testing.B) { observeAndDecide(b, benchRedis(b)) })
}

// benchRedis is a RedisStore on the test's loopback redis-server: each
// operation is one round trip (one EVALSHA).
func benchRedis(b *testing.B) *RedisStore {
	if sharedRedis == nil {
		b.Skip(noRedisReason)
	}
	return newTestRedisStore(b, sharedRedis.Addr, Config{})
}

// BenchmarkDecide is the policy decision of one edit (EditGuard) on a path
// the session has read: the cost a write or edit pays before the provider.
//
// Baseline (2 shared cores, load average 12-15, loopback redis-server
// 7.0.15): Store 134-645 ns, Redis 35-190 µs, one round trip each
// (docs/performance.md).
func BenchmarkDecide(b *testing.B) {
	run := func(b *testing.B, g observeDecider) {
		ids := benchSessionIDs(benchSessions)
		keys, versions := benchKeys(benchPaths)
		for i := range benchSessions * 4 {
			if err := g.ObservePresent(ids[i%benchSessions], keys[i%benchPaths], versions[i%benchPaths], ""); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := g.EditGuard(ids[i%benchSessions], fs.Target{Key: keys[i%(benchSessions*4)%benchPaths]}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("Store", func(b *testing.B) { run(b, NewStore(Config{})) })
	b.Run("Redis", func(b *testing.B) { run(b, benchRedis(b)) })
}

// observeAndDecideParallel gives each goroutine its own session, as
// concurrent agents have.
func observeAndDecideParallel(b *testing.B, g observeDecider) {
	ids := benchSessionIDs(benchSessions)
	keys, versions := benchKeys(benchPaths)
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		session := ids[int(next.Add(1))%benchSessions]
		i := 0
		for pb.Next() {
			k := i % benchPaths
			g.ObservePresent(session, keys[k], versions[k], "")
			if _, err := g.EditGuard(session, fs.Target{Key: keys[k]}); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkObserveAndDecideParallel(b *testing.B) {
	b.Run("Store", func(b *testing.B) { observeAndDecideParallel(b, NewStore(Config{})) })
	b.Run("Baseline", func(b *testing.B) { observeAndDecideParallel(b, newBaseline()) })
	b.Run("Redis", func(b *testing.B) { observeAndDecideParallel(b, benchRedis(b)) })
}

// BenchmarkMemoryPerEntry reports the live heap per (session, path) entry
// over 100 sessions x 1000 paths. Each entry's key (~50 bytes) and version
// (~57 bytes) are fresh strings, as they are per request in the server: the
// Baseline keeps them, the Store keeps its own copies.
func BenchmarkMemoryPerEntry(b *testing.B) {
	const sessions, paths = 100, 1000
	ids := benchSessionIDs(sessions)
	measure := func(b *testing.B, newGate func() observeDecider) {
		var perEntry float64
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			g := newGate()
			for _, id := range ids {
				for k := range paths {
					key := fmt.Sprintf("/home/user/project/internal/pkg%02d/file%04d.go", k%100, k)
					v := fmt.Sprintf("2049:%d:4096:1767323045123456789:1767323045123456789", 1000000+k)
					g.ObservePresent(id, fs.TargetKey(key), fs.Version(v), "")
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			perEntry = float64(after.HeapAlloc-before.HeapAlloc) / (sessions * paths)
			runtime.KeepAlive(g)
		}
		b.ReportMetric(perEntry, "bytes/entry")
	}
	b.Run("Store", func(b *testing.B) { measure(b, func() observeDecider { return NewStore(Config{}) }) })
	b.Run("Baseline", func(b *testing.B) { measure(b, func() observeDecider { return newBaseline() }) })
}
