package tools

import (
	"container/list"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The caches, as the cache label of the hit and miss counters names them.
const (
	CacheWindow = "window" // rendered windows, by version, offset, limit, caps and anchors
	CacheIndex  = "index"  // line counts and sparse line indexes of large files
)

// Read caches (docs/performance.md, "Caches"): what a read computed from a
// version of a file, reused while a file is at that version.
const (
	// IndexMinBytes is the smallest file whose line index is kept: below
	// it a window is read from the top.
	IndexMinBytes = 1 << 20
	// indexEvery and indexMarks bound an index: a mark at least every 64
	// KiB, at most 16,384 marks (256 KiB) for any size.
	indexEvery = 64 << 10
	indexMarks = 16384
	// entryOverhead is what an entry costs besides its data, counted
	// against the cap: the entry (~416 bytes), its list element, and its
	// map slot at the map's lowest load (heap profile under the bench's
	// load, docs/performance.md "Memory under load").
	entryOverhead = 768
	// memoOverhead is a memo's cost besides its bytes: the memo and the
	// entry's slice of memos.
	memoOverhead = 96
)

// CacheConfig sizes the read caches.
type CacheConfig struct {
	// Bytes bounds every cache together (least recently used evicted
	// first); 0 turns the caches off.
	Bytes int64
	// RacyWindow: a version whose change time is less than this before its
	// stat is never cached, so a file rewritten within one timestamp tick
	// of a read, or written through a shared memory map since its pages
	// were last written back, is never answered from a cache.
	RacyWindow time.Duration
}

// DefaultCacheConfig is 64 MiB for every cache together and the kernel's
// racy window, DefaultRacyWindow (--cache-bytes, --cache-racy-window).
func DefaultCacheConfig() CacheConfig {
	return CacheConfig{Bytes: DefaultCacheBytes, RacyWindow: DefaultRacyWindow()}
}

// The racy window's bounds (docs/performance.md, "Caches").
const (
	// FallbackRacyWindow is used when the kernel's writeback settings
	// cannot be read, or periodic writeback is off: Linux's defaults, 30 s
	// of dirty-page expiry plus 5 s between writeback runs.
	FallbackRacyWindow = 35 * time.Second
	// MinRacyWindow is the least default: more than one timestamp tick.
	MinRacyWindow = 2 * time.Second
)

// vmDir holds the kernel's writeback settings.
const vmDir = "/proc/sys/vm"

// DefaultRacyWindow is how long a write through a shared memory map may
// leave a file's stat unchanged: the kernel's dirty-page expiry plus its
// writeback interval (vm.dirty_expire_centisecs +
// vm.dirty_writeback_centisecs), read now. A dirty page is written back,
// and write-protected again, within that time, so the next write through
// the map faults and sets the file's change time.
func DefaultRacyWindow() time.Duration {
	return racyWindowIn(vmDir)
}

// racyWindowIn is DefaultRacyWindow with the settings read from dir.
func racyWindowIn(dir string) time.Duration {
	expire, ok1 := centisecs(filepath.Join(dir, "dirty_expire_centisecs"))
	every, ok2 := centisecs(filepath.Join(dir, "dirty_writeback_centisecs"))
	if !ok1 || !ok2 || every == 0 {
		// An interval of 0 turns periodic writeback off: a page may stay
		// dirty for as long as memory allows, which no window covers.
		return FallbackRacyWindow
	}
	return max(expire+every, MinRacyWindow)
}

// centisecs reads one of the kernel's centisecond settings.
func centisecs(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 31) // an int in the kernel
	if err != nil {
		return 0, false
	}
	return time.Duration(n) * 10 * time.Millisecond, true
}

type cacheKey struct {
	cache         string
	version       fs.Version
	offset, limit int
	caps          render.Caps
	// anchors: the window of the anchors dialect, whose lines carry tags
	// (docs/edits.md, "Anchored lines"); the same version's plain window
	// is another entry.
	anchors bool
}

// cached is one entry: a window or an index of one version, with the
// provider's content hash of that version when the read that made it knew
// it.
type cached struct {
	key    cacheKey
	window render.Window
	index  render.LineIndex
	media  *mediaAnswer // CacheMedia
	hash   fs.Hash
	size   int64                   // guarded by Cache.mu
	memos  atomic.Pointer[[]*memo] // copied on write, at most maxMemos
}

// maxMemos bounds the encodings kept with one window (a JSON and a text
// answer, for one or two display paths).
const maxMemos = 4

// find returns the memo of name and display, if kept.
func (e *cached) find(name, display string) *memo {
	if ms := e.memos.Load(); ms != nil {
		for _, m := range *ms {
			if m.name == name && m.display == display {
				return m
			}
		}
	}
	return nil
}

// memo is one transport's encoding of a cached window's answer, for one
// display path.
type memo struct {
	name, display string
	b             []byte
}

// Cache holds the read caches of one executor: entries keyed by version,
// evicted least recently used first once their bytes pass the cap. It is
// safe for concurrent use; entries are never modified once stored.
type Cache struct {
	cfg  CacheConfig
	now  func() time.Time
	obs  Observer
	mu   sync.Mutex
	used int64
	lru  list.List // of *cached, most recent first
	m    map[cacheKey]*list.Element
}

func newCache(cfg CacheConfig, obs Observer) *Cache {
	if cfg.Bytes <= 0 {
		return nil
	}
	return &Cache{cfg: cfg, now: time.Now, obs: obs, m: make(map[cacheKey]*list.Element)}
}

// Bytes is what the entries cost against the cap now.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// cacheable says whether a version stat'ed at or after at may be cached:
// its change time is at least the racy window before at.
func (c *Cache) cacheable(info fs.Info, at time.Time) bool {
	return !info.Changed.IsZero() && at.Sub(info.Changed) >= c.cfg.RacyWindow
}

func (c *Cache) get(k cacheKey) (*cached, bool) {
	c.mu.Lock()
	el, ok := c.m[k]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	c.obs.CacheLookup(k.cache, ok)
	if !ok {
		return nil, false
	}
	return el.Value.(*cached), true
}

func (c *Cache) put(e *cached) {
	e.size += entryOverhead
	if e.size > c.cfg.Bytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[e.key]; ok {
		return // another read stored the same version's entry
	}
	c.m[e.key] = c.lru.PushFront(e)
	c.used += e.size
	c.evict()
}

// remember keeps m with e, unless e keeps maxMemos already, and counts its
// bytes against the cap while e is cached.
func (c *Cache) remember(e *cached, m *memo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := e.memos.Load()
	var ms []*memo
	if old != nil {
		ms = *old
	}
	if len(ms) >= maxMemos || e.find(m.name, m.display) != nil {
		return
	}
	ms = append(ms[:len(ms):len(ms)], m)
	e.memos.Store(&ms)
	if el, ok := c.m[e.key]; ok && el.Value == e {
		n := int64(cap(m.b)) + memoOverhead // the allocation, not just the bytes used
		e.size += n
		c.used += n
		c.evict()
	}
}

func (c *Cache) evict() {
	for c.used > c.cfg.Bytes {
		old := c.lru.Back()
		o := old.Value.(*cached)
		c.lru.Remove(old)
		delete(c.m, o.key)
		c.used -= o.size
	}
}

func (c *Cache) window(v fs.Version, offset, limit int, caps render.Caps, anchors bool) (*cached, bool) {
	return c.get(cacheKey{cache: CacheWindow, version: v, offset: offset, limit: limit, caps: caps, anchors: anchors})
}

func (c *Cache) putWindow(v fs.Version, offset, limit int, caps render.Caps, anchors bool, w render.Window, h fs.Hash) {
	size := int64(len(w.Lines)) * 40 // a Line: number and two string headers (a tag's bytes are shared)
	for _, l := range w.Lines {
		size += int64(len(l.Text))
	}
	c.put(&cached{key: cacheKey{cache: CacheWindow, version: v, offset: offset, limit: limit, caps: caps, anchors: anchors}, window: w, hash: h, size: size})
}

func (c *Cache) index(v fs.Version) (*cached, bool) {
	return c.get(cacheKey{cache: CacheIndex, version: v})
}

func (c *Cache) putIndex(v fs.Version, x render.LineIndex, h fs.Hash) {
	c.put(&cached{key: cacheKey{cache: CacheIndex, version: v}, index: x, hash: h, size: int64(len(x.Marks)) * 16})
}
