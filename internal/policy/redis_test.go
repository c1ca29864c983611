package policy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/redistest"
)

// The shared redis-server of this package's tests (nil when the binary is
// missing: the Redis cases then skip, saying why). Each store gets its own
// key prefix, so tests share the server safely.
var (
	sharedRedis   *redistest.Server
	noRedisReason = redistest.MissingReason
	prefixes      atomic.Int64
)

func TestMain(m *testing.M) { redistest.Main(m, &sharedRedis) }

// testGate is a Gate whose size can be asked.
type testGate interface {
	Gate
	Stats() (sessions, observations int)
}

// impl is one Gate implementation under the shared tests.
type impl struct {
	name   string
	tick   time.Duration // clock resolution: the least idle time past TTL that expires
	rounds int           // per worker in TestConcurrentUse
	new    func(t *testing.T, cfg Config) testGate
}

var memoryImpl = impl{name: "memory", tick: time.Nanosecond, rounds: 2000,
	new: func(_ *testing.T, cfg Config) testGate { return NewStore(cfg) }}

var redisImpl = impl{name: "redis", tick: time.Microsecond, rounds: 300,
	new: func(t *testing.T, cfg Config) testGate {
		if sharedRedis == nil {
			t.Skip(noRedisReason)
		}
		return newTestRedisStore(t, sharedRedis.Addr, cfg)
	}}

// forEachImpl runs f against the memory Store and the RedisStore.
func forEachImpl(t *testing.T, f func(t *testing.T, im impl)) {
	for _, im := range []impl{memoryImpl, redisImpl} {
		t.Run(im.name, func(t *testing.T) {
			if im.name == "redis" && sharedRedis == nil {
				t.Skip(noRedisReason)
			}
			f(t, im)
		})
	}
}

func newTestRedisStore(t testing.TB, addr string, cfg Config) *RedisStore {
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })
	return NewRedisStore(client, cfg, RedisOptions{Prefix: fmt.Sprintf("t%d:", prefixes.Add(1))})
}

// checkRedisInvariants verifies the RedisStore's keys agree: every session
// in lru has a last-use time and vice versa, each session's versions and
// recency hold the same paths, the count is the sum, and caps hold.
func checkRedisInvariants(t *testing.T, r *RedisStore) {
	t.Helper()
	ctx := context.Background()
	c := r.client
	ids, err := c.ZRange(ctx, r.prefix+"lru", 0, -1).Result()
	require.NoError(t, err)
	used, err := c.HKeys(ctx, r.prefix+"used").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, ids, used, "lru and used hold the same sessions")
	assert.LessOrEqual(t, len(ids), r.maxSessions)
	total := 0
	for _, id := range ids {
		paths, err := c.HKeys(ctx, r.prefix+"o:"+id).Result()
		require.NoError(t, err)
		recent, err := c.ZRange(ctx, r.prefix+"r:"+id, 0, -1).Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, paths, recent, id)
		for _, p := range paths {
			assert.Len(t, p, 16, "%s: a target is its 16-byte digest, whatever its path", id)
		}
		assert.LessOrEqual(t, len(paths), r.maxPaths, id)
		total += len(paths)
	}
	n, err := c.Get(ctx, r.prefix+"n").Int()
	if !errors.Is(err, redis.Nil) {
		require.NoError(t, err)
	}
	assert.Equal(t, total, n)
	assert.LessOrEqual(t, n, r.maxObs)
	// No per-session key outlives its session.
	keys, err := c.Keys(ctx, r.prefix+"[or]:*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		assert.Contains(t, ids, k[len(r.prefix)+2:], "orphan key %s", k)
	}
}

// heldSessions is how many sessions the store holds, expired or not.
func heldSessions(t *testing.T, g testGate) int {
	t.Helper()
	switch s := g.(type) {
	case *Store:
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.sessions)
	case *RedisStore:
		n, err := s.client.ZCard(context.Background(), s.prefix+"lru").Result()
		require.NoError(t, err)
		return int(n)
	}
	t.Fatalf("unknown store %T", g)
	return 0
}

// TestRedisSharedBetweenClients: what one process records, another decides
// from (two clients stand for two replicas).
func TestRedisSharedBetweenClients(t *testing.T) {
	if sharedRedis == nil {
		t.Skip(noRedisReason)
	}
	a := newTestRedisStore(t, sharedRedis.Addr, Config{})
	b := NewRedisStore(redis.NewClient(&redis.Options{Addr: sharedRedis.Addr}), Config{}, RedisOptions{Prefix: a.prefix})
	t.Cleanup(func() { b.client.Close() })

	require.NoError(t, a.ObservePresent("s1", target.Key, "v1", ""))
	assert.Equal(t, present("v1"), decide(t, b, "s1", target))
	require.NoError(t, b.ObservePresent("s1", target.Key, "v2", ""))
	assert.Equal(t, present("v2"), decide(t, a, "s1", target))
	assert.True(t, forget(t, b, "s1"))
	assert.Equal(t, unseen, decide(t, a, "s1", target))
}

// TestRedisOutage stops redis-server under a store and starts it again on
// the same port: while it is down every decision is refused with
// fault.CodeSessionStoreUnavailable (never an unconditional or stale intent) and observations
// report their loss; once it is back the same client works again, and (with
// an append-only file) what was recorded before the outage is still there.
func TestRedisOutage(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	s := newTestRedisStore(t, srv.Addr, Config{})
	s.timeout = 500 * time.Millisecond

	require.NoError(t, s.ObservePresent("s1", target.Key, "v1", ""))
	assert.Equal(t, present("v1"), decide(t, s, "s1", target))

	srv.Stop()
	w, err := s.WriteIntent("s1", target)
	assert.Nil(t, w)
	assert.Equal(t, fault.CodeSessionStoreUnavailable, fault.CodeOf(err))
	assert.EqualError(t, err, `cannot write "/ws/link/a.txt": the session store is unavailable, nothing was written; retry shortly`)
	assert.ErrorIs(t, err, ErrUnavailable)
	v, err := s.EditGuard("s1", target)
	assert.Nil(t, v)
	assert.Equal(t, fault.CodeSessionStoreUnavailable, fault.CodeOf(err))
	assert.EqualError(t, err, `cannot edit "/ws/link/a.txt": the session store is unavailable, nothing was written; retry shortly`)
	assert.ErrorIs(t, s.ObservePresent("s1", target.Key, "v2", ""), ErrUnavailable)
	assert.ErrorIs(t, s.ObserveAbsent("s1", other.Key), ErrUnavailable)
	assert.ErrorIs(t, s.Touch("s1"), ErrUnavailable)
	_, err = s.Forget("s2")
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, s.Ping(context.Background()), ErrUnavailable)
	sessions, observations := s.Stats()
	assert.Equal(t, -1, sessions)
	assert.Equal(t, -1, observations)

	require.NoError(t, srv.Start())
	require.NoError(t, s.Ping(context.Background()), "the client reconnects on its own")
	assert.Equal(t, present("v1"), decide(t, s, "s1", target), "the lost observation of v2 was never recorded")
	require.NoError(t, s.ObservePresent("s1", target.Key, "v3", ""))
	assert.Equal(t, present("v3"), decide(t, s, "s1", target))
	checkInvariants(t, s)
}

// TestRedisMatchesModel runs the fuzz target's model comparison against
// Redis over the seed corpus and a fixed set of random sequences.
func TestRedisMatchesModel(t *testing.T) {
	if sharedRedis == nil {
		t.Skip(noRedisReason)
	}
	seqs := append([][]byte{}, fuzzSeeds...)
	rng := uint64(1)
	for range 40 {
		b := make([]byte, 120)
		for i := range b {
			rng = rng*6364136223846793005 + 1442695040888963407
			b[i] = byte(rng >> 56)
		}
		seqs = append(seqs, b)
	}
	for i, data := range seqs {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			matchModel(t, data, func(cfg Config) testGate { return newTestRedisStore(t, sharedRedis.Addr, cfg) })
		})
	}
}

// TestRedisUsingMatchesTouch: a request's use carried by its first decision
// or record (Using) leaves Redis exactly as a separate Touch followed by the
// same operations: the same sessions, in the same least-recently-used
// order, with the same last-use times and observations, through creation,
// eviction at the session cap and expiry.
func TestRedisUsingMatchesTouch(t *testing.T) {
	if sharedRedis == nil {
		t.Skip(noRedisReason)
	}
	a1 := fs.Target{Key: "/real/u1.txt", Display: "/ws/u1.txt"}
	a2 := fs.Target{Key: "/real/u2.txt", Display: "/ws/u2.txt"}
	clock := time.Unix(1_700_000_000, 0)
	cfg := Config{TTL: 10 * time.Second, MaxSessions: 3, MaxPathsPerSession: 2, Now: func() time.Time { return clock }}
	touched := newTestRedisStore(t, sharedRedis.Addr, cfg)
	carried := newTestRedisStore(t, sharedRedis.Addr, cfg)

	// Each step is one request of a session: what the call does with the
	// gate after the request's use.
	type request struct {
		session string
		ops     func(g Gate, session string)
	}
	none := func(Gate, string) {} // refused before the policy
	read := func(k fs.Target) func(Gate, string) {
		return func(g Gate, s string) { require.NoError(t, g.ObservePresent(s, k.Key, "v1", "h")) }
	}
	missing := func(g Gate, s string) { require.NoError(t, g.ObserveAbsent(s, a2.Key)) }
	edit := func(g Gate, s string) {
		if _, err := g.EditGuard(s, a1); err == nil {
			require.NoError(t, g.ObservePresent(s, a1.Key, "v2", "h2"))
		}
	}
	write := func(g Gate, s string) {
		w, err := g.WriteIntent(s, a2)
		require.NoError(t, err)
		require.NotNil(t, w)
		require.NoError(t, g.ObservePresent(s, a2.Key, "w", ""))
	}
	refusedEdit := func(g Gate, s string) { _, _ = g.EditGuard(s, a2) }
	steps := []request{
		{"a", read(a1)}, {"b", none}, {"a", edit}, {"c", refusedEdit},
		{"d", write}, // the cap: b, the least recently used, goes
		{"b", missing}, {"a", none}, {"c", edit}, {"e", none},
		{"", none}, {"a", read(a2)}, {"d", refusedEdit},
	}
	for i, st := range steps {
		clock = clock.Add(time.Second)
		if i == 8 {
			clock = clock.Add(9 * time.Second) // all but the last used expire
		}
		require.NoError(t, touched.Touch(st.session))
		st.ops(touched, st.session)
		g, end := carried.Using(st.session)
		st.ops(g, st.session)
		require.NoError(t, end())
		assert.Equal(t, redisState(t, touched), redisState(t, carried), "after step %d (%s)", i, st.session)
	}
	checkRedisInvariants(t, carried)
	sessions, _ := carried.Stats()
	assert.Positive(t, sessions)
}

// redisState is what a RedisStore holds, without its recency counter's
// values: sessions in LRU order with their last use, and each session's
// observations in recency order.
func redisState(t *testing.T, r *RedisStore) []string {
	t.Helper()
	ctx := context.Background()
	ids, err := r.client.ZRange(ctx, r.prefix+"lru", 0, -1).Result()
	require.NoError(t, err)
	var out []string
	for _, id := range ids {
		used, err := r.client.HGet(ctx, r.prefix+"used", id).Result()
		require.NoError(t, err)
		paths, err := r.client.ZRange(ctx, r.prefix+"r:"+id, 0, -1).Result()
		require.NoError(t, err)
		seen, err := r.client.HGetAll(ctx, r.prefix+"o:"+id).Result()
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s used %s paths %v seen %v", id, used, paths, seen))
	}
	return out
}

// BenchmarkRedisEditRequest is the session store's share of one edit request
// on a path the session read: its use of the session, the decision, the
// record. "touch" is the way before docs/performance.md §7's change (a
// separate Touch: three round trips), "carried" the use carried by the
// decision (Using: two). Both in one run, so the ratio is the claim.
func BenchmarkRedisEditRequest(b *testing.B) {
	run := func(b *testing.B, carried bool) {
		s := benchRedis(b)
		ids := benchSessionIDs(benchSessions)
		keys, versions := benchKeys(benchPaths)
		for i := range benchSessions {
			if err := s.ObservePresent(ids[i], keys[i%benchPaths], versions[i%benchPaths], ""); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			id, k := ids[i%benchSessions], i%benchSessions%benchPaths
			var g Gate = s
			end := func() error { return nil }
			if carried {
				g, end = s.Using(id)
			} else if err := s.Touch(id); err != nil {
				b.Fatal(err)
			}
			if _, err := g.EditGuard(id, fs.Target{Key: keys[k]}); err != nil {
				b.Fatal(err)
			}
			if err := g.ObservePresent(id, keys[k], versions[k], ""); err != nil {
				b.Fatal(err)
			}
			if err := end(); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("touch", func(b *testing.B) { run(b, false) })
	b.Run("carried", func(b *testing.B) { run(b, true) })
}
