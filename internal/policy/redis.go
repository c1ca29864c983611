package policy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// DefaultRedisTimeout bounds one call to Redis when RedisStore's Timeout is
// zero: the policy decision of a write waits at most this long (plus the
// client's own retry) before answering SESSION_STORE_UNAVAILABLE.
const DefaultRedisTimeout = 2 * time.Second

// RedisStore is the Gate kept in Redis (docs/deployment.md), so every
// process behind a proxy decides from the same observations and a restarted
// process forgets nothing. It has the memory Store's semantics: idle TTL,
// MaxSessions and MaxPathsPerSession evicting the least recently used,
// MaxObservations in all, and it fails closed.
//
// Each operation is one Lua script, so one round trip and atomic: Redis runs
// a script alone, so concurrent processes never interleave inside a
// decision. Recency is a shared counter (exact LRU order across processes);
// time is the callers' clock in microseconds, so processes on several hosts
// need synchronised clocks (a skew shifts the TTL by that much).
//
// When Redis cannot be reached, every method returns an error wrapping
// ErrUnavailable (decisions: a *fault.Error with fault.CodeSessionStoreUnavailable) and changes
// nothing; the client reconnects on its own. The scripts touch keys they
// compute, so they run on a single Redis, not on Redis Cluster.
type RedisStore struct {
	client      redis.UniversalClient
	prefix      string
	ttl         int64 // microseconds
	maxSessions int
	maxPaths    int
	maxObs      int
	now         func() time.Time
	timeout     time.Duration
}

var _ UseCarrier = (*RedisStore)(nil)

// ErrUnavailable is wrapped by every RedisStore error: the store could not
// be reached or did not answer in time.
var ErrUnavailable = errors.New("session store unavailable")

// RedisOptions are what a RedisStore needs beyond Config.
type RedisOptions struct {
	// Prefix starts every key (default "toolfs:"), so several deployments
	// (or tests) can share one Redis.
	Prefix string
	// Timeout bounds one call (default DefaultRedisTimeout).
	Timeout time.Duration
}

// NewRedisStore returns a RedisStore on client bounded by cfg. It does not
// contact Redis: a store that is down at start-up is used once it is up.
// The caller owns client and closes it.
func NewRedisStore(client redis.UniversalClient, cfg Config, opt RedisOptions) *RedisStore {
	s := &RedisStore{
		client:      client,
		prefix:      opt.Prefix,
		ttl:         positiveOr(cfg.TTL, DefaultTTL).Microseconds(),
		maxSessions: positiveOr(cfg.MaxSessions, DefaultMaxSessions),
		maxPaths:    positiveOr(cfg.MaxPathsPerSession, DefaultMaxPathsPerSession),
		maxObs:      positiveOr(cfg.MaxObservations, DefaultMaxObservations),
		now:         cfg.Now,
		timeout:     positiveOr(opt.Timeout, DefaultRedisTimeout),
	}
	if s.prefix == "" {
		s.prefix = "toolfs:"
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// The script's operations (ARGV[1]).
const (
	opGet     = "get"
	opUseGet  = "useget" // get, and count as use of the session (Touch)
	opPresent = "present"
	opAbsent  = "absent"
	opUnset   = "unset"
	opTouch   = "touch"
	opForget  = "forget"
	opStats   = "stats"
)

// gateScript is every operation of the store. Keys, under the prefix:
// lru (sessions by last use, scored by seq), used (session -> last use in
// microseconds), n (observations in all), seq (the recency counter),
// o:<id> (target digest -> "<version>|<hash>" (seenValue), "" = confirmed
// absent) and r:<id> (target digests by last use). It mirrors Store step
// for step (store.go): a bounded sweep of expired sessions from the idle
// end, then use (creating and evicting when asked), then the operation,
// with the cap on observations.
//
// Freeing comes first (docs/deployment.md, "When Redis is full"): Redis
// refuses a script's first memory-growing command (INCR, ZADD, HSET, ...)
// while over maxmemory, unless the script already wrote. So every script
// makes its deletions (expiry, eviction at the caps, a forget) before
// anything that grows, and a write command only runs when it removes
// something: a full Redis still expires, evicts and forgets, and once that
// freed room the same script records its observation; when nothing could be
// freed, the first growing command fails and the operation changes nothing.
var gateScript = redis.NewScript(`
local P = KEYS[1]
local op, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local maxS, maxP, maxO, batch = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local id, key, ver = ARGV[8], ARGV[9], ARGV[10]
local LRU, USED, N, SEQ = P .. 'lru', P .. 'used', P .. 'n', P .. 'seq'

local function expired(sid)
  local u = redis.call('HGET', USED, sid)
  return (not u) or (now - tonumber(u) > ttl)
end
local function drop(sid)
  local O = P .. 'o:' .. sid
  local n = redis.call('HLEN', O)
  redis.call('DEL', O, P .. 'r:' .. sid)
  redis.call('ZREM', LRU, sid)
  redis.call('HDEL', USED, sid)
  if n > 0 then redis.call('DECRBY', N, n) end
end
local function sweep(limit)
  while limit > 0 do
    local back = redis.call('ZRANGE', LRU, 0, 0)[1]
    if not back or not expired(back) then return end
    drop(back)
    limit = limit - 1
  end
end
-- prepare is the freeing half of a use: it reports whether the session
-- is live, or will be (create), once marked.
local function prepare(sid, create)
  sweep(batch)
  local live = redis.call('ZSCORE', LRU, sid)
  if live and expired(sid) then
    drop(sid)
    live = false
  end
  if not live then
    if not create then return false end
    if redis.call('ZCARD', LRU) >= maxS then drop(redis.call('ZRANGE', LRU, 0, 0)[1]) end
  end
  return true
end
-- mark is the growing half: the session becomes the most recently used.
local function mark(sid)
  redis.call('ZADD', LRU, redis.call('INCR', SEQ), sid)
  local u = tonumber(redis.call('HGET', USED, sid) or '0')
  if now > u then redis.call('HSET', USED, sid, ARGV[2]) end
end
local function removeOldest(sid)
  local R = P .. 'r:' .. sid
  local old = redis.call('ZRANGE', R, 0, 0)[1]
  if not old then return false end
  redis.call('ZREM', R, old)
  redis.call('HDEL', P .. 'o:' .. sid, old)
  redis.call('DECR', N)
  return true
end

if op == 'get' or op == 'useget' then
  if not prepare(id, op == 'useget') then return false end
  mark(id)
  local v = redis.call('HGET', P .. 'o:' .. id, key)
  if not v then return false end
  redis.call('ZADD', P .. 'r:' .. id, redis.call('INCR', SEQ), key)
  return {v}
elseif op == 'touch' then
  prepare(id, true)
  mark(id)
  return 1
elseif op == 'forget' then
  sweep(batch)
  if not redis.call('ZSCORE', LRU, id) then return 0 end
  local gone = expired(id)
  drop(id)
  if gone then return 0 end
  return 1
elseif op == 'stats' then
  sweep(redis.call('ZCARD', LRU))
  return {redis.call('ZCARD', LRU), tonumber(redis.call('GET', N) or '0')}
end

prepare(id, true)
local O, R = P .. 'o:' .. id, P .. 'r:' .. id
local has = redis.call('HEXISTS', O, key) == 1
if op == 'unset' then
  if has then
    redis.call('HDEL', O, key)
    redis.call('ZREM', R, key)
    redis.call('DECR', N)
  end
  mark(id)
  return 1
end
if not has then
  if redis.call('HLEN', O) >= maxP then removeOldest(id) end
  -- The cap on observations, before the new one is added: the victims are
  -- those of the least recently used session once this one is marked the
  -- most recent, so this session itself only when it is the only one.
  local n = tonumber(redis.call('GET', N) or '0')
  while n >= maxO do
    local back = redis.call('ZRANGE', LRU, 0, 1)
    local victim = back[1]
    if victim == id and back[2] then victim = back[2] end
    if not victim then break end
    if removeOldest(victim) then n = n - 1 else drop(victim) end
  end
end
mark(id)
if op == 'absent' then ver = '' end
redis.call('HSET', O, key, ver)
redis.call('ZADD', R, redis.call('INCR', SEQ), key)
if not has then redis.call('INCR', N) end
return 1
`)

// run executes one operation in one round trip.
func (s *RedisStore) run(op, session string, key fs.TargetKey, v fs.Version) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	field := ""
	if key != "" {
		field = digest(key)
	}
	res, err := gateScript.Run(ctx, s.client, []string{s.prefix},
		op, s.now().UnixMicro(), s.ttl, s.maxSessions, s.maxPaths, s.maxObs, sweepBatch,
		session, field, string(v)).Result()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	return res, nil
}

// digestBytes is the length of the digest that stands for a target in
// Redis: 128 bits, so two targets of one session share a field with a
// chance of about 2^-105 even at the 4096-path cap. One that did could
// only refuse, or let through a change to a file that holds exactly the
// bytes the session saw: the provider checks the version, then the bytes'
// hash, under the target's lock.
const digestBytes = 16

// digest is the field that stands for key in Redis: the first digestBytes
// bytes of its SHA-256, binary, so an observation costs the same whatever
// the length of the path (docs/deployment.md, "How much memory").
func digest(key fs.TargetKey) string {
	sum := sha256.Sum256([]byte(key))
	return string(sum[:digestBytes])
}

// lookup returns what the session saw of key, marking both used; op is
// opGet, or opUseGet to also count as the request's use (creating the
// session, as Touch would).
func (s *RedisStore) lookup(op, session string, key fs.TargetKey) (o fs.Observed, seen bool, err error) {
	if session == "" {
		return fs.Observed{}, false, nil
	}
	res, err := s.run(op, session, key, "")
	if err != nil || res == nil {
		return fs.Observed{}, false, err
	}
	arr, ok := res.([]any)
	if !ok || len(arr) != 1 {
		return fs.Observed{}, false, fmt.Errorf("%w: unexpected reply %T", ErrUnavailable, res)
	}
	str, _ := arr[0].(string)
	return parseSeen(str), true, nil
}

// seenValue is how an observation of a present file is stored: the version
// and the content hash joined by "|" (neither contains one; the scripts
// store the value as it is, so they did not change). "" stays confirmed
// absence.
func seenValue(o fs.Observed) fs.Version {
	if o.Version == "" {
		return ""
	}
	return o.Version + "|" + fs.Version(o.Hash)
}

// parseSeen reads a stored observation; a value without "|" (written before
// hashes were kept) is a version with an unknown hash.
func parseSeen(s string) fs.Observed {
	if i := strings.LastIndexByte(s, '|'); i >= 0 {
		return fs.Observed{Version: fs.Version(s[:i]), Hash: fs.Hash(s[i+1:])}
	}
	return fs.Observed{Version: fs.Version(s)}
}

// refusal is the model-facing answer of a write or edit whose decision the
// store could not make: nothing was written.
func refusal(tool string, t fs.Target, err error) error {
	return &fault.Error{
		Code:    fault.CodeSessionStoreUnavailable,
		Message: `cannot ` + tool + ` "` + t.Display + `": the session store is unavailable, nothing was written; retry shortly`,
		Err:     err,
	}
}

// WriteIntent is as Store's; when Redis cannot be reached it returns nil
// and a *fault.Error with fault.CodeSessionStoreUnavailable (never an unconditional intent).
func (s *RedisStore) WriteIntent(session string, t fs.Target) (*fs.WriteIntent, error) {
	return s.writeIntent(opGet, session, t)
}

func (s *RedisStore) writeIntent(op, session string, t fs.Target) (*fs.WriteIntent, error) {
	o, _, err := s.lookup(op, session, t.Key)
	if err != nil {
		return nil, refusal("write", t, err)
	}
	if o.Version != "" {
		return &fs.WriteIntent{Kind: fs.ReplaceIfVersion, Version: o.Version, Hash: o.Hash}, nil
	}
	return &fs.WriteIntent{Kind: fs.CreateIfAbsent}, nil
}

// EditGuard is as Store's; when Redis cannot be reached it returns an
// *fault.Error with fault.CodeSessionStoreUnavailable.
func (s *RedisStore) EditGuard(session string, t fs.Target) (*fs.Observed, error) {
	return s.editGuard(opGet, session, t)
}

func (s *RedisStore) editGuard(op, session string, t fs.Target) (*fs.Observed, error) {
	o, seen, err := s.lookup(op, session, t.Key)
	switch {
	case err != nil:
		return nil, refusal("edit", t, err)
	case !seen:
		return nil, notObserved(t)
	case o.Version == "":
		return nil, confirmedAbsent(t)
	}
	return &o, nil
}

// ObservePresent is as Store's. On error nothing is recorded, which fails
// closed: the session must read again.
func (s *RedisStore) ObservePresent(session string, key fs.TargetKey, v fs.Version, h fs.Hash) error {
	op := opPresent
	if v == "" {
		op = opUnset
	}
	return s.observe(op, session, key, seenValue(fs.Observed{Version: v, Hash: h}))
}

// ObserveAbsent is as Store's.
func (s *RedisStore) ObserveAbsent(session string, key fs.TargetKey) error {
	return s.observe(opAbsent, session, key, "")
}

func (s *RedisStore) observe(op, session string, key fs.TargetKey, v fs.Version) error {
	if session == "" {
		return nil
	}
	_, err := s.run(op, session, key, v)
	return err
}

// Touch is as Store's.
func (s *RedisStore) Touch(session string) error {
	if session == "" {
		return nil
	}
	_, err := s.run(opTouch, session, "", "")
	return err
}

// Using returns a Gate for one request of session whose first operation on
// session carries the request's use of it: a decision runs the script's
// useget (one round trip where Touch and the decision took two), a record
// already counts as use. end touches the session when no operation did (a
// request refused before the policy, or one that consulted no gate). An
// attempt counts even when Redis failed: the request's use is lost, which
// only shortens the session's life (fails closed), never retried.
func (s *RedisStore) Using(session string) (Gate, func() error) {
	u := &redisUse{RedisStore: s, session: session}
	return u, func() error {
		if session == "" || u.carried.Load() {
			return nil
		}
		return s.Touch(session)
	}
}

// redisUse is the Gate of one request (RedisStore.Using).
type redisUse struct {
	*RedisStore
	session string
	carried atomic.Bool // an operation on session carried the request's use
}

// carry reports whether an operation on session must carry the request's
// use, which it does at most once.
func (u *redisUse) carry(session string) bool {
	return session == u.session && session != "" && u.carried.CompareAndSwap(false, true)
}

func (u *redisUse) WriteIntent(session string, t fs.Target) (*fs.WriteIntent, error) {
	if u.carry(session) {
		return u.writeIntent(opUseGet, session, t)
	}
	return u.RedisStore.WriteIntent(session, t)
}

func (u *redisUse) EditGuard(session string, t fs.Target) (*fs.Observed, error) {
	if u.carry(session) {
		return u.editGuard(opUseGet, session, t)
	}
	return u.RedisStore.EditGuard(session, t)
}

// ObservePresent and ObserveAbsent carry the use as they are: a record
// runs use(session, create) in the script.
func (u *redisUse) ObservePresent(session string, key fs.TargetKey, v fs.Version, h fs.Hash) error {
	u.carry(session)
	return u.RedisStore.ObservePresent(session, key, v, h)
}

func (u *redisUse) ObserveAbsent(session string, key fs.TargetKey) error {
	u.carry(session)
	return u.RedisStore.ObserveAbsent(session, key)
}

func (u *redisUse) Touch(session string) error {
	u.carry(session)
	return u.RedisStore.Touch(session)
}

// Forget is as Store's.
func (s *RedisStore) Forget(session string) (bool, error) {
	if session == "" {
		return false, nil
	}
	res, err := s.run(opForget, session, "", "")
	if err != nil {
		return false, err
	}
	n, _ := res.(int64)
	return n == 1, nil
}

// Stats reports the live sessions and observations in Redis (for all
// processes), after removing every expired session; -1, -1 when Redis
// cannot be reached. Call it at metrics-scrape rates.
func (s *RedisStore) Stats() (sessions, observations int) {
	res, err := s.run(opStats, "", "", "")
	arr, ok := res.([]any)
	if err != nil || !ok || len(arr) != 2 {
		return -1, -1
	}
	a, _ := arr[0].(int64)
	b, _ := arr[1].(int64)
	return int(a), int(b)
}

// Ping reports whether Redis answers, within the store's timeout.
func (s *RedisStore) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}
