package events

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config bounds a Hub. Zero fields take the defaults in brackets
// (docs/events.md, "Bounds").
type Config struct {
	RingEvents     int           // events kept for Last-Event-ID resume [1024]
	RingBytes      int64         // encoded bytes kept for resume [16 MiB]
	MaxEventBytes  int           // an event's JSON above this loses its diffs [1 MiB]
	MaxSubscribers int           // streams open at once; more get ErrTooManySubscribers [64]
	QueueEvents    int           // events queued for one subscriber before it is dropped [256]
	QueueBytes     int64         // bytes queued for one subscriber before it is dropped [4 MiB]
	Heartbeat      time.Duration // comment line sent on an idle stream [15s]
	WriteTimeout   time.Duration // one write to a subscriber must finish within this [30s]
	OwnEchoes      int           // own mutations remembered to suppress their inotify echo [4096]
	OwnEchoTTL     time.Duration // how long one is remembered [10s]
	Metrics        *Metrics      // nil: no metrics

	// Redis, when set, carries the feed on a Redis stream shared by every
	// replica with the same Redis and Prefix (docs/events.md, "Several
	// replicas"): each replica appends its events and reads everyone's,
	// in one order, with the stream's ids; RingEvents and RingBytes bound
	// the stream as they bound the ring. nil: in this process.
	Redis redis.UniversalClient
	// Prefix starts every Redis key (the session store's
	// --session-key-prefix; default "toolfs:").
	Prefix string
	// Logger is told of Redis failures (nil: slog.Default()).
	Logger *slog.Logger
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.RingEvents, 1024)
	def(&c.MaxEventBytes, 1<<20)
	def(&c.MaxSubscribers, DefaultMaxSubscribers)
	def(&c.QueueEvents, 256)
	def(&c.OwnEchoes, 4096)
	if c.RingBytes <= 0 {
		c.RingBytes = 16 << 20
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = 4 << 20
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.OwnEchoTTL <= 0 {
		c.OwnEchoTTL = 10 * time.Second
	}
}

// ErrTooManySubscribers is Subscribe's answer past Config.MaxSubscribers
// (answered as fault.CodeTooManySubscribers).
var ErrTooManySubscribers = errors.New("too many event subscribers")

// record is a published event: immutable once in the ring, shared by every
// subscriber queue that holds it.
type record struct {
	id      string   // the SSE id
	seq     uint64   // in memory: its place in the ring
	pos     position // with Redis: its place in the stream
	typ     Type
	path    string
	session string
	owner   string // ownerOf the event's subject
	data    []byte
}

// Hub is the ring of recent events and the set of live subscriptions. Publish
// never blocks on a subscriber: one whose queue is full is dropped. Hub is
// safe for concurrent use.
type Hub struct {
	cfg   Config
	epoch string // distinguishes this process's ids from another's
	obs   observer

	mu     sync.Mutex
	seq    uint64    // last id given out
	ring   []*record // circular, cfg.RingEvents slots
	head   int       // index of the oldest record
	n      int       // records held
	bytes  int64     // their encoded size
	subs   map[*Subscription]struct{}
	closed bool
	own    ownEchoes

	// With Redis: the stream, and the last record this replica's reader
	// handed to the subscribers (guarded by mu).
	shared  *redisFeed
	tail    position
	tailID  string
	reading bool // the reader knows where the stream ends

	warnMu sync.Mutex
	warned map[string]time.Time // by operation: the last Redis failure logged
}

// NewHub returns an empty hub. Its ids start afresh: a Last-Event-ID from
// another process (or before a restart) gets a reset.
func NewHub(cfg Config) *Hub {
	cfg.defaults()
	var b [4]byte
	_, _ = rand.Read(b[:])
	h := &Hub{
		cfg:   cfg,
		obs:   observer{cfg.Metrics},
		epoch: hex.EncodeToString(b[:]),
		subs:  map[*Subscription]struct{}{},
	}
	if cfg.Redis != nil {
		h.tailID = position{}.String()
		h.shared = newRedisFeed(h)
		return h
	}
	h.ring = make([]*record, cfg.RingEvents)
	h.own = newOwnEchoes(cfg.OwnEchoes, cfg.OwnEchoTTL)
	return h
}

// Publish adds e to the ring and to the queue of every subscriber whose
// filter matches. It never waits for a subscriber. A write or edit is also
// remembered (path and version) so the Watcher does not report its inotify
// echo as an external change.
//
// With Redis the event goes to the stream (and a mutation's path and
// version with it), and reaches this replica's subscribers, as every other
// replica's, through the stream's reader.
func (h *Hub) Publish(e Event) {
	data := e.encode(h.cfg.MaxEventBytes)
	if h.shared != nil {
		if !h.isClosed() {
			h.shared.publish(e, data)
			h.obs.published(e.Type)
		}
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.seq++
	r := &record{id: h.id(h.seq), seq: h.seq, typ: e.Type, path: e.Path, session: e.Session, owner: ownerOf(e.Subject), data: data}
	if e.Type.isOwn() {
		h.own.add(e.Path, e.ownVersion(), time.Now())
	}
	h.keep(r)
	h.fanOut(r)
	h.obs.published(e.Type)
}

// fanOut offers r to every subscriber whose filter matches, dropping those
// that cannot keep up. Called with h.mu held.
func (h *Hub) fanOut(r *record) {
	for s := range h.subs {
		if !s.filter.matches(r) {
			continue
		}
		if !s.offer(r) {
			h.drop(s)
		}
	}
}

func (h *Hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// keep puts r in the ring, evicting the oldest records past either bound.
func (h *Hub) keep(r *record) {
	size := int64(len(r.data))
	for h.n > 0 && (h.n == len(h.ring) || h.bytes+size > h.cfg.RingBytes) {
		old := h.ring[h.head]
		h.ring[h.head] = nil
		h.bytes -= int64(len(old.data))
		h.head = (h.head + 1) % len(h.ring)
		h.n--
	}
	h.ring[(h.head+h.n)%len(h.ring)] = r
	h.n++
	h.bytes += size
}

// drop ends a subscription that cannot keep up: its stream sends a reset
// (reload, then continue from the latest id) and ends.
func (h *Hub) drop(s *Subscription) {
	delete(h.subs, s)
	close(s.dropped)
	h.obs.dropped()
	h.obs.subscribed(len(h.subs))
}

// Close ends every subscription (their streams end without a reset) and
// makes Publish a no-op. Use it on shutdown: open streams would otherwise
// hold the server's graceful drain until its grace runs out.
func (h *Hub) Close() {
	if h.shared != nil {
		defer h.shared.stop()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.closed)
	}
	h.obs.subscribed(0)
}

// Expect notes that a write or edit of path (relative to the root) is about
// to run through the tools. Until its mutation is published, or the note
// expires (OwnEchoTTL), the Watcher holds changes of path back instead of
// reporting them as external: the inotify echo of a rename can arrive
// before the call that made it has published its event.
func (h *Hub) Expect(path string) {
	if h.shared != nil {
		h.shared.expect(path)
		return
	}
	h.mu.Lock()
	h.own.add(path, "", time.Now())
	h.mu.Unlock()
}

// ownEcho compares the current version of path with the one of the last
// write or edit published for it: own says one was published lately, echo
// that the versions are equal (the change is that mutation's own), pending
// that a mutation was announced (Expect) and not yet published.
//
// With Redis the last mutation of path is the one any replica published or
// announced, so the replica that watches tells another replica's write
// from an external change.
func (h *Hub) ownEcho(path string, version func() (string, bool)) (own, echo, pending bool) {
	var v string
	var ok bool
	if h.shared != nil {
		v, ok = h.shared.ownVersion(path)
	} else {
		h.mu.Lock()
		v, ok = h.own.get(path, time.Now())
		h.mu.Unlock()
	}
	if !ok {
		return false, false, false
	}
	if v == "" {
		return true, false, true
	}
	cur, found := version()
	return true, found && cur == v, false
}

// id is the SSE id of sequence number seq.
func (h *Hub) id(seq uint64) string { return h.epoch + "-" + strconv.FormatUint(seq, 10) }

// parseID returns the sequence number of an id this hub gave out.
func (h *Hub) parseID(id string) (uint64, bool) {
	epoch, n, ok := strings.Cut(id, "-")
	if !ok || epoch != h.epoch {
		return 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	return seq, err == nil
}

// Subscribe opens a subscription with filter f. lastEventID is the SSE
// Last-Event-ID the client sent ("" for a fresh start): the events after it
// that the ring still holds are queued first; when the ring cannot account
// for all of them (too old, another process's id, malformed) the
// subscription starts with a reset instead. Past Config.MaxSubscribers it
// returns ErrTooManySubscribers.
//
// With Redis the ids are the stream's, the same on every replica, and the
// backlog comes from the stream; a resume from before its first entry
// (trimmed) gets the reset.
func (h *Hub) Subscribe(f Filter, lastEventID string) (*Subscription, error) {
	f.owner = ownerOf(f.Subject)
	h.mu.Lock()
	if h.closed || len(h.subs) >= h.cfg.MaxSubscribers {
		h.mu.Unlock()
		h.obs.refused()
		return nil, ErrTooManySubscribers
	}
	s := &Subscription{
		hub:     h,
		filter:  f,
		queue:   make(chan *record, h.cfg.QueueEvents),
		dropped: make(chan struct{}),
		closed:  make(chan struct{}),
		startID: h.latestLocked(),
	}
	if lastEventID != "" && h.shared == nil {
		s.backlog, s.reset = h.since(lastEventID, f)
	}
	h.subs[s] = struct{}{}
	h.obs.subscribed(len(h.subs))
	tail, reading := h.tail, h.reading
	h.mu.Unlock()
	if lastEventID != "" && h.shared != nil {
		// Registered first: what the reader hands out from now on is
		// queued, the backlog is what came before, up to tail.
		s.backlog, s.skip, s.reset = h.shared.since(lastEventID, tail, reading, f)
	}
	return s, nil
}

// since returns the ring's records after lastEventID that match f, or
// reset = true when the ring cannot account for every event after it.
func (h *Hub) since(lastEventID string, f Filter) (backlog []*record, reset bool) {
	last, ok := h.parseID(lastEventID)
	if !ok || last > h.seq {
		return nil, true
	}
	oldest := h.seq + 1 // with an empty ring, nothing is missing only when last == h.seq
	if h.n > 0 {
		oldest = h.ring[h.head].seq
	}
	if last+1 < oldest {
		return nil, true
	}
	for i := 0; i < h.n; i++ {
		r := h.ring[(h.head+i)%len(h.ring)]
		if r.seq > last && f.matches(r) {
			backlog = append(backlog, r)
		}
	}
	return backlog, false
}

// Subscription is one subscriber's view of the hub: a backlog from the ring
// (on resume), then a bounded queue of new events. Close it when done.
type Subscription struct {
	hub     *Hub
	filter  Filter
	queue   chan *record
	queued  int64         // bytes in queue; guarded by hub.mu
	dropped chan struct{} // closed by the hub when the queue overflowed
	closed  chan struct{} // closed by Hub.Close
	startID string        // the last id when the subscription began
	backlog []*record
	reset   bool // the resume point was lost: send a reset first
	// skip: with Redis, queued records at or before it are not sent (the
	// client has them: it resumed from an id this replica's reader had
	// not reached yet).
	skip position
}

// offer queues r without blocking; false when the queue is full by count or
// bytes. Called with hub.mu held.
func (s *Subscription) offer(r *record) bool {
	size := int64(len(r.data))
	if s.queued+size > s.hub.cfg.QueueBytes {
		return false
	}
	select {
	case s.queue <- r:
		s.queued += size
		return true
	default:
		return false
	}
}

// taken accounts for a record leaving the queue.
func (s *Subscription) taken(r *record) {
	s.hub.mu.Lock()
	s.queued -= int64(len(r.data))
	s.hub.mu.Unlock()
}

// Close ends the subscription; it is a no-op after the hub dropped or
// closed it.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if _, ok := s.hub.subs[s]; ok {
		delete(s.hub.subs, s)
		s.hub.obs.subscribed(len(s.hub.subs))
	}
}

// resetRecord is a reset carrying the id to continue from once the
// subscriber has reloaded: the latest when it is sent, so what follows is
// news (an event published while it reloads may come twice, never not at all).
func (h *Hub) resetRecord(id string) *record {
	return &record{id: id, typ: TypeReset, data: resetData}
}

var resetData = []byte(`{"type":"reset"}`)

// latest is the id of the last event published (with Redis: the last one
// this replica's reader handed out).
func (h *Hub) latest() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latestLocked()
}

func (h *Hub) latestLocked() string {
	if h.shared != nil {
		return h.tailID
	}
	return h.id(h.seq)
}
