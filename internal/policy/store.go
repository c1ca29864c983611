package policy

import (
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
	DefaultMaxObservations    = 1 << 18 // about 56 MB at 215 bytes per entry
)

// sweepBatch bounds how many expired sessions one call removes, so no single
// request pays for a mass expiry; the rest go on later calls or on access.
const sweepBatch = 16

// Config bounds a Store. A zero or negative field gets its default.
// MaxObservations is what actually bounds memory: MaxSessions times
// MaxPathsPerSession would allow 40 million entries. Over it, the least
// recently used session gives up its least recently used path.
type Config struct {
	TTL                time.Duration    // idle sessions expire (default 30m)
	MaxSessions        int              // LRU cap on sessions (default 10000)
	MaxPathsPerSession int              // LRU cap per session (default 4096)
	MaxObservations    int              // cap on (session, path) entries in all (default 1<<18)
	Now                func() time.Time // injectable clock; nil = time.Now
}

// Store is the in-memory Gate: per-session observations with LRU and TTL
// bounds. It is safe for concurrent use. Every operation is O(1) (amortized,
// counting expiry) under one short mutex (sharding by session measured no
// faster); no goroutine runs in the background, so a Store needs no Close.
//
// Memory is bounded by MaxObservations entries (each about 100 bytes plus
// copies of its key and version: 215 bytes for a 50-byte path) and
// MaxSessions sessions. Evicting an entry
// or a session only ever fails closed: the session must read again.
type Store struct {
	ttl             int64 // nanoseconds
	maxSessions     int
	maxPaths        int
	maxObservations int
	clock           func() int64 // nanoseconds since the Store was made

	mu           sync.Mutex
	sessions     map[string]*session
	recent       recency[session, *session]
	observations int
}

var _ Gate = (*Store)(nil)

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
	hash    fs.Hash    // of the bytes seen at version ("" = unknown)
	lk      links[observation]
}

func (o *observation) links() *links[observation] { return &o.lk }

// NewStore returns an empty Store bounded by cfg.
func NewStore(cfg Config) *Store {
	s := &Store{
		ttl:             int64(positiveOr(cfg.TTL, DefaultTTL)),
		maxSessions:     positiveOr(cfg.MaxSessions, DefaultMaxSessions),
		maxPaths:        positiveOr(cfg.MaxPathsPerSession, DefaultMaxPathsPerSession),
		maxObservations: positiveOr(cfg.MaxObservations, DefaultMaxObservations),
		sessions:        make(map[string]*session),
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

// lock takes the mutex and returns the time of this use. The clock is read
// first, to keep it out of the critical section; callers unlock.
func (s *Store) lock() int64 {
	now := s.clock()
	s.mu.Lock()
	return now
}

// WriteIntent is ReplaceIfVersion at the version the session last saw
// present, else CreateIfAbsent (unseen, seen absent, or empty session id).
func (s *Store) WriteIntent(session string, t fs.Target) (*fs.WriteIntent, error) {
	if o, _ := s.lookup(session, t.Key); o.Version != "" {
		return &fs.WriteIntent{Kind: fs.ReplaceIfVersion, Version: o.Version, Hash: o.Hash}, nil
	}
	return &fs.WriteIntent{Kind: fs.CreateIfAbsent}, nil
}

// EditGuard is what the session last saw present (version and hash).
// Unseen (or an empty session id) is CodeNotObserved; seen absent is
// CodeNotFound. It never returns nil, nil.
func (s *Store) EditGuard(session string, t fs.Target) (*fs.Observed, error) {
	o, seen := s.lookup(session, t.Key)
	switch {
	case !seen:
		return nil, notObserved(t)
	case o.Version == "":
		return nil, confirmedAbsent(t)
	}
	return &o, nil
}

// ObservePresent records that the session saw key at v with bytes of hash
// h, replacing what it saw before. An empty v is no evidence (a provider
// bug): the session's observation of key is dropped, which fails closed.
func (s *Store) ObservePresent(session string, key fs.TargetKey, v fs.Version, h fs.Hash) error {
	s.observe(session, key, fs.Observed{Version: v, Hash: h}, v == "")
	return nil
}

// ObserveAbsent records that the session confirmed key does not exist.
func (s *Store) ObserveAbsent(session string, key fs.TargetKey) error {
	s.observe(session, key, fs.Observed{}, false)
	return nil
}

// Touch marks the session used now, creating it if needed, so it expires
// TTL after its last request.
func (s *Store) Touch(session string) error {
	if session == "" {
		return nil
	}
	now := s.lock()
	defer s.mu.Unlock()
	s.use(session, now, true)
	return nil
}

// Forget drops the session and reports whether it existed (an expired
// session did not).
func (s *Store) Forget(session string) (bool, error) {
	if session == "" {
		return false, nil
	}
	now := s.lock()
	defer s.mu.Unlock()
	s.sweep(now, sweepBatch)
	ss := s.sessions[session]
	if ss == nil {
		return false, nil
	}
	s.drop(ss)
	return !s.expired(ss, now), nil
}

// Stats reports the live sessions and the observations they hold. It first
// removes every expired session, so it costs O(expired); call it at
// metrics-scrape rates, not per request.
func (s *Store) Stats() (sessions, observations int) {
	now := s.lock()
	defer s.mu.Unlock()
	s.sweep(now, len(s.sessions))
	return len(s.sessions), s.observations
}

// lookup returns what the session saw of key, marking both used.
func (s *Store) lookup(session string, key fs.TargetKey) (seen fs.Observed, ok bool) {
	if session == "" {
		return fs.Observed{}, false
	}
	now := s.lock()
	defer s.mu.Unlock()
	ss := s.use(session, now, false)
	if ss == nil {
		return fs.Observed{}, false
	}
	o := ss.paths[key]
	if o == nil {
		return fs.Observed{}, false
	}
	ss.recent.moveToFront(o)
	return fs.Observed{Version: o.version, Hash: o.hash}, true
}

// observe sets the session's observation of key to seen (a "" version =
// absent), or drops it when unset.
func (s *Store) observe(session string, key fs.TargetKey, seen fs.Observed, unset bool) {
	v := seen.Version
	if session == "" {
		return
	}
	now := s.lock()
	defer s.mu.Unlock()
	ss := s.use(session, now, true)
	o := ss.paths[key]
	switch {
	case unset:
		if o != nil {
			s.removePath(ss, o)
		}
		return
	case o != nil:
		if o.version != v {
			o.version = fs.Version(strings.Clone(string(v)))
		}
		if o.hash != seen.Hash {
			o.hash = fs.Hash(strings.Clone(string(seen.Hash)))
		}
		ss.recent.moveToFront(o)
		return
	}
	if ss.paths == nil {
		ss.paths = make(map[fs.TargetKey]*observation)
	}
	if len(ss.paths) >= s.maxPaths {
		o = ss.recent.back
		s.removePath(ss, o)
	} else {
		o = new(observation)
	}
	// Clone so a long-lived entry never pins a caller's larger buffer.
	*o = observation{key: fs.TargetKey(strings.Clone(string(key))), version: fs.Version(strings.Clone(string(v))), hash: fs.Hash(strings.Clone(string(seen.Hash)))}
	ss.paths[o.key] = o
	ss.recent.pushFront(o)
	s.observations++
	s.capObservations()
}

// use returns the live session, marked used at now, creating it if asked
// (evicting the least recently used session at the cap); else nil.
func (s *Store) use(id string, now int64, create bool) *session {
	s.sweep(now, sweepBatch)
	ss := s.sessions[id]
	if ss != nil && s.expired(ss, now) {
		s.drop(ss)
		ss = nil
	}
	switch {
	case ss != nil:
		s.recent.moveToFront(ss)
	case !create:
		return nil
	default:
		if len(s.sessions) >= s.maxSessions {
			s.drop(s.recent.back)
		}
		ss = &session{id: strings.Clone(id), lastUsed: now}
		s.sessions[ss.id] = ss
		s.recent.pushFront(ss)
	}
	// max: concurrent callers read the clock before taking the lock.
	ss.lastUsed = max(ss.lastUsed, now)
	return ss
}

// capObservations evicts the least recently used paths of the least recently
// used sessions until the total is within bounds. The session just used is
// at the front and its newest path survives, since maxObservations >= 1.
func (s *Store) capObservations() {
	for s.observations > s.maxObservations {
		victim := s.recent.back
		if len(victim.paths) == 0 {
			s.drop(victim)
			continue
		}
		s.removePath(victim, victim.recent.back)
	}
}

// sweep drops up to limit expired sessions from the idle end.
func (s *Store) sweep(now int64, limit int) {
	for ; limit > 0 && s.recent.back != nil && s.expired(s.recent.back, now); limit-- {
		s.drop(s.recent.back)
	}
}

func (s *Store) expired(ss *session, now int64) bool { return now-ss.lastUsed > s.ttl }

func (s *Store) drop(ss *session) {
	delete(s.sessions, ss.id)
	s.recent.remove(ss)
	s.observations -= len(ss.paths)
}

func (s *Store) removePath(ss *session, o *observation) {
	delete(ss.paths, o.key)
	ss.recent.remove(o)
	s.observations--
}
