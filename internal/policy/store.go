package policy

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// The limits a zero Config gets.
const (
	DefaultTTL                = 30 * time.Minute
	DefaultMaxSessions        = 10000
	DefaultMaxPathsPerSession = 4096
	DefaultMaxObservations    = 1 << 20
)

const (
	// sweepBatch bounds how many expired sessions one call removes, so no
	// single request pays for a mass expiry; the rest go on later calls or
	// on access.
	sweepBatch = 16
	// maxShards and minShardSessions size the sharding: only a store big
	// enough that each shard keeps at least minShardSessions sessions (and
	// room for one full session's paths) is split, so small caps stay exact.
	maxShards        = 16
	minShardSessions = 64
)

// Config bounds a Store. A zero or negative field gets its default.
type Config struct {
	TTL                time.Duration    // idle sessions expire (default 30m)
	MaxSessions        int              // LRU cap on sessions (default 10000)
	MaxPathsPerSession int              // LRU cap per session (default 4096)
	MaxObservations    int              // cap on observations across all sessions (default 1<<20)
	Now                func() time.Time // injectable clock; nil = time.Now
}

// Store is the in-memory Gate: per-session observations with LRU and TTL
// bounds. It is safe for concurrent use. Every operation is O(1) (amortized,
// counting expiry) under a short per-shard mutex; no goroutine runs in the
// background, so a Store needs no Close.
//
// Memory is bounded by MaxObservations entries (each about 100 bytes plus
// its key and version strings) and MaxSessions sessions. Evicting an entry
// or a session only ever fails closed: the session must read again.
//
// A large Store is split into up to 16 shards by session id, each with an
// equal share of MaxSessions and MaxObservations and its own LRU order, so
// eviction picks the least recently used session of the new session's shard
// and can begin a little before the total reaches the cap.
type Store struct {
	seed   maphash.Seed
	clock  func() int64 // nanoseconds since the Store was made
	shards []shard
}

var _ Gate = (*Store)(nil)

// shard is an independent part of a Store: its own lock, caps and LRU.
type shard struct {
	ttl             int64 // nanoseconds
	maxSessions     int
	maxPaths        int
	maxObservations int

	mu           sync.Mutex
	sessions     map[string]*session
	recent       recency[session, *session]
	observations int

	_ [64]byte // keeps neighbouring shards' hot fields off one cache line
}

// session is one session's observations, most recently used first.
type session struct {
	id       string
	lastUsed int64 // Store.clock at the last use
	paths    map[fs.TargetKey]*observation
	recent   recency[observation, *observation]
	lk       links[session]
}

func (ss *session) links() *links[session] { return &ss.lk }

// observation is what one session saw of one target.
type observation struct {
	key     fs.TargetKey
	version fs.Version // "" = confirmed absent
	lk      links[observation]
}

func (o *observation) links() *links[observation] { return &o.lk }

// NewStore returns an empty Store bounded by cfg.
func NewStore(cfg Config) *Store {
	ttl := positiveOr(cfg.TTL, DefaultTTL)
	maxSessions := positiveOr(cfg.MaxSessions, DefaultMaxSessions)
	maxPaths := positiveOr(cfg.MaxPathsPerSession, DefaultMaxPathsPerSession)
	maxObservations := positiveOr(cfg.MaxObservations, DefaultMaxObservations)

	n := 1
	for n < maxShards && maxSessions/(2*n) >= minShardSessions && maxObservations/(2*n) >= maxPaths {
		n *= 2
	}
	s := &Store{seed: maphash.MakeSeed(), shards: make([]shard, n)}
	for i := range s.shards {
		s.shards[i] = shard{
			ttl:             int64(ttl),
			maxSessions:     maxSessions / n,
			maxPaths:        maxPaths,
			maxObservations: maxObservations / n,
			sessions:        make(map[string]*session),
		}
	}
	if now := cfg.Now; now != nil {
		epoch := now()
		s.clock = func() int64 { return int64(now().Sub(epoch)) }
	} else {
		// time.Since reads only the monotonic clock: a third cheaper than
		// time.Now, and immune to wall-clock jumps.
		epoch := time.Now()
		s.clock = func() int64 { return int64(time.Since(epoch)) }
	}
	return s
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// lock returns the session's shard, locked, and the time of this use.
// Callers unlock it.
func (s *Store) lock(session string) (*shard, int64) {
	sh := s.shardOf(session)
	now := s.clock()
	sh.mu.Lock()
	return sh, now
}

func (s *Store) shardOf(session string) *shard {
	if len(s.shards) == 1 {
		return &s.shards[0]
	}
	return &s.shards[maphash.String(s.seed, session)&uint64(len(s.shards)-1)]
}

// WriteIntent is ReplaceIfVersion at the version the session last saw
// present, else CreateIfAbsent (unseen, seen absent, or empty session id).
func (s *Store) WriteIntent(session string, t fs.Target) *fs.WriteIntent {
	if v, _ := s.lookup(session, t.Key); v != "" {
		return &fs.WriteIntent{Kind: fs.ReplaceIfVersion, Version: v}
	}
	return &fs.WriteIntent{Kind: fs.CreateIfAbsent}
}

// EditGuard is the version the session last saw present. Unseen (or an empty
// session id) is CodeNotObserved; seen absent is CodeNotFound. It never
// returns nil, nil.
func (s *Store) EditGuard(session string, t fs.Target) (*fs.Version, error) {
	v, seen := s.lookup(session, t.Key)
	switch {
	case !seen:
		return nil, notObserved(t)
	case v == "":
		return nil, confirmedAbsent(t)
	}
	return &v, nil
}

// ObservePresent records that the session saw key at v, replacing what it
// saw before. An empty v is no evidence (a provider bug): the session's
// observation of key is dropped, which fails closed.
func (s *Store) ObservePresent(session string, key fs.TargetKey, v fs.Version) {
	s.observe(session, key, v, v == "")
}

// ObserveAbsent records that the session confirmed key does not exist.
func (s *Store) ObserveAbsent(session string, key fs.TargetKey) {
	s.observe(session, key, "", false)
}

// Touch marks the session used now, creating it if needed, so it expires
// TTL after its last request.
func (s *Store) Touch(session string) {
	if session == "" {
		return
	}
	sh, now := s.lock(session)
	defer sh.mu.Unlock()
	sh.use(session, now, true)
}

// Forget drops the session and reports whether it existed (an expired
// session did not).
func (s *Store) Forget(session string) bool {
	if session == "" {
		return false
	}
	sh, now := s.lock(session)
	defer sh.mu.Unlock()
	sh.sweep(now, sweepBatch)
	ss := sh.sessions[session]
	if ss == nil {
		return false
	}
	sh.drop(ss)
	return !sh.expired(ss, now)
}

// Stats reports the live sessions and the observations they hold. It first
// removes every expired session, so it costs O(expired); call it at
// metrics-scrape rates, not per request.
func (s *Store) Stats() (sessions, observations int) {
	now := s.clock()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(now, len(sh.sessions))
		sessions += len(sh.sessions)
		observations += sh.observations
		sh.mu.Unlock()
	}
	return sessions, observations
}

// lookup returns what the session saw of key, marking both used.
func (s *Store) lookup(session string, key fs.TargetKey) (v fs.Version, seen bool) {
	if session == "" {
		return "", false
	}
	sh, now := s.lock(session)
	defer sh.mu.Unlock()
	ss := sh.use(session, now, false)
	if ss == nil {
		return "", false
	}
	o := ss.paths[key]
	if o == nil {
		return "", false
	}
	ss.recent.moveToFront(o)
	return o.version, true
}

// observe sets the session's observation of key to v ("" = absent), or drops
// it when unset.
func (s *Store) observe(session string, key fs.TargetKey, v fs.Version, unset bool) {
	if session == "" {
		return
	}
	sh, now := s.lock(session)
	defer sh.mu.Unlock()
	ss := sh.use(session, now, true)
	o := ss.paths[key]
	switch {
	case unset:
		if o != nil {
			sh.removePath(ss, o)
		}
		return
	case o != nil:
		if o.version != v {
			o.version = fs.Version(strings.Clone(string(v)))
		}
		ss.recent.moveToFront(o)
		return
	}
	if ss.paths == nil {
		ss.paths = make(map[fs.TargetKey]*observation)
	}
	if len(ss.paths) >= sh.maxPaths {
		o = ss.recent.back
		sh.removePath(ss, o)
	} else {
		o = new(observation)
	}
	// Clone so a long-lived entry never pins a caller's larger buffer.
	*o = observation{key: fs.TargetKey(strings.Clone(string(key))), version: fs.Version(strings.Clone(string(v)))}
	ss.paths[o.key] = o
	ss.recent.pushFront(o)
	sh.observations++
	sh.capObservations()
}

// use returns the live session, marked used at now, creating it if asked
// (evicting the least recently used session at the cap); else nil.
func (sh *shard) use(id string, now int64, create bool) *session {
	sh.sweep(now, sweepBatch)
	ss := sh.sessions[id]
	if ss != nil && sh.expired(ss, now) {
		sh.drop(ss)
		ss = nil
	}
	switch {
	case ss != nil:
		sh.recent.moveToFront(ss)
	case !create:
		return nil
	default:
		if len(sh.sessions) >= sh.maxSessions {
			sh.drop(sh.recent.back)
		}
		ss = &session{id: strings.Clone(id), lastUsed: now}
		sh.sessions[ss.id] = ss
		sh.recent.pushFront(ss)
	}
	// max: concurrent callers read the clock before taking the lock.
	ss.lastUsed = max(ss.lastUsed, now)
	return ss
}

// capObservations evicts the least recently used paths of the least recently
// used sessions until the total is within bounds. The session just used is
// at the front and its newest path survives, since maxObservations >= 1.
func (sh *shard) capObservations() {
	for sh.observations > sh.maxObservations {
		victim := sh.recent.back
		if len(victim.paths) == 0 {
			sh.drop(victim)
			continue
		}
		sh.removePath(victim, victim.recent.back)
	}
}

// sweep drops up to limit expired sessions from the idle end.
func (sh *shard) sweep(now int64, limit int) {
	for ; limit > 0 && sh.recent.back != nil && sh.expired(sh.recent.back, now); limit-- {
		sh.drop(sh.recent.back)
	}
}

func (sh *shard) expired(ss *session, now int64) bool { return now-ss.lastUsed > sh.ttl }

func (sh *shard) drop(ss *session) {
	delete(sh.sessions, ss.id)
	sh.recent.remove(ss)
	sh.observations -= len(ss.paths)
}

func (sh *shard) removePath(ss *session, o *observation) {
	delete(ss.paths, o.key)
	ss.recent.remove(o)
	sh.observations--
}
