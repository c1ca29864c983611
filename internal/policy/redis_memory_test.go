package policy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/redistest"
)

// usedMemory is Redis's used_memory: the bytes its allocator holds for
// data, keys, buffers and the script cache (not the Lua VM's own heap).
func usedMemory(t testing.TB, c redis.UniversalClient) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	_, rest, _ := strings.Cut(info, "used_memory:")
	n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]), 10, 64)
	require.NoError(t, err)
	return n
}

// A realistic observation of a present file: the local provider's version
// (dev:ino:size:mtime_ns:ctime_ns) and XXH3-128 hash in hex.
const (
	memVersion = fs.Version("2049:12345678:4096:1767323045123456789:1767323045123456789")
	memHash    = fs.Hash("0123456789abcdef0123456789abcdef")
)

// pathOf is the i-th real path of n bytes (n >= 32).
func pathOf(i, n int) fs.TargetKey {
	name := fmt.Sprintf("/f%09d.txt", i)
	return fs.TargetKey("/" + strings.Repeat("d", n-len(name)-1) + name)
}

// warmUp runs every command of the store's script once and leaves the
// store empty: Redis loads the script on its first call and (since 7.0,
// latency-tracking) allocates a latency histogram of about 25 KB for each
// command on its first call, once for the server's life.
func warmUp(t testing.TB, s *RedisStore) {
	t.Helper()
	require.NoError(t, s.ObservePresent("warm-up", "/warm/a", memVersion, memHash))
	require.NoError(t, s.ObserveAbsent("warm-up", "/warm/b"))
	require.NoError(t, s.ObservePresent("warm-up", "/warm/b", "", "")) // unset
	_, err := s.EditGuard("warm-up", fs.Target{Key: "/warm/a"})
	require.NoError(t, err)
	existed, err := s.Forget("warm-up")
	require.NoError(t, err)
	require.True(t, existed)
}

// measureObservations is used_memory's growth per observation when
// sessions sessions (ids of idLen characters) each record paths
// observations of paths of pathLen bytes, present or absent, on a fresh
// redis-server: everything the store keeps included.
func measureObservations(t *testing.T, sessions, paths, pathLen, idLen int, present bool) float64 {
	t.Helper()
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr, Config{})
	warmUp(t, s)
	before := usedMemory(t, s.client)
	for i := range sessions {
		id := fmt.Sprintf("%0*d", idLen, i)
		for k := range paths {
			key := pathOf(i*paths+k, pathLen)
			if present {
				require.NoError(t, s.ObservePresent(id, key, memVersion, memHash))
			} else {
				require.NoError(t, s.ObserveAbsent(id, key))
			}
		}
	}
	got, observations := s.Stats()
	require.Equal(t, sessions, got)
	require.Equal(t, sessions*paths, observations)
	return float64(usedMemory(t, s.client)-before) / float64(sessions*paths)
}

// TestRedisBytesPerObservation: an observation costs Redis the same few
// hundred bytes whatever the length of its path, since it is keyed by a
// fixed-size digest of the target (docs/deployment.md, "How much memory").
// Sessions of 1,000 paths keep their hash and sorted set in Redis's
// general encodings (past 128 entries), the costliest per entry.
func TestRedisBytesPerObservation(t *testing.T) {
	if !redistest.Available() {
		t.Skip(redistest.MissingReason)
	}
	const sessions, paths, idLen = 4, 1000, 36
	for _, present := range []bool{false, true} {
		kind := map[bool]string{false: "absent", true: "present"}[present]
		short := measureObservations(t, sessions, paths, 32, idLen, present)
		long := measureObservations(t, sessions, paths, 3800, idLen, present)
		t.Logf("%s: %.1f bytes per observation with 32-byte paths, %.1f with 3,800-byte paths", kind, short, long)
		assert.InDelta(t, short, long, 2, "%s: the path's length must not matter", kind)
		assert.Less(t, long, 320.0, kind)
	}
}

// TestRedisFullStillFrees fills a Redis started with noeviction, then
// lowers its maxmemory under what it holds: Redis now refuses any command
// that grows it. Decisions and observations fail closed (fault.CodeSessionStoreUnavailable,
// ErrUnavailable, nothing changed), while expiry, Forget and eviction at
// each of the store's caps still free memory, and the operation that
// freed records its own observation (docs/deployment.md, "When Redis is
// full").
func TestRedisFullStillFrees(t *testing.T) {
	if !redistest.Available() {
		t.Skip(redistest.MissingReason)
	}
	const paths = 400
	key := func(s string, i int) fs.TargetKey { return fs.TargetKey(fmt.Sprintf("/real/%s/%04d.txt", s, i)) }
	cases := []struct {
		name string
		cfg  Config
		// heal is the freeing operation under a full Redis; after it the
		// store holds sessions and observations.
		heal                   func(t *testing.T, s *RedisStore, clock *time.Time)
		sessions, observations int
		stillFull              bool // heal freed less than Redis is over by
	}{
		{name: "expiry", heal: func(t *testing.T, s *RedisStore, clock *time.Time) {
			*clock = clock.Add(time.Minute + time.Microsecond)
			require.NoError(t, s.ObserveAbsent("c", key("c", 0)))
		}, sessions: 2, observations: 2}, // c, and b again
		{name: "forget", heal: func(t *testing.T, s *RedisStore, _ *time.Time) {
			existed, err := s.Forget("a")
			require.NoError(t, err)
			assert.True(t, existed)
			require.NoError(t, s.ObserveAbsent("b", key("b", paths)))
		}, sessions: 1, observations: paths + 1},
		{name: "session cap", cfg: Config{MaxSessions: 2}, heal: func(t *testing.T, s *RedisStore, _ *time.Time) {
			require.NoError(t, s.ObserveAbsent("c", key("c", 0)), "a, the least recently used, goes")
		}, sessions: 2, observations: paths + 1},
		{name: "path cap", cfg: Config{MaxPathsPerSession: paths}, heal: func(t *testing.T, s *RedisStore, _ *time.Time) {
			require.NoError(t, s.ObserveAbsent("a", key("a", paths)), "a's oldest path goes")
		}, sessions: 2, observations: 2 * paths, stillFull: true},
		{name: "observation cap", cfg: Config{MaxObservations: 2 * paths}, heal: func(t *testing.T, s *RedisStore, _ *time.Time) {
			require.NoError(t, s.ObserveAbsent("b", key("b", paths)), "the oldest path of a, the least recently used, goes")
		}, sessions: 2, observations: 2 * paths, stillFull: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
			clock := time.Unix(1_700_000_000, 0)
			cfg := tc.cfg
			cfg.TTL, cfg.Now = time.Minute, func() time.Time { return clock }
			s := newTestRedisStore(t, srv.Addr, cfg)
			warmUp(t, s)
			for _, id := range []string{"a", "b"} {
				for i := range paths {
					require.NoError(t, s.ObservePresent(id, key(id, i), memVersion, memHash))
				}
			}
			// Over by 64 KiB: more than one observation frees, or the
			// buffers Redis 7 shrinks on its own (a client's reply buffer:
			// 16 KiB), less than a session of 400 does (about 120 KiB).
			// INFO and CONFIG SET run once before, so their latency
			// histograms are allocated already.
			ctx := context.Background()
			require.NoError(t, s.client.ConfigSet(ctx, "maxmemory", "0").Err())
			usedMemory(t, s.client)
			require.NoError(t, s.client.ConfigSet(ctx, "maxmemory", strconv.FormatInt(usedMemory(t, s.client)-64<<10, 10)).Err())
			refused := func(what string) {
				t.Helper()
				err := s.ObservePresent("b", key("b", 0), "v2", "h2")
				require.ErrorIs(t, err, ErrUnavailable, what)
				assert.ErrorContains(t, err, "OOM command not allowed when used memory > 'maxmemory'", what)
				w, err := s.WriteIntent("b", fs.Target{Key: key("b", 1), Display: "/ws/b1"})
				assert.Nil(t, w, what)
				assert.Equal(t, fault.CodeSessionStoreUnavailable, fault.CodeOf(err), what)
			}
			refused("full")
			tc.heal(t, s, &clock)
			if tc.stillFull {
				refused("freeing a path makes room for one")
			} else {
				require.NoError(t, s.ObservePresent("b", key("b", 0), "v2", "h2"), "the store healed")
			}
			sessions, observations := s.Stats()
			assert.Equal(t, tc.sessions, sessions)
			assert.Equal(t, tc.observations, observations)
			checkRedisInvariants(t, s)
		})
	}
}

// BenchmarkRedisMemoryAtCaps fills a fresh redis-server to the default
// caps (DefaultMaxSessions sessions with 128-character ids, the longest
// allowed, and DefaultMaxObservations present observations) in several
// shapes and reports used_memory's growth: the figures docs/deployment.md
// sizes maxmemory from. Each shape spreads its observations evenly over
// its first sessions and touches the rest; 129 per session is just past
// Redis's small encodings (128 entries), the costliest per entry.
//
//	go test -run '^$' -bench RedisMemoryAtCaps -benchtime 1x ./internal/policy/
func BenchmarkRedisMemoryAtCaps(b *testing.B) {
	for _, sh := range []struct {
		name                    string
		observing, observations int // sessions with observations, observations in all
	}{
		{"sessions=10000/observations=0", 0, 0},
		{"sessions=10000/observations=10000", DefaultMaxSessions, DefaultMaxSessions},
		{"sessions=10000/observations=262144/per-session=26", DefaultMaxSessions, DefaultMaxObservations},
		{"sessions=10000/observations=262144/per-session=129", DefaultMaxObservations / 129, DefaultMaxObservations},
		{"sessions=10000/observations=262144/per-session=4096", DefaultMaxObservations / DefaultMaxPathsPerSession, DefaultMaxObservations},
	} {
		b.Run(sh.name, func(b *testing.B) {
			var grew int64
			for b.Loop() {
				srv := redistest.Start(b)
				s := newTestRedisStore(b, srv.Addr, Config{})
				warmUp(b, s)
				before := usedMemory(b, s.client)
				fillStore(b, s, sh.observing, sh.observations)
				grew = usedMemory(b, s.client) - before
				sessions, observations := s.Stats()
				if sessions != DefaultMaxSessions || observations != sh.observations {
					b.Fatalf("%d sessions, %d observations", sessions, observations)
				}
			}
			b.ReportMetric(float64(grew)/(1<<20), "MiB")
			if sh.observations > 0 {
				b.ReportMetric(float64(grew)/float64(sh.observations), "bytes/observation")
			}
			b.ReportMetric(float64(grew)/DefaultMaxSessions, "bytes/session")
		})
	}
}

// fillStore records observations present observations spread over the
// first observing of DefaultMaxSessions sessions and touches the others,
// four callers at a time.
func fillStore(b *testing.B, s *RedisStore, observing, observations int) {
	const workers = 4
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var err error
			for i := w; i < DefaultMaxSessions && err == nil; i += workers {
				id := fmt.Sprintf("%0128d", i)
				if i >= observing {
					err = s.Touch(id)
					continue
				}
				n := observations / observing
				if i < observations%observing {
					n++
				}
				for k := 0; k < n && err == nil; k++ {
					err = s.ObservePresent(id, pathOf(i*DefaultMaxPathsPerSession+k, 40), memVersion, memHash)
				}
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}
