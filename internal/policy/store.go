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
	DefaultMaxObservations    = 1 << 18
	DefaultMaxBytes           = 32 << 20
)

// sweepBatch bounds how many expired sessions one call removes, so no single
// request pays for a mass expiry; the rest go on later calls or on access.
const sweepBatch = 16

// Config bounds a Store. A zero or negative field gets its default.
// MaxSessions times MaxPathsPerSession would allow 40 million entries, so
// MaxObservations and MaxBytes bound the total. Over either, the least
// recently used session gives up its least recently used path.
type Config struct {
	TTL                time.Duration    // idle sessions expire (default 30m)
	MaxSessions        int              // LRU cap on sessions (default 10000)
	MaxPathsPerSession int              // LRU cap per session (default 4096)
	MaxObservations    int              // cap on (session, path) entries in all (default 1<<18)
	MaxBytes           int64            // cap on the memory Store's heap, as Store.Bytes counts it (default 32 MiB); Redis holds its own data, so the RedisStore ignores it
	Now                func() time.Time // injectable clock; nil = time.Now
}

// Store is the in-memory Gate: per-session observations with LRU and TTL
// bounds. It is safe for concurrent use. Every operation is O(1) (amortized,
// counting expiry and the release of a dropped session's entries) under one
// short mutex (sharding by session measured no faster); no goroutine runs
// in the background, so a Store needs no Close.
//
// Memory is bounded by MaxBytes of heap as Bytes counts it, an upper
// estimate of what the Store holds (TestStoreBytesCoverHeap). A path's key
// is kept once however many sessions saw it, and a version with its hash
// once while the sessions that saw it last hold it, so an entry of a path
// that others saw at the same version costs 64 bytes. Evicting an entry or
// a session only ever fails closed: the session must read again.
type Store struct {
	ttl             int64 // nanoseconds
	maxSessions     int
	maxPaths        int
	maxObservations int
	maxBytes        int64
	clock           func() int64 // nanoseconds since the Store was made

	mu           sync.Mutex
	sessions     map[string]*session
	recent       recency[session, *session]
	observations int
	paths        map[fs.TargetKey]*path // every key some session holds
	pathsPeak    int                    // len(paths) at most since paths was made
	bytes        int64
	evicted      uint64 // observations the bounds removed (not expiry, not Forget)
}

var _ Gate = (*Store)(nil)

// What the Store counts against MaxBytes: upper estimates of the heap each
// piece takes, allocation rounding included (strBytes).
const (
	observationBytes = 24  // the observation
	sessionSlotBytes = 40  // a slot of a session's map (16 bytes and a control byte, at the lowest load, 7/16)
	pathSlotBytes    = 64  // a slot of Store.paths (24 bytes and a control byte)
	sightBytes       = 32  // the sight, besides its string
	pathBytes        = 32  // the path, besides its key
	sessionBytes     = 352 // the session, its map's header and first group, its slot in Store.sessions
)

// strBytes is the heap a string of n bytes takes: its allocation, rounded
// up to Go's size classes (at most an eighth plus 16 bytes) or pages.
func strBytes(n int) int64 {
	if n == 0 {
		return 0
	}
	if n > 32<<10 {
		return int64(n+8191) &^ 8191
	}
	return int64(n + n/8 + 16)
}

// session is one session's observations, most recently used first.
type session struct {
	id       string
	lastUsed int64 // Store.clock at the last use
	paths    map[*path]*observation
	peak     int // len(paths) at most since paths was made
	recent   recency[observation, *observation]
	lk       links[session]
}

func (ss *session) links() *links[session] { return &ss.lk }

// observation is what one session saw of one path: one of the path's
// sights.
type observation struct {
	seen *sight
	lk   links[observation]
}

func (o *observation) links() *links[observation] { return &o.lk }

// path is one target key, kept once for every session that holds it.
type path struct {
	key  fs.TargetKey
	refs int32  // sights of this path
	last *sight // the sight most recently recorded, shared by later equal observations
}

// sight is a version of a path and the hash of its bytes, kept once for
// the observations that share it. seen is the version followed by the
// hash; a version of "" is confirmed absence.
type sight struct {
	path  *path
	seen  string
	split int32 // len(version)
	refs  int32 // observations of this sight
}

func (g *sight) observed() fs.Observed {
	return fs.Observed{Version: fs.Version(g.seen[:g.split]), Hash: fs.Hash(g.seen[g.split:])}
}

func (g *sight) is(o fs.Observed) bool {
	return int(g.split) == len(o.Version) && g.seen[:g.split] == string(o.Version) && g.seen[g.split:] == string(o.Hash)
}

// NewStore returns an empty Store bounded by cfg.
func NewStore(cfg Config) *Store {
	s := &Store{
		ttl:             int64(positiveOr(cfg.TTL, DefaultTTL)),
		maxSessions:     positiveOr(cfg.MaxSessions, DefaultMaxSessions),
		maxPaths:        positiveOr(cfg.MaxPathsPerSession, DefaultMaxPathsPerSession),
		maxObservations: positiveOr(cfg.MaxObservations, DefaultMaxObservations),
		maxBytes:        positiveOr(cfg.MaxBytes, DefaultMaxBytes),
		sessions:        make(map[string]*session),
		paths:           make(map[fs.TargetKey]*path),
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

func positiveOr[T int | int64 | time.Duration](v, def T) T {
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

// Evicted counts the observations the bounds (MaxSessions,
// MaxPathsPerSession, MaxObservations, MaxBytes) have removed since the
// Store was made; each makes its session read that path again before a
// write or an edit. Expiry and Forget are not counted.
func (s *Store) Evicted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}

// Bytes is the heap the Store counts against MaxBytes now: at most
// MaxBytes, unless the one observation just recorded is larger alone.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
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
	p := s.paths[key]
	if p == nil {
		return fs.Observed{}, false
	}
	o := ss.paths[p]
	if o == nil {
		return fs.Observed{}, false
	}
	ss.recent.moveToFront(o)
	return o.seen.observed(), true
}

// observe sets the session's observation of key to seen (a "" version =
// absent), or drops it when unset.
func (s *Store) observe(session string, key fs.TargetKey, seen fs.Observed, unset bool) {
	if session == "" {
		return
	}
	now := s.lock()
	defer s.mu.Unlock()
	ss := s.use(session, now, true)
	p := s.paths[key]
	var o *observation
	if p != nil {
		o = ss.paths[p]
	}
	switch {
	case unset:
		if o != nil {
			s.removePath(ss, o)
		}
		return
	case o != nil:
		if !o.seen.is(seen) {
			old := o.seen
			o.seen = s.sightOf(p, seen)
			s.release(old)
		}
		ss.recent.moveToFront(o)
		return
	}
	if len(ss.paths) >= s.maxPaths {
		o = ss.recent.back // reused
		s.removePath(ss, o)
		s.evicted++
	} else {
		o = new(observation)
	}
	s.bytes += observationBytes
	if p == nil {
		p = s.newPath(key)
	}
	*o = observation{seen: s.sightOf(p, seen)}
	if ss.paths == nil {
		ss.paths = make(map[*path]*observation)
	}
	ss.paths[p] = o
	if n := len(ss.paths); n > ss.peak {
		s.bytes += int64(n-ss.peak) * sessionSlotBytes
		ss.peak = n
	}
	ss.recent.pushFront(o)
	s.observations++
	s.capObservations()
}

// newPath keeps key, cloned so a long-lived entry never pins a caller's
// larger buffer.
func (s *Store) newPath(key fs.TargetKey) *path {
	p := &path{key: fs.TargetKey(strings.Clone(string(key)))}
	s.paths[p.key] = p
	s.bytes += pathBytes + strBytes(len(key))
	if n := len(s.paths); n > s.pathsPeak {
		s.bytes += int64(n-s.pathsPeak) * pathSlotBytes
		s.pathsPeak = n
	}
	return p
}

// sightOf returns p's sight of seen with one more reference: the path's
// last sight when it is the same, else a new one, which becomes the last.
func (s *Store) sightOf(p *path, seen fs.Observed) *sight {
	if g := p.last; g != nil && g.is(seen) {
		g.refs++
		return g
	}
	// A fresh copy, so a long-lived entry never pins a caller's buffer.
	var b strings.Builder
	b.Grow(len(seen.Version) + len(seen.Hash))
	b.WriteString(string(seen.Version))
	b.WriteString(string(seen.Hash))
	g := &sight{path: p, seen: b.String(), split: int32(len(seen.Version)), refs: 1}
	s.bytes += sightBytes + strBytes(len(g.seen))
	p.refs++
	p.last = g
	return g
}

// release drops a reference to g, and forgets g and then its path when
// nothing refers to them.
func (s *Store) release(g *sight) {
	if g.refs--; g.refs > 0 {
		return
	}
	s.bytes -= sightBytes + strBytes(len(g.seen))
	p := g.path
	if p.last == g {
		p.last = nil
	}
	if p.refs--; p.refs > 0 {
		return
	}
	delete(s.paths, p.key)
	s.bytes -= pathBytes + strBytes(len(p.key))
	if n := len(s.paths); s.pathsPeak > smallMap && n <= s.pathsPeak/2 {
		s.bytes -= int64(s.pathsPeak-n) * pathSlotBytes
		s.paths, s.pathsPeak = shrink(s.paths), n
	}
}

// smallMap is the length up to which a map is one group of slots, never
// worth copying.
const smallMap = 8

// shrink copies m into a map of its size. Go maps keep their slots when
// entries are deleted, so a map that fell to half its peak is copied (O(1)
// amortized over the deletions), or it would hold its peak's memory.
func shrink[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
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
			back := s.recent.back
			if !s.expired(back, now) {
				s.evicted += uint64(len(back.paths))
			}
			s.drop(back)
		}
		ss = &session{id: strings.Clone(id), lastUsed: now}
		s.sessions[ss.id] = ss
		s.recent.pushFront(ss)
		s.bytes += sessionBytes + strBytes(len(id))
		s.capObservations()
	}
	// max: concurrent callers read the clock before taking the lock.
	ss.lastUsed = max(ss.lastUsed, now)
	return ss
}

// capObservations evicts the least recently used paths of the least recently
// used sessions until the total is within bounds. The session just used is
// at the front and keeps its newest path, whatever its size.
func (s *Store) capObservations() {
	for s.observations > s.maxObservations || s.bytes > s.maxBytes {
		victim := s.recent.back
		switch {
		case victim == s.recent.front && len(victim.paths) <= 1:
			return
		case len(victim.paths) == 0:
			s.drop(victim)
		default:
			s.removePath(victim, victim.recent.back)
			s.evicted++
		}
	}
}

// sweep drops up to limit expired sessions from the idle end.
func (s *Store) sweep(now int64, limit int) {
	for ; limit > 0 && s.recent.back != nil && s.expired(s.recent.back, now); limit-- {
		s.drop(s.recent.back)
	}
}

func (s *Store) expired(ss *session, now int64) bool { return now-ss.lastUsed > s.ttl }

// drop forgets the session, releasing each of its observations.
func (s *Store) drop(ss *session) {
	delete(s.sessions, ss.id)
	s.recent.remove(ss)
	for o := ss.recent.front; o != nil; o = o.lk.next {
		s.release(o.seen)
	}
	s.observations -= len(ss.paths)
	s.bytes -= sessionBytes + strBytes(len(ss.id)) + int64(len(ss.paths))*observationBytes + int64(ss.peak)*sessionSlotBytes
}

func (s *Store) removePath(ss *session, o *observation) {
	delete(ss.paths, o.seen.path)
	ss.recent.remove(o)
	s.observations--
	s.release(o.seen)
	s.bytes -= observationBytes
	if n := len(ss.paths); ss.peak > smallMap && n <= ss.peak/2 {
		s.bytes -= int64(ss.peak-n) * sessionSlotBytes
		ss.paths, ss.peak = shrink(ss.paths), n
	}
}
