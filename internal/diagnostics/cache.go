package diagnostics

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// cache keeps the problems a checker found in one version of one file, so
// the version before an edit is usually not checked again: it was the
// version after the previous one. It is bounded by entries and by the
// bytes of their messages, least recently used out first.
type cache struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int
	bytes      int
	order      *list.List // of *cacheEntry, most recent first
	entries    map[[32]byte]*list.Element
}

type cacheEntry struct {
	key      [32]byte
	problems []Problem
	size     int
}

func newCache(maxEntries, maxBytes int) *cache {
	return &cache{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), entries: map[[32]byte]*list.Element{}}
}

// cacheKey names a version: the checker, the file's path (a checker may
// read the file's folder) and the version's bytes.
func cacheKey(checker, path string, content []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(checker))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(content)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (c *cache) get(k [32]byte) ([]Problem, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).problems, true
}

func (c *cache) put(k [32]byte, problems []Problem) {
	size := 64
	for _, p := range problems {
		size += 32 + len(p.Message)
	}
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.bytes -= e.Value.(*cacheEntry).size
		c.order.Remove(e)
		delete(c.entries, k)
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, problems: problems, size: size})
	c.bytes += size
	for len(c.entries) > c.maxEntries || c.bytes > c.maxBytes {
		last := c.order.Back()
		e := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.entries, e.key)
		c.bytes -= e.size
	}
}

// len is the number of entries (tests).
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
