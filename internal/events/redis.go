package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisFeed carries a Hub's events on a Redis stream shared by every replica
// (docs/events.md, "Several replicas"). Publish appends (XADD, the stream
// kept within RingEvents and RingBytes); one reader per replica follows the stream (XREAD BLOCK)
// and hands each entry to that replica's subscribers, so every subscriber
// of every replica sees one sequence, with the stream's ids as SSE ids.
// Keys, under the prefix:
//
//	events                the stream: fields t (type), p (path), s (session), d (the JSON),
//	                      n (its number: events:n when it was appended)
//	events:bytes          the bytes of the JSON the stream holds
//	events:n              entries ever appended
//	events:own:<digest>   the version of the last write or edit of a path published
//	                      by any replica ("" while one is announced), for OwnEchoTTL
//	events:watcher        the watcher lease (lease.go)
type redisFeed struct {
	h         *Hub
	client    redis.UniversalClient
	key       string
	ownPrefix string
	prefix    string

	// lost: a publish failed, so the stream misses an event; the next
	// successful publish (or the reader, once Redis answers) appends a
	// reset first, so every subscriber reloads.
	lost atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	readCtx  context.Context
	stopRead context.CancelFunc
	// The reader's own connection (owned by the reader) and its Redis
	// client id, so stopping does not wait out a blocked XREAD: CLIENT
	// UNBLOCK ends it.
	conn     *redis.Conn
	readerID atomic.Int64
}

// warnLimited reports whether a warning about op may be logged now: at
// most one per op every 10 s.
func (h *Hub) warnLimited(op string) bool {
	h.warnMu.Lock()
	defer h.warnMu.Unlock()
	now := time.Now()
	if h.warned == nil {
		h.warned = map[string]time.Time{}
	}
	if last, ok := h.warned[op]; ok && now.Sub(last) < 10*time.Second {
		return false
	}
	h.warned[op] = now
	return true
}

func (h *Hub) log() *slog.Logger {
	if h.cfg.Logger != nil {
		return h.cfg.Logger
	}
	return slog.Default()
}

// Timeouts of the stream's calls: a publish is on a tool call's way, so it
// waits little; the reader blocks for readBlock at a time.
const (
	publishTimeout = 2 * time.Second
	readBlock      = 5 * time.Second
)

func newRedisFeed(h *Hub) *redisFeed {
	prefix := h.cfg.Prefix
	if prefix == "" {
		prefix = "toolfs:"
	}
	st := &redisFeed{h: h, client: h.cfg.Redis, prefix: prefix, key: prefix + "events", ownPrefix: prefix + "events:own:", done: make(chan struct{})}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	st.readCtx, st.stopRead = context.WithCancel(st.ctx)
	go st.read()
	return st
}

func (st *redisFeed) stop() {
	st.once.Do(func() {
		st.cancel()
		st.stopReader()
	})
}

// stopReader ends the reader and waits for it: a read blocked in Redis is
// unblocked (again, should the reader have been about to block).
func (st *redisFeed) stopReader() {
	st.stopRead()
	for range readBlock / (100 * time.Millisecond) {
		if id := st.readerID.Load(); id != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			st.client.ClientUnblock(ctx, id)
			cancel()
		}
		select {
		case <-st.done:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	<-st.done
}

// reader is what the reader reads through: its own connection when the
// client can give one (a *redis.Client), else the client, whose blocked
// read then ends by itself within readBlock.
func (st *redisFeed) reader() redis.Cmdable {
	c, ok := st.client.(interface{ Conn() *redis.Conn })
	if !ok {
		return st.client
	}
	if st.conn == nil {
		conn := c.Conn()
		id, err := conn.ClientID(st.readCtx).Result()
		if err != nil {
			conn.Close()
			return st.client
		}
		st.conn = conn
		st.readerID.Store(id)
	}
	return st.conn
}

// dropConn forgets the reader's connection after a failure: the next read
// dials a new one.
func (st *redisFeed) dropConn() {
	if st.conn != nil {
		st.readerID.Store(0)
		st.conn.Close()
		st.conn = nil
	}
}

// publishScript appends entries to the stream and keeps it within
// RingEvents entries and RingBytes of event JSON, as the memory ring: it
// frees first (the oldest entries, so a Redis at maxmemory with noeviction
// still takes an event that replaces others, docs/deployment.md), then
// appends, then, for a write or edit, records its path's version for the
// replica that watches. Each entry is numbered (n), so a reader that fell
// more than the stream's length behind, or a Redis that restarted empty,
// shows as a gap. KEYS: the stream, its byte count, its counter. ARGV: max
// entries, max bytes, the own-echo key ("" for none), version and TTL in
// ms, then per entry its type, path, session, owner and JSON.
var publishScript = redis.NewScript(`
local key, bytesKey, numKey = KEYS[1], KEYS[2], KEYS[3]
local maxlen, maxbytes = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = (#ARGV - 5) / 5
local add = 0
for i = 0, n - 1 do add = add + #ARGV[10 + 5 * i] end
local len = redis.call('XLEN', key)
local total = 0
if len == 0 then redis.call('DEL', bytesKey) else total = tonumber(redis.call('GET', bytesKey) or '0') end
local function over() return len > 0 and (len + n > maxlen or total + add > maxbytes) end
if over() then
  local keep, from = nil, '-'
  while over() and not keep do
    local batch = redis.call('XRANGE', key, from, '+', 'COUNT', 8)
    if #batch == 0 then break end
    for _, e in ipairs(batch) do
      if not over() then keep = e[1]; break end
      local f, size = e[2], 0
      for j = 1, #f, 2 do if f[j] == 'd' then size = #f[j + 1] end end
      total, len, from = total - size, len - 1, '(' .. e[1]
    end
  end
  if keep then redis.call('XTRIM', key, 'MINID', keep) else redis.call('XTRIM', key, 'MAXLEN', 0) end
  redis.call('SET', bytesKey, math.max(total, 0))
end
for i = 0, n - 1 do
  local b = 6 + 5 * i
  redis.call('XADD', key, '*', 't', ARGV[b], 'p', ARGV[b + 1], 's', ARGV[b + 2], 'o', ARGV[b + 3], 'd', ARGV[b + 4], 'n', redis.call('INCR', numKey))
end
redis.call('INCRBY', bytesKey, add)
if ARGV[3] ~= '' then redis.call('SET', ARGV[3], ARGV[4], 'PX', ARGV[5]) end
return 1
`)

// publish appends one event (after a reset, when an earlier one was lost)
// and, for a write or edit, records its path's version for the replica
// that watches: one round trip. A failure is logged and counted, and makes
// the next append a reset.
func (st *redisFeed) publish(e Event, data []byte) {
	lost := st.lost.Load()
	var entries []any
	if lost {
		entries = append(entries, string(TypeReset), "", "", "", resetData)
	}
	entries = append(entries, string(e.Type), e.Path, e.Session, ownerOf(e.Subject), data)
	own, version := "", ""
	if e.Type.isOwn() {
		own, version = st.ownKey(e.Path), e.ownVersion()
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	if err := st.append(ctx, own, version, entries); err != nil {
		st.lost.Store(true)
		st.failed("publish", err)
		return
	}
	if lost {
		st.lost.CompareAndSwap(true, false)
	}
}

func (st *redisFeed) append(ctx context.Context, own, version string, entries []any) error {
	args := append([]any{st.h.cfg.RingEvents, st.h.cfg.RingBytes, own, version, st.h.cfg.OwnEchoTTL.Milliseconds()}, entries...)
	return publishScript.Run(ctx, st.client, []string{st.key, st.key + ":bytes", st.key + ":n"}, args...).Err()
}

// repair appends the reset a lost publish owes, if it still does.
func (st *redisFeed) repair() {
	if !st.lost.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(st.ctx, publishTimeout)
	defer cancel()
	if err := st.append(ctx, "", "", []any{string(TypeReset), "", "", "", resetData}); err == nil {
		st.lost.CompareAndSwap(true, false)
	}
}

// ownKey is a path's key: a fixed-size digest, whatever the path's length.
func (st *redisFeed) ownKey(path string) string {
	sum := sha256.Sum256([]byte(path))
	return st.ownPrefix + hex.EncodeToString(sum[:16])
}

// expect announces a write or edit of path before it runs (Hub.Expect).
func (st *redisFeed) expect(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	if err := st.client.Set(ctx, st.ownKey(path), "", st.h.cfg.OwnEchoTTL).Err(); err != nil {
		st.failed("expect", err)
	}
}

// ownVersion is the version of the last write or edit of path published
// by any replica ("" when one is announced), and whether there was one
// within OwnEchoTTL. Without Redis there was none: the change is reported.
func (st *redisFeed) ownVersion(path string) (string, bool) {
	ctx, cancel := context.WithTimeout(st.ctx, publishTimeout)
	defer cancel()
	v, err := st.client.Get(ctx, st.ownKey(path)).Result()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			st.failed("echo", err)
		}
		return "", false
	}
	return v, true
}

// tailScript answers, in one atomic call, where the stream stands
// (last-generated-id, recorded-first-entry-id, entries-added, length, the
// last entry's number; "0-0", "0-0", 0, 0, 0 when it does not exist) and,
// with ARGV[3] = "1", its entries after ARGV[1] up to ARGV[2], at most
// ARGV[4].
var tailScript = redis.NewScript(`
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then return {'0-0', '0-0', 0, 0, {}, 0} end
local info = redis.call('XINFO', 'STREAM', key)
local m = {}
for i = 1, #info, 2 do m[info[i]] = info[i + 1] end
local out = {m['last-generated-id'], m['recorded-first-entry-id'], m['entries-added'], m['length'], {},
  tonumber(redis.call('GET', KEYS[2]) or '0')}
if ARGV[3] == '1' then
  out[5] = redis.call('XRANGE', key, '(' .. ARGV[1], ARGV[2], 'COUNT', ARGV[4])
end
return out
`)

// where is where the stream stands.
type where struct {
	last, first   position
	added, length int64
	n             uint64 // the last entry's number
}

func (st *redisFeed) tail(ctx context.Context, after, upTo position, entries bool, limit int) (where, []*record, error) {
	flag := "0"
	if entries {
		flag = "1"
	}
	res, err := tailScript.Run(ctx, st.client, []string{st.key, st.key + ":n"}, after.String(), upTo.String(), flag, limit).Slice()
	if err != nil {
		return where{}, nil, err
	}
	if len(res) != 6 {
		return where{}, nil, errors.New("events: unexpected answer from Redis")
	}
	var w where
	var ok1, ok2 bool
	w.last, ok1 = parsePosition(redisString(res[0]))
	w.first, ok2 = parsePosition(redisString(res[1]))
	w.added, _ = res[2].(int64)
	w.length, _ = res[3].(int64)
	n, _ := res[5].(int64)
	w.n = uint64(n)
	if !ok1 || !ok2 {
		return where{}, nil, errors.New("events: unexpected stream ids from Redis")
	}
	var recs []*record
	list, _ := res[4].([]any)
	for _, e := range list {
		if r, ok := recordOfRaw(e); ok {
			recs = append(recs, r)
		}
	}
	return w, recs, nil
}

// since is a resume on this replica from lastEventID, when its reader has
// handed out everything up to tail: the backlog after lastEventID (to
// tail), or skip when the client is ahead of this replica's reader, or
// reset when the stream cannot account for every event after it (an
// unknown id; one from before the stream's first entry, trimmed since; or
// Redis cannot be asked).
func (st *redisFeed) since(lastEventID string, tail position, reading bool, f Filter) (backlog []*record, skip position, reset bool) {
	x, ok := parsePosition(lastEventID)
	if !ok || !reading {
		return nil, position{}, true
	}
	limit := st.h.cfg.RingEvents + 1
	ctx, cancel := context.WithTimeout(st.ctx, publishTimeout)
	defer cancel()
	w, recs, err := st.tail(ctx, x, tail, x.less(tail), limit)
	switch {
	case err != nil:
		st.failed("resume", err)
		return nil, position{}, true
	case w.last.less(x):
		return nil, position{}, true // not an id of this stream
	case w.added > w.length && x.less(w.first):
		return nil, position{}, true // entries after it were trimmed
	case !x.less(tail):
		return nil, x, false // this replica's reader will hand them out; the client has them
	case len(recs) >= limit:
		return nil, position{}, true
	}
	var bytes int64
	for _, r := range recs {
		bytes += int64(len(r.data))
		if bytes > st.h.cfg.RingBytes {
			return nil, position{}, true
		}
		if f.matches(r) {
			backlog = append(backlog, r)
		}
	}
	return backlog, position{}, false
}

// read is the replica's reader: it learns where the stream ends, then
// hands every new entry to the hub's subscribers, in the stream's order.
// When the entries' numbers show a gap (this reader fell more than the
// stream's length behind, or Redis restarted empty) it drops every
// subscriber with a reset: they reconnect and resume, or reload.
func (st *redisFeed) read() {
	defer close(st.done)
	defer st.dropConn()
	backoff := newBackoff()
	var pos position
	var last uint64 // the number of the entry at pos
	for {
		w, _, err := st.tail(st.readCtx, position{}, position{}, false, 0)
		if err == nil {
			pos, last = w.last, w.n
			break
		}
		if st.readCtx.Err() != nil {
			return
		}
		st.failed("read", err)
		if !backoff.wait(st.readCtx) {
			return
		}
	}
	st.h.started(pos)
	backoff.reset()
	broken := false
	for {
		res, err := st.reader().XRead(st.readCtx, &redis.XReadArgs{Streams: []string{st.key, pos.String()}, Count: 256, Block: readBlock}).Result()
		if st.readCtx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			st.dropConn()
			if !broken {
				st.failed("read", err)
			}
			broken = true
			if !backoff.wait(st.readCtx) {
				return
			}
			continue
		}
		if broken {
			broken = false
			backoff.reset()
		}
		for _, s := range res {
			for _, m := range s.Messages {
				r, ok := recordOf(m)
				if !ok {
					continue
				}
				n, _ := strconv.ParseUint(redisString(m.Values["n"]), 10, 64)
				if n != last+1 {
					st.h.obs.gap()
					st.h.dropAll()
				}
				pos, last = r.pos, n
				st.h.deliver(r)
			}
		}
		st.repair()
	}
}

// failed counts one failed Redis call of the feed, and logs it unless the
// same operation was logged within the last 10 s (an outage fails every
// call).
func (st *redisFeed) failed(op string, err error) {
	st.h.obs.redisError(op)
	if st.h.warnLimited(op) {
		st.h.log().Warn("events: Redis call failed", "op", op, "err", err)
	}
}

// started records where this replica's reader begins.
func (h *Hub) started(pos position) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tail, h.tailID, h.reading = pos, pos.String(), true
}

// deliver hands one entry of the stream to the subscribers.
func (h *Hub) deliver(r *record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.tail, h.tailID = r.pos, r.id
	h.fanOut(r)
}

// dropAll ends every subscription with a reset.
func (h *Hub) dropAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		h.drop(s)
	}
}

// position is a stream entry id: milliseconds and a sequence number.
type position struct{ ms, seq uint64 }

func (p position) less(q position) bool { return p.ms < q.ms || p.ms == q.ms && p.seq < q.seq }

func (p position) String() string {
	return strconv.FormatUint(p.ms, 10) + "-" + strconv.FormatUint(p.seq, 10)
}

// minStreamMillis: a stream id's time is Redis's clock in milliseconds, so
// after 2001; smaller numbers are not ids of ours (a memory hub's
// "<8 hex digits>-<n>" can look like one).
const minStreamMillis = 1_000_000_000_000

// parsePosition parses a stream id ("0-0" included, the id of an empty
// stream).
func parsePosition(s string) (position, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return position{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	p := position{ms, seq}
	if err1 != nil || err2 != nil || ms < minStreamMillis && p != (position{}) {
		return position{}, false
	}
	return p, true
}

// recordOf turns a stream entry into a record.
func recordOf(m redis.XMessage) (*record, bool) {
	pos, ok := parsePosition(m.ID)
	if !ok {
		return nil, false
	}
	d := redisString(m.Values["d"])
	if d == "" {
		return nil, false
	}
	return &record{id: m.ID, pos: pos, typ: Type(redisString(m.Values["t"])), path: redisString(m.Values["p"]), session: redisString(m.Values["s"]), owner: redisString(m.Values["o"]), data: []byte(d)}, true
}

// recordOfRaw turns an entry as a script returns it ({id, {field, value,
// ...}}) into a record.
func recordOfRaw(v any) (*record, bool) {
	e, _ := v.([]any)
	if len(e) != 2 {
		return nil, false
	}
	fields, _ := e[1].([]any)
	m := redis.XMessage{ID: redisString(e[0]), Values: map[string]any{}}
	for i := 0; i+1 < len(fields); i += 2 {
		m.Values[redisString(fields[i])] = fields[i+1]
	}
	return recordOf(m)
}

func redisString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// backoff waits 100 ms, doubling up to 2 s, between failed Redis calls.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 100 * time.Millisecond} }

func (b *backoff) reset() { b.d = 100 * time.Millisecond }

// wait sleeps the current delay; false when ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.d)
	defer t.Stop()
	b.d = min(2*b.d, 2*time.Second)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
