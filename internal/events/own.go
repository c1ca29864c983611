package events

import "time"

// ownEchoes remembers the path and version of recent mutations made through
// the tools, so the Watcher can tell their inotify echo from an external
// change. It is bounded: past max entries, or after ttl, the oldest are
// forgotten (a forgotten echo is reported once more, never a change lost).
type ownEchoes struct {
	max   int
	ttl   time.Duration
	byKey map[string]ownEcho
	order []ownKey // insertion order, for eviction
}

type ownEcho struct {
	version string
	at      time.Time
}

type ownKey struct {
	path string
	at   time.Time
}

func newOwnEchoes(max int, ttl time.Duration) ownEchoes {
	return ownEchoes{max: max, ttl: ttl, byKey: map[string]ownEcho{}}
}

func (o *ownEchoes) add(path, version string, now time.Time) {
	o.expire(now)
	for (len(o.byKey) >= o.max || len(o.order) >= 2*o.max) && len(o.order) > 0 {
		o.evict()
	}
	o.byKey[path] = ownEcho{version: version, at: now}
	o.order = append(o.order, ownKey{path: path, at: now})
}

func (o *ownEchoes) get(path string, now time.Time) (string, bool) {
	o.expire(now)
	e, ok := o.byKey[path]
	return e.version, ok
}

// expire forgets entries older than ttl.
func (o *ownEchoes) expire(now time.Time) {
	for len(o.order) > 0 && now.Sub(o.order[0].at) > o.ttl {
		o.evict()
	}
}

// evict forgets the oldest entry, unless its path was written again since.
func (o *ownEchoes) evict() {
	k := o.order[0]
	o.order[0] = ownKey{}
	o.order = o.order[1:]
	if e, ok := o.byKey[k.path]; ok && e.at.Equal(k.at) {
		delete(o.byKey, k.path)
	}
	if len(o.order) == 0 {
		o.order = nil // let the backing array go
	}
}
