package policy

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// target's Display deliberately differs from its Key: messages must name the
// Display path.
var (
	target = fs.Target{Key: "/real/a.txt", Display: "/ws/link/a.txt"}
	other  = fs.Target{Key: "/real/b.txt", Display: "/ws/b.txt"}
)

const (
	msgNotObserved = `edit requires reading "/ws/link/a.txt" first`
	msgNotFound    = `cannot edit "/ws/link/a.txt": not found`
)

// fakeClock is a manual clock for TTL tests (single goroutine only).
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// decision is what a session gets for target: the write intent and either
// the edit guard's version or its error code and message.
type decision struct {
	write   fs.WriteIntent
	edit    fs.Version
	code    fault.Code
	message string
}

var (
	unseen = unseenAt(target)
	absent = decision{write: fs.WriteIntent{Kind: fs.CreateIfAbsent}, code: fault.CodeNotFound, message: msgNotFound}
)

func unseenAt(tg fs.Target) decision {
	return decision{
		write:   fs.WriteIntent{Kind: fs.CreateIfAbsent},
		code:    fault.CodeNotObserved,
		message: `edit requires reading "` + tg.Display + `" first`,
	}
}

func present(v fs.Version) decision {
	return decision{write: fs.WriteIntent{Kind: fs.ReplaceIfVersion, Version: v}, edit: v}
}

func decide(t *testing.T, g Gate, session string, tg fs.Target) decision {
	t.Helper()
	var d decision
	w, err := g.WriteIntent(session, tg)
	require.NoError(t, err)
	require.NotNil(t, w)
	d.write = *w
	v, err := g.EditGuard(session, tg)
	if err != nil {
		require.Nil(t, v)
		var fe *fault.Error
		require.True(t, errors.As(err, &fe), "error %T is not *fault.Error", err)
		d.code, d.message = fe.Code, fe.Message
		return d
	}
	require.NotNil(t, v)
	d.edit = v.Version
	return d
}

// checkInvariants verifies the Store's internal bookkeeping: maps and lists
// agree in both directions, counts and caps hold.
func checkInvariants(t *testing.T, g testGate) {
	t.Helper()
	if r, ok := g.(*RedisStore); ok {
		checkRedisInvariants(t, r)
		return
	}
	s := g.(*Store)
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.LessOrEqual(t, len(s.sessions), s.maxSessions)
	assert.LessOrEqual(t, s.observations, s.maxObservations)
	total, n := 0, 0
	var bytes int64 // Store.bytes, recounted from what is held
	sightRefs, pathRefs := map[*sight]int32{}, map[*path]int32{}
	var prev *session
	for ss := s.recent.front; ss != nil; ss = ss.lk.next {
		n++
		assert.Same(t, prev, ss.lk.prev)
		assert.Same(t, ss, s.sessions[ss.id])
		assert.LessOrEqual(t, len(ss.paths), s.maxPaths)
		assert.GreaterOrEqual(t, ss.peak, len(ss.paths))
		bytes += sessionBytes + strBytes(len(ss.id)) + int64(ss.peak)*sessionSlotBytes
		m := 0
		var prevO *observation
		for o := ss.recent.front; o != nil; o = o.lk.next {
			m++
			assert.Same(t, prevO, o.lk.prev)
			assert.Same(t, o, ss.paths[o.seen.path])
			assert.Same(t, o.seen.path, s.paths[o.seen.path.key])
			if sightRefs[o.seen]++; sightRefs[o.seen] == 1 {
				pathRefs[o.seen.path]++
				bytes += sightBytes + strBytes(len(o.seen.seen))
			}
			bytes += observationBytes
			prevO = o
		}
		assert.Same(t, prevO, ss.recent.back)
		assert.Equal(t, len(ss.paths), m)
		total += m
		prev = ss
	}
	assert.Same(t, prev, s.recent.back)
	assert.Equal(t, len(s.sessions), n)
	assert.Equal(t, total, s.observations)
	for g, refs := range sightRefs {
		assert.Equal(t, refs, g.refs, "references of a sight")
	}
	assert.Len(t, s.paths, len(pathRefs), "every kept path is held by some observation")
	for p, refs := range pathRefs {
		assert.Equal(t, refs, p.refs, "references of a path")
		bytes += pathBytes + strBytes(len(p.key))
	}
	assert.GreaterOrEqual(t, s.pathsPeak, len(s.paths))
	bytes += int64(s.pathsPeak) * pathSlotBytes
	assert.Equal(t, bytes, s.bytes, "counted bytes")
	if s.observations > 1 {
		assert.LessOrEqual(t, s.bytes, s.maxBytes)
	}
}

func TestDecisions(t *testing.T) {
	tests := []struct {
		name      string
		steps     func(s testGate)
		anonymous bool // decide with an empty session id, else "s1"
		want      decision
	}{
		{name: "unseen", steps: func(testGate) {}, want: unseen},
		{name: "touched but unseen", steps: func(s testGate) { s.Touch("s1") }, want: unseen},
		{
			name:  "seen present",
			steps: func(s testGate) { s.ObservePresent("s1", target.Key, "v1", "") },
			want:  present("v1"),
		},
		{
			name:  "seen absent",
			steps: func(s testGate) { s.ObserveAbsent("s1", target.Key) },
			want:  absent,
		},
		{
			name: "last present wins",
			steps: func(s testGate) {
				s.ObservePresent("s1", target.Key, "v1", "")
				s.ObservePresent("s1", target.Key, "v2", "")
			},
			want: present("v2"),
		},
		{
			name: "present then absent",
			steps: func(s testGate) {
				s.ObservePresent("s1", target.Key, "v1", "")
				s.ObserveAbsent("s1", target.Key)
			},
			want: absent,
		},
		{
			name: "absent then present",
			steps: func(s testGate) {
				s.ObserveAbsent("s1", target.Key)
				s.ObservePresent("s1", target.Key, "v2", "")
			},
			want: present("v2"),
		},
		{
			name: "present then absent then present",
			steps: func(s testGate) {
				s.ObservePresent("s1", target.Key, "v1", "")
				s.ObserveAbsent("s1", target.Key)
				s.ObservePresent("s1", target.Key, "v3", "")
			},
			want: present("v3"),
		},
		{
			name:  "another path seen",
			steps: func(s testGate) { s.ObservePresent("s1", other.Key, "v1", "") },
			want:  unseen,
		},
		{
			name: "present with empty version is no evidence",
			steps: func(s testGate) {
				s.ObservePresent("s1", target.Key, "v1", "")
				s.ObservePresent("s1", target.Key, "", "")
			},
			want: unseen,
		},
		{
			name:      "empty session id records nothing",
			steps:     func(s testGate) { s.ObservePresent("", target.Key, "v1", ""); s.Touch("") },
			anonymous: true,
			want:      unseen,
		},
		{
			name: "empty session id never sees another's state",
			steps: func(s testGate) {
				s.ObservePresent("s1", target.Key, "v1", "")
				s.ObserveAbsent("", target.Key)
			},
			anonymous: true,
			want:      unseen,
		},
		{
			name: "forgotten session",
			steps: func(s testGate) {
				s.ObservePresent("s1", target.Key, "v1", "")
				s.Forget("s1")
			},
			want: unseen,
		},
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := im.new(t, Config{})
				tt.steps(s)
				session := "s1"
				if tt.anonymous {
					session = ""
				}
				assert.Equal(t, tt.want, decide(t, s, session, target))
				checkInvariants(t, s)
			})
		}
	})
}

func TestEditGuardErrorsAreTyped(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		s := im.new(t, Config{})
		_, err := s.EditGuard("s1", target)
		assert.Equal(t, fault.CodeNotObserved, fault.CodeOf(err))
		assert.EqualError(t, err, msgNotObserved)

		s.ObserveAbsent("s1", target.Key)
		_, err = s.EditGuard("s1", target)
		assert.Equal(t, fault.CodeNotFound, fault.CodeOf(err))
		assert.EqualError(t, err, msgNotFound)
	})
}

func TestDisplayIsNotEscaped(t *testing.T) {
	// The original interpolates the path raw; %q would escape these.
	tg := fs.Target{Key: "/real/q", Display: "/ws/a \"b\"\tü.txt"}
	forEachImpl(t, func(t *testing.T, im impl) {
		_, err := im.new(t, Config{}).EditGuard("s1", tg)
		assert.EqualError(t, err, "edit requires reading \"/ws/a \"b\"\tü.txt\" first")
	})
}

func TestSessionIsolation(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		s := im.new(t, Config{})
		s.ObservePresent("A", target.Key, "vA", "")
		s.ObserveAbsent("A", other.Key)
		s.ObservePresent("B", other.Key, "vB", "")

		assert.Equal(t, present("vA"), decide(t, s, "A", target))
		assert.Equal(t, unseen, decide(t, s, "B", target), "A's read must not authorize B")
		assert.Equal(t, present("vB"), decide(t, s, "B", other), "A's absence must not reach B")
		assert.Equal(t, unseen, decide(t, s, "a", target), "session ids are case-sensitive")

		assert.True(t, forget(t, s, "A"))
		assert.Equal(t, present("vB"), decide(t, s, "B", other), "forgetting A keeps B")
		checkInvariants(t, s)
	})
}

func TestEmptySessionID(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		s := im.new(t, Config{})
		s.Touch("")
		s.ObservePresent("", target.Key, "v1", "")
		s.ObserveAbsent("", other.Key)
		assert.Equal(t, unseen, decide(t, s, "", target))
		assert.Equal(t, unseenAt(other), decide(t, s, "", other))
		assert.False(t, forget(t, s, ""))
		sessions, observations := s.Stats()
		assert.Zero(t, sessions)
		assert.Zero(t, observations)
	})
}

func TestTTL(t *testing.T) {
	const ttl = 10 * time.Minute
	// tick is the implementation's clock resolution: the least idle time
	// past TTL that expires a session.
	tests := []struct {
		name   string
		idle   func(tick time.Duration) []time.Duration // gaps between uses (each use is touch, step)
		use    func(s testGate)
		alive  bool
		forget bool // Forget's answer at the end
	}{
		{name: "idle exactly TTL", idle: gaps(ttl), alive: true},
		{name: "idle past TTL", idle: func(tick time.Duration) []time.Duration { return []time.Duration{ttl + tick} }, alive: false},
		{name: "touch keeps alive", idle: gaps(ttl, ttl), use: func(s testGate) { s.Touch("s1") }, alive: true},
		{
			name: "decision keeps alive", idle: gaps(ttl, ttl),
			use: func(s testGate) { s.WriteIntent("s1", other) }, alive: true,
		},
		{
			name: "edit guard keeps alive", idle: gaps(ttl, ttl),
			use: func(s testGate) { _, _ = s.EditGuard("s1", other) }, alive: true,
		},
		{
			name: "observation keeps alive", idle: gaps(ttl, ttl),
			use: func(s testGate) { s.ObserveAbsent("s1", other.Key) }, alive: true,
		},
		{
			name: "use after expiry does not revive", idle: func(tick time.Duration) []time.Duration { return []time.Duration{ttl + tick, ttl} },
			use: func(s testGate) { s.Touch("s1") }, alive: false,
		},
		{
			name: "another session's use does not keep alive", idle: gaps(ttl, ttl),
			use: func(s testGate) { s.Touch("s2") }, alive: false,
		},
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				clk := newClock()
				s := im.new(t, Config{TTL: ttl, Now: clk.Now})
				s.ObservePresent("s1", target.Key, "v1", "")
				idle := tt.idle(im.tick)
				for i, d := range idle {
					clk.Advance(d)
					if i < len(idle)-1 && tt.use != nil {
						tt.use(s)
					}
				}
				want := unseen
				if tt.alive {
					want = present("v1")
				}
				assert.Equal(t, want, decide(t, s, "s1", target))
				checkInvariants(t, s)
			})
		}
	})
}

func gaps(d ...time.Duration) func(time.Duration) []time.Duration {
	return func(time.Duration) []time.Duration { return d }
}

func TestExpiredSessionsAreSwept(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		clk := newClock()
		s := im.new(t, Config{TTL: time.Minute, Now: clk.Now})
		for i := range 3 * sweepBatch {
			s.ObservePresent(fmt.Sprint("old", i), target.Key, "v1", "")
		}
		clk.Advance(time.Minute + im.tick)

		// One call sweeps a bounded batch from the idle end, never the lot.
		s.Touch("new")
		assert.Equal(t, 3*sweepBatch+1-sweepBatch, heldSessions(t, s))

		// An expired session is gone on access even before the sweep reaches it.
		assert.False(t, forget(t, s, "old40"))
		checkInvariants(t, s)

		sessions, observations := s.Stats()
		assert.Equal(t, 1, sessions)
		assert.Zero(t, observations)
		checkInvariants(t, s)
	})
}

func TestSessionLRU(t *testing.T) {
	tests := []struct {
		name    string
		use     func(s testGate) // between observing A, B and C
		evicted []string
	}{
		{name: "least recently created goes first", use: func(testGate) {}, evicted: []string{"A"}},
		{name: "touch counts as use", use: func(s testGate) { s.Touch("A") }, evicted: []string{"B"}},
		{name: "write decision counts as use", use: func(s testGate) { s.WriteIntent("A", other) }, evicted: []string{"B"}},
		{name: "edit guard counts as use", use: func(s testGate) { _, _ = s.EditGuard("A", other) }, evicted: []string{"B"}},
		{name: "observation counts as use", use: func(s testGate) { s.ObserveAbsent("A", other.Key) }, evicted: []string{"B"}},
		{name: "decision on an unknown session creates none", use: func(s testGate) { s.WriteIntent("X", other) }, evicted: []string{"A"}},
		{name: "touch creates a session", use: func(s testGate) { s.Touch("T") }, evicted: []string{"A", "B"}},
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := im.new(t, Config{MaxSessions: 2})
				s.ObservePresent("A", target.Key, "vA", "")
				s.ObservePresent("B", target.Key, "vB", "")
				tt.use(s)
				s.ObservePresent("C", target.Key, "vC", "")
				for _, id := range []string{"A", "B", "C"} {
					want := present("v" + fs.Version(id))
					if slices.Contains(tt.evicted, id) {
						want = unseen
					}
					assert.Equal(t, want, decide(t, s, id, target), id)
				}
				sessions, _ := s.Stats()
				assert.Equal(t, 2, sessions)
				checkInvariants(t, s)
			})
		}
	})
}

func TestPathLRU(t *testing.T) {
	keys := []fs.TargetKey{"/k1", "/k2", "/k3"}
	tests := []struct {
		name    string
		use     func(s testGate)
		evicted fs.TargetKey
		absent  fs.TargetKey
	}{
		{name: "least recently observed goes first", use: func(testGate) {}, evicted: "/k1"},
		{name: "write decision refreshes", use: func(s testGate) { s.WriteIntent("s1", fs.Target{Key: "/k1"}) }, evicted: "/k2"},
		{name: "edit guard refreshes", use: func(s testGate) { _, _ = s.EditGuard("s1", fs.Target{Key: "/k1"}) }, evicted: "/k2"},
		{name: "re-observation refreshes", use: func(s testGate) { s.ObservePresent("s1", "/k1", "v/k1", "") }, evicted: "/k2"},
		{name: "absence counts as an entry", use: func(s testGate) { s.ObserveAbsent("s1", "/k1") }, evicted: "/k2", absent: "/k1"},
		{name: "a decision on an unseen path changes nothing", use: func(s testGate) { s.WriteIntent("s1", fs.Target{Key: "/k9"}) }, evicted: "/k1"},
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := im.new(t, Config{MaxPathsPerSession: 2})
				s.ObservePresent("s1", keys[0], "v/k1", "")
				s.ObservePresent("s1", keys[1], "v/k2", "")
				tt.use(s)
				s.ObservePresent("s1", keys[2], "v/k3", "")
				for _, k := range keys {
					_, err := s.EditGuard("s1", fs.Target{Key: k})
					switch k {
					case tt.evicted:
						assert.Equal(t, fault.CodeNotObserved, fault.CodeOf(err), k)
					case tt.absent:
						assert.Equal(t, fault.CodeNotFound, fault.CodeOf(err), k)
					default:
						assert.NoError(t, err, k)
					}
				}
				sessions, observations := s.Stats()
				assert.Equal(t, 1, sessions)
				assert.Equal(t, 2, observations)
				checkInvariants(t, s)
			})
		}
	})
}

func TestMaxObservations(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		s := im.new(t, Config{MaxObservations: 3})
		s.Touch("empty")
		s.ObservePresent("A", "/a1", "v", "")
		s.ObservePresent("A", "/a2", "v", "")
		s.ObservePresent("B", "/b1", "v", "")
		sessions, observations := s.Stats()
		assert.Equal(t, 3, sessions)
		assert.Equal(t, 3, observations)

		// Over the cap: the idle empty session goes, then A's oldest path.
		s.ObservePresent("B", "/b2", "v", "")
		_, err := s.EditGuard("A", fs.Target{Key: "/a1"})
		assert.Equal(t, fault.CodeNotObserved, fault.CodeOf(err))
		for _, c := range []struct {
			session string
			key     fs.TargetKey
		}{{"A", "/a2"}, {"B", "/b1"}, {"B", "/b2"}} {
			_, err := s.EditGuard(c.session, fs.Target{Key: c.key})
			assert.NoError(t, err, c.key)
		}
		assert.False(t, forget(t, s, "empty"))
		checkInvariants(t, s)

		// A session that is alone gives up its own oldest path, never its newest.
		s.Forget("A")
		s.ObservePresent("B", "/b3", "v", "")
		s.ObservePresent("B", "/b4", "v", "")
		for k, want := range map[fs.TargetKey]fault.Code{"/b1": fault.CodeNotObserved, "/b2": "", "/b3": "", "/b4": ""} {
			_, err := s.EditGuard("B", fs.Target{Key: k})
			assert.Equal(t, want, fault.CodeOf(err), k)
		}
		checkInvariants(t, s)
	})
}

func TestForget(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		s := im.new(t, Config{})
		s.ObservePresent("s1", target.Key, "v1", "")
		s.Touch("t")

		assert.True(t, forget(t, s, "s1"))
		assert.False(t, forget(t, s, "s1"), "already forgotten")
		assert.True(t, forget(t, s, "t"), "a touched session exists")
		assert.False(t, forget(t, s, "never"))
		assert.Equal(t, unseen, decide(t, s, "s1", target))

		// A decision alone does not create a session.
		assert.False(t, forget(t, s, "s1"))
		sessions, observations := s.Stats()
		assert.Zero(t, sessions)
		assert.Zero(t, observations)
		checkInvariants(t, s)
	})
}

func TestStats(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		s := im.new(t, Config{})
		s.ObservePresent("A", "/1", "v", "")
		s.ObservePresent("A", "/1", "w", "")
		s.ObserveAbsent("A", "/2")
		s.ObservePresent("B", "/1", "v", "")
		s.Touch("C")
		sessions, observations := s.Stats()
		assert.Equal(t, 3, sessions)
		assert.Equal(t, 3, observations)

		s.ObservePresent("A", "/2", "", "") // no evidence: dropped
		_, observations = s.Stats()
		assert.Equal(t, 2, observations)
		checkInvariants(t, s)
	})
}

func TestConfigDefaults(t *testing.T) {
	for _, cfg := range []Config{{}, {TTL: -1, MaxSessions: -1, MaxPathsPerSession: -1, MaxObservations: -1}} {
		s := NewStore(cfg)
		assert.Equal(t, int64(DefaultTTL), s.ttl)
		assert.Equal(t, DefaultMaxSessions, s.maxSessions)
		assert.Equal(t, DefaultMaxPathsPerSession, s.maxPaths)
		assert.Equal(t, DefaultMaxObservations, s.maxObservations)

		r := NewRedisStore(nil, cfg, RedisOptions{})
		assert.Equal(t, DefaultTTL.Microseconds(), r.ttl)
		assert.Equal(t, DefaultMaxSessions, r.maxSessions)
		assert.Equal(t, DefaultMaxPathsPerSession, r.maxPaths)
		assert.Equal(t, DefaultMaxObservations, r.maxObs)
		assert.Equal(t, "toolfs:", r.prefix)
		assert.Equal(t, DefaultRedisTimeout, r.timeout)
	}
}

func TestOff(t *testing.T) {
	var g Gate = Off{}
	assert.NoError(t, g.Touch("s1"))
	assert.NoError(t, g.ObservePresent("s1", target.Key, "v1", ""))
	assert.NoError(t, g.ObserveAbsent("s1", other.Key))
	for _, session := range []string{"s1", ""} {
		for _, tg := range []fs.Target{target, other} {
			w, err := g.WriteIntent(session, tg)
			assert.Nil(t, w, "write is unconditional")
			assert.NoError(t, err)
			v, err := g.EditGuard(session, tg)
			assert.Nil(t, v, "edit is unconditional")
			assert.NoError(t, err)
		}
	}
	assert.False(t, forget(t, g, "s1"))
}

// TestConcurrentUse hammers one small store from many goroutines (run it
// under -race; for Redis, several clients are several processes). Every
// version a session is handed back must be one that session recorded for
// that key.
func TestConcurrentUse(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "small caps, constant eviction", cfg: Config{MaxSessions: 8, MaxPathsPerSession: 4, MaxObservations: 20}},
		{name: "defaults", cfg: Config{}},
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) { hammer(t, im.new(t, tt.cfg), im.rounds) })
		}
	})
}

func hammer(t *testing.T, s testGate, rounds int) {
	const workers, keys = 16, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			session := fmt.Sprint("g", w%12) // some sessions are shared by two workers
			fail := func(err error) { errs <- fmt.Errorf("%s: %w", session, err) }
			for i := range rounds {
				key := fs.TargetKey(fmt.Sprint("/k", i%keys))
				tg := fs.Target{Key: key, Display: string(key)}
				var err error
				switch i % 7 {
				case 0, 1:
					err = s.ObservePresent(session, key, fs.Version(fmt.Sprint(session, key, ":", i)), "")
				case 2:
					err = s.ObserveAbsent(session, key)
				case 3:
					var wi *fs.WriteIntent
					if wi, err = s.WriteIntent(session, tg); err == nil && wi.Kind == fs.ReplaceIfVersion && !ownVersion(session, key, wi.Version) {
						err = fmt.Errorf("got %q for %s", wi.Version, key)
					}
				case 4:
					var v *fs.Observed
					if v, err = s.EditGuard(session, tg); err == nil && !ownVersion(session, key, v.Version) {
						err = fmt.Errorf("got %q for %s", v.Version, key)
					} else if c := fault.CodeOf(err); c == fault.CodeNotObserved || c == fault.CodeNotFound {
						err = nil
					}
				case 5:
					err = s.Touch(session)
				case 6:
					if i%5 == 0 {
						_, err = s.Forget(session)
					} else {
						s.Stats()
					}
				}
				if err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkInvariants(t, s)
}

func ownVersion(session string, key fs.TargetKey, v fs.Version) bool {
	p := session + string(key) + ":"
	return len(v) > len(p) && string(v[:len(p)]) == p
}

// forget is Forget that fails the test on a store error.
func forget(t *testing.T, g Gate, session string) bool {
	t.Helper()
	ok, err := g.Forget(session)
	require.NoError(t, err)
	return ok
}

// TestObservationCarriesHash: both stores keep the content hash beside the
// version, hand it to write and edit decisions, replace it with a new
// observation, and forget it with a confirmed absence.
func TestObservationCarriesHash(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		s := im.new(t, Config{})
		require.NoError(t, s.ObservePresent("s1", target.Key, "1:2:3:4:5", "00112233445566778899aabbccddeeff"))
		w, err := s.WriteIntent("s1", target)
		require.NoError(t, err)
		assert.Equal(t, &fs.WriteIntent{Kind: fs.ReplaceIfVersion, Version: "1:2:3:4:5", Hash: "00112233445566778899aabbccddeeff"}, w)
		g, err := s.EditGuard("s1", target)
		require.NoError(t, err)
		assert.Equal(t, &fs.Observed{Version: "1:2:3:4:5", Hash: "00112233445566778899aabbccddeeff"}, g)

		require.NoError(t, s.ObservePresent("s1", target.Key, "1:2:3:4:6", ""))
		g, err = s.EditGuard("s1", target)
		require.NoError(t, err)
		assert.Equal(t, &fs.Observed{Version: "1:2:3:4:6"}, g, "an unknown hash replaces the old one")

		require.NoError(t, s.ObserveAbsent("s1", target.Key))
		_, err = s.EditGuard("s1", target)
		assert.Equal(t, fault.CodeNotFound, fault.CodeOf(err))
		checkInvariants(t, s)
	})
}

func TestRedisSeenValue(t *testing.T) {
	o := fs.Observed{Version: "1:2:3:4:5", Hash: "ab"}
	assert.Equal(t, fs.Version("1:2:3:4:5|ab"), seenValue(o))
	assert.Equal(t, o, parseSeen("1:2:3:4:5|ab"))
	assert.Equal(t, fs.Observed{Version: "1:2:3:4:5"}, parseSeen("1:2:3:4:5"), "a value stored before hashes were kept")
	assert.Equal(t, fs.Version(""), seenValue(fs.Observed{}), "absence stays empty")
}

// TestStoreMaxBytes: over MaxBytes, the least recently used session gives up
// its least recently used paths, as over MaxObservations; the session just
// used keeps its newest observation; the count never passes the bound.
func TestStoreMaxBytes(t *testing.T) {
	const maxBytes = 64 << 10
	s := NewStore(Config{MaxBytes: maxBytes})
	version := func(k int) fs.Version {
		return fs.Version(fmt.Sprintf("2049:%d:4096:1767323045123456789:1767323045123456789", k))
	}
	key := func(k int) fs.TargetKey {
		return fs.TargetKey(fmt.Sprintf("/home/user/project/pkg%02d/file%04d.go", k%10, k))
	}
	for k := range 2000 {
		require.NoError(t, s.ObservePresent(fmt.Sprint("s", k%7), key(k), version(k), "00112233445566778899aabbccddeeff"))
		require.LessOrEqual(t, s.Bytes(), int64(maxBytes))
	}
	checkInvariants(t, s)
	sessions, observations := s.Stats()
	assert.Equal(t, 7, sessions)
	assert.Less(t, observations, 2000, "evicted")
	assert.Greater(t, observations, 100, "not more than needed")

	// The oldest paths went first; the newest of every session is kept.
	_, err := s.EditGuard("s0", fs.Target{Key: key(0)})
	assert.Equal(t, fault.CodeNotObserved, fault.CodeOf(err))
	for k := 1993; k < 2000; k++ {
		g, err := s.EditGuard(fmt.Sprint("s", k%7), fs.Target{Key: key(k)})
		require.NoError(t, err)
		assert.Equal(t, version(k), g.Version)
	}

	// One observation larger than the bound alone is kept: the session must
	// be able to write what it just read.
	huge := fs.TargetKey("/" + strings.Repeat("x", maxBytes))
	require.NoError(t, s.ObservePresent("big", huge, "v", ""))
	g, err := s.EditGuard("big", fs.Target{Key: huge})
	require.NoError(t, err)
	assert.Equal(t, fs.Version("v"), g.Version)
	_, observations = s.Stats()
	assert.Equal(t, 1, observations)
	checkInvariants(t, s)

	// Forgetting everything gives the bytes back.
	for _, id := range []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "big"} {
		s.Forget(id)
	}
	assert.LessOrEqual(t, s.Bytes(), int64(smallMap*pathSlotBytes), "only the paths map's first slots")
	checkInvariants(t, s)
}

// TestStoreSharesKeysAndVersions: sessions that saw a path at the same
// version share its key and version, and one session's newer version does
// not change what the others saw.
func TestStoreSharesKeysAndVersions(t *testing.T) {
	s := NewStore(Config{})
	for _, id := range []string{"a", "b", "c"} {
		s.ObservePresent(id, target.Key, "v1", "h1")
	}
	one := s.Bytes()
	s.ObservePresent("d", target.Key, "v1", "h1")
	assert.Equal(t, int64(sessionBytes+strBytes(1)+sessionSlotBytes+observationBytes), s.Bytes()-one, "a shared observation costs its entry only")
	s.ObservePresent("a", target.Key, "v2", "h2")
	s.ObservePresent("e", target.Key, "v1", "h1") // after v2 became the last sight
	for id, want := range map[string]fs.Observed{"a": {Version: "v2", Hash: "h2"}, "b": {Version: "v1", Hash: "h1"}, "e": {Version: "v1", Hash: "h1"}} {
		g, err := s.EditGuard(id, target)
		require.NoError(t, err)
		assert.Equal(t, want, *g, id)
	}
	s.mu.Lock()
	assert.Len(t, s.paths, 1)
	s.mu.Unlock()
	checkInvariants(t, s)
}

// TestStoreBytesCoverHeap: what Bytes counts is at least the heap the
// Store holds, for entries that share their keys and versions and for
// entries that share nothing, and after evictions shrank its maps.
func TestStoreBytesCoverHeap(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation sizes")
	}
	fill := func(s *Store, sessions, paths int, shared bool) {
		for i := range sessions {
			id := fmt.Sprintf("agent-%03d", i)
			for k := range paths {
				n := k
				if !shared {
					n = i*paths + k
				}
				key := fmt.Sprintf("/home/user/project/internal/pkg%02d/file%06d.go", n%100, n)
				v := fmt.Sprintf("2049:%d:4096:1767323045123456789:1767323045123456789", 1000000+n)
				s.ObservePresent(id, fs.TargetKey(key), fs.Version(v), fs.Hash(fmt.Sprintf("%032x", n)))
			}
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	tests := []struct {
		name            string
		cfg             Config
		sessions, paths int
		shared          bool
	}{
		{name: "100 sessions, the same 2000 paths", cfg: Config{}, sessions: 100, paths: 2000, shared: true},
		{name: "100 sessions, 2000 paths each", cfg: Config{}, sessions: 100, paths: 2000},
		{name: "evicted to a quarter", cfg: Config{MaxObservations: 50000}, sessions: 100, paths: 2000},
		{name: "1000 sessions, 10 paths each", cfg: Config{}, sessions: 1000, paths: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := heap()
			s := NewStore(tt.cfg)
			fill(s, tt.sessions, tt.paths, tt.shared)
			held := int64(heap() - before)
			counted := s.Bytes()
			_, observations := s.Stats()
			t.Logf("%d observations: heap %d bytes (%.0f per entry), counted %d (%.0f per entry)",
				observations, held, float64(held)/float64(observations), counted, float64(counted)/float64(observations))
			assert.GreaterOrEqual(t, counted, held, "Bytes covers the heap")
			assert.Less(t, counted, 2*held, "and is not far above it")
			runtime.KeepAlive(s)
		})
	}
}

// TestStoreCountsEvictions: Evicted counts each observation a bound removed
// (paths per session, sessions, observations, bytes: docs/api.md,
// toolfs_observations_evicted_total), and nothing that expiry, Forget or a
// new version of a held path removed.
func TestStoreCountsEvictions(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	tests := []struct {
		name string
		cfg  Config
		run  func(s *Store)
		want uint64
	}{
		{name: "within the bounds", cfg: Config{}, run: func(s *Store) {
			s.ObservePresent("A", "/a", "v1", "")
			s.ObservePresent("A", "/a", "v2", "") // a new version replaces, not evicts
			s.ObserveAbsent("A", "/b")
			s.ObservePresent("B", "/a", "v2", "")
		}},
		{name: "paths per session", cfg: Config{MaxPathsPerSession: 2}, run: func(s *Store) {
			for _, k := range []fs.TargetKey{"/1", "/2", "/3", "/4", "/5"} {
				s.ObservePresent("A", k, "v", "")
			}
		}, want: 3},
		{name: "sessions", cfg: Config{MaxSessions: 2}, run: func(s *Store) {
			s.ObservePresent("A", "/1", "v", "")
			s.ObservePresent("A", "/2", "v", "")
			s.ObservePresent("B", "/1", "v", "")
			s.ObservePresent("C", "/1", "v", "") // A and its 2 go
		}, want: 2},
		{name: "observations", cfg: Config{MaxObservations: 3}, run: func(s *Store) {
			for _, id := range []string{"A", "B", "C", "D"} {
				s.ObservePresent(id, "/1", "v", "")
				s.ObservePresent(id, "/2", "v", "")
			}
		}, want: 5},
		{name: "bytes", cfg: Config{MaxBytes: 8 << 10}, run: func(s *Store) {
			for k := range 200 {
				s.ObservePresent("A", fs.TargetKey(fmt.Sprintf("/file%03d", k)), fs.Version(fmt.Sprint("v", k)), "")
			}
		}},
		{name: "expiry and Forget are not evictions", cfg: Config{TTL: time.Minute, MaxSessions: 2}, run: func(s *Store) {
			s.ObservePresent("A", "/1", "v", "")
			s.ObservePresent("B", "/1", "v", "")
			s.Forget("B")
			now = now.Add(2 * time.Minute) // A expires
			s.ObservePresent("C", "/1", "v", "")
			s.ObservePresent("D", "/1", "v", "")
			s.ObservePresent("E", "/1", "v", "") // C is evicted at the session cap
		}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Now = clock
			s := NewStore(cfg)
			tt.run(s)
			checkInvariants(t, s)
			if tt.name == "bytes" {
				_, held := s.Stats()
				assert.Positive(t, s.Evicted())
				assert.Equal(t, uint64(200-held), s.Evicted(), "every path that is gone was evicted")
				return
			}
			assert.Equal(t, tt.want, s.Evicted())
		})
	}
}
