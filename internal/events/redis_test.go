package events

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The redis-server of this package's tests (nil when the binary is
// missing: the Redis cases skip). Each cluster of hubs gets its own key
// prefix, so tests share the server safely.
var (
	sharedRedis *redistest.Server
	prefixes    atomic.Int64
)

func TestMain(m *testing.M) { redistest.Main(m, &sharedRedis) }

// replicas returns a function that makes replicas' hubs: one Redis, one
// fresh prefix, a client each (as separate processes have), closed at
// cleanup.
func replicas(t testing.TB, srv *redistest.Server) func(cfg Config) *Hub {
	t.Helper()
	if srv == nil {
		if sharedRedis == nil {
			t.Skip(redistest.MissingReason)
		}
		srv = sharedRedis
	}
	prefix := fmt.Sprintf("t%d:", prefixes.Add(1))
	return func(cfg Config) *Hub {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: 1, DialerRetries: 1})
		cfg.Redis, cfg.Prefix = c, prefix
		h := NewHub(cfg)
		t.Cleanup(func() { h.Close(); c.Close() })
		eventually(t, func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.reading }, "the reader to start")
		return h
	}
}

func editEvent(n int) Event {
	old := fmt.Sprintf("v%d\n", n)
	return Event{Type: TypeEdit, Path: fmt.Sprintf("src/f%d.txt", n%3), Session: fmt.Sprintf("s%d", n%2), Version: fmt.Sprintf("1:%d:3:4:5", n),
		Diffs: []render.Diff{{Path: "f.txt", OldText: &old, NewText: fmt.Sprintf("v%d\n", n+1)}}}
}

// TestSharedOneSequenceOnEveryReplica: events published through three
// replicas reach the subscribers of all three in one order, with the same
// ids (the stream's) and the mutations' sessions and diffs.
func TestSharedOneSequenceOnEveryReplica(t *testing.T) {
	replica := replicas(t, nil)
	hubs := []*Hub{replica(Config{}), replica(Config{}), replica(Config{})}
	var subs []*sse
	for _, h := range hubs {
		subs = append(subs, subscribe(t, serve(t, h).URL, ""))
	}
	const n = 30
	for i := range n {
		hubs[i%3].Publish(editEvent(i))
	}
	var first []frame
	for i, s := range subs {
		var got []frame
		for range n {
			got = append(got, s.next(5*time.Second))
		}
		s.quiet(100 * time.Millisecond)
		if i == 0 {
			first = got
			continue
		}
		assert.Equal(t, first, got, "subscriber %d sees another sequence", i)
	}
	seen := map[string]bool{}
	for _, f := range first {
		_, ok := parsePosition(f.ID)
		assert.True(t, ok, "id %q is a stream id", f.ID)
		var e struct {
			Type, Path, Session string
			Diffs               []map[string]any
		}
		require.NoError(t, json.Unmarshal([]byte(f.Data), &e))
		assert.Equal(t, "edit", e.Type)
		assert.NotEmpty(t, e.Session)
		assert.Len(t, e.Diffs, 1)
		seen[e.Session+" "+e.Path] = true
	}
	assert.Len(t, seen, 6)
	// Every replica published a third of them, all in one order.
	var sessions []string
	for _, f := range first[:4] {
		var e struct{ Session string }
		json.Unmarshal([]byte(f.Data), &e)
		sessions = append(sessions, e.Session)
	}
	assert.Equal(t, []string{"s0", "s1", "s0", "s1"}, sessions)
}

// TestSharedResumeOnAnotherReplica: a subscriber of A that reconnects to B
// with Last-Event-ID gets exactly what it missed (its filter applied),
// then the live stream.
func TestSharedResumeOnAnotherReplica(t *testing.T) {
	replica := replicas(t, nil)
	a, b, c := replica(Config{}), replica(Config{}), replica(Config{})
	sa := subscribe(t, serve(t, a).URL, "")
	for i := range 3 {
		c.Publish(editEvent(i))
	}
	var last frame
	for range 3 {
		last = sa.next(5 * time.Second)
	}
	sa.close()
	for i := 3; i < 7; i++ {
		a.Publish(editEvent(i))
	}
	urlB := serve(t, b).URL
	// What it missed, all of it, on B.
	eventually(t, func() bool { return b.latest() != last.ID }, "B's reader to move on")
	sb := subscribe(t, urlB, last.ID)
	var missed []string
	for range 4 {
		f := sb.next(5 * time.Second)
		var e struct{ Version string }
		json.Unmarshal([]byte(f.Data), &e)
		missed = append(missed, e.Version)
	}
	assert.Equal(t, []string{"1:3:3:4:5", "1:4:3:4:5", "1:5:3:4:5", "1:6:3:4:5"}, missed)
	c.Publish(editEvent(7))
	f := sb.next(5 * time.Second)
	assert.Contains(t, f.Data, `"version":"1:7:3:4:5"`)
	sb.quiet(100 * time.Millisecond)

	// With a filter: only s1's.
	sf := subscribe(t, urlB+"?session=s1", last.ID)
	for _, want := range []string{"1:3:3:4:5", "1:5:3:4:5", "1:7:3:4:5"} {
		assert.Contains(t, sf.next(5*time.Second).Data, want)
	}
	sf.quiet(100 * time.Millisecond)
}

// TestSharedResumeAheadOfThisReplica: a client resuming on B from an id
// B's reader has not reached yet gets nothing twice: the entries up to its
// id are skipped when the reader hands them out.
func TestSharedResumeAheadOfThisReplica(t *testing.T) {
	replica := replicas(t, nil)
	a, b := replica(Config{}), replica(Config{})
	b.shared.stopReader() // B's reader stands still; the test hands out entries itself
	sa := subscribe(t, serve(t, a).URL, "")
	for i := range 3 {
		a.Publish(editEvent(i))
	}
	var ids []string
	for range 3 {
		ids = append(ids, sa.next(5*time.Second).ID)
	}
	sb := subscribe(t, serve(t, b).URL, ids[1])
	eventually(t, func() bool { return b.subscribers() == 1 }, "the subscription")
	res, err := b.cfg.Redis.XRange(context.Background(), b.shared.key, "-", "+").Result()
	require.NoError(t, err)
	for _, m := range res {
		r, ok := recordOf(m)
		require.True(t, ok)
		b.deliver(r)
	}
	assert.Equal(t, ids[2], sb.next(5*time.Second).ID)
	sb.quiet(100 * time.Millisecond)
}

// TestSharedResetWhenTheStreamCannotResume: the stream is bounded
// (MAXLEN ~ RingEvents): a resume from an entry trimmed since, from an id
// the stream never gave, or from a malformed or memory hub's id starts
// with a reset whose id is the latest.
func TestSharedResetWhenTheStreamCannotResume(t *testing.T) {
	replica := replicas(t, nil)
	a := replica(Config{RingEvents: 10, QueueEvents: 1024})
	srv := serve(t, a)
	s := subscribe(t, srv.URL, "")
	a.Publish(Event{Type: TypeCreated, Path: "first"})
	first := s.next(5 * time.Second).ID
	s.close()
	for i := range 400 {
		a.Publish(Event{Type: TypeCreated, Path: fmt.Sprint(i)})
	}
	ctx := context.Background()
	n, err := a.cfg.Redis.XLen(ctx, a.shared.key).Result()
	require.NoError(t, err)
	require.Equal(t, int64(10), n, "the stream holds RingEvents entries")
	last, err := a.cfg.Redis.XRevRangeN(ctx, a.shared.key, "+", "-", 1).Result()
	require.NoError(t, err)
	latest := last[0].ID

	for _, id := range []string{first, "99999999999999-0", "garbage", "3f9a01c2-17", "12345678-5"} {
		eventually(t, func() bool { return a.latest() == latest }, "the reader to catch up")
		r := subscribe(t, srv.URL, id)
		f := r.next(5 * time.Second)
		assert.Equal(t, `{"type":"reset"}`, f.Data, id)
		assert.Equal(t, latest, f.ID, id)
		a.Publish(Event{Type: TypeCreated, Path: "after " + id})
		next := r.next(5 * time.Second)
		assert.Contains(t, next.Data, "after "+id)
		latest = next.ID
		r.close()
	}
	// The latest id itself resumes with nothing missed.
	r := subscribe(t, srv.URL, latest)
	r.quiet(100 * time.Millisecond)
}

// TestSharedReaderGapIsAReset: a replica whose reader fell behind by more
// than the stream holds (here: held while 100 events go through a stream
// of 10) cannot account for what was trimmed: its subscribers get a reset
// and their streams end, so they resume (and reset) or reload.
func TestSharedReaderGapIsAReset(t *testing.T) {
	replica := replicas(t, nil)
	a, b := replica(Config{RingEvents: 10}), replica(Config{RingEvents: 10, QueueEvents: 1024})
	s := subscribe(t, serve(t, b).URL, "")
	eventually(t, func() bool { return b.subscribers() == 1 }, "the subscription")
	b.mu.Lock() // B's reader stalls handing out the first entry
	for i := range 100 {
		a.Publish(Event{Type: TypeCreated, Path: fmt.Sprint(i)})
	}
	b.mu.Unlock()
	frames := s.ended(5 * time.Second)
	require.NotEmpty(t, frames)
	assert.Equal(t, `{"type":"reset"}`, frames[len(frames)-1].Data)
	assert.Less(t, len(frames), 100)
}

// TestSharedStreamBoundedByBytes: the stream holds at most RingBytes of
// events' JSON, as the ring does, the oldest going first, and its byte
// count is exact.
func TestSharedStreamBoundedByBytes(t *testing.T) {
	replica := replicas(t, nil)
	a := replica(Config{RingBytes: 10_000})
	ctx := context.Background()
	for i := range 50 {
		a.Publish(Event{Type: TypeCreated, Path: fmt.Sprintf("%03d", i) + strings.Repeat("x", 950)})
	}
	res, err := a.cfg.Redis.XRange(ctx, a.shared.key, "-", "+").Result()
	require.NoError(t, err)
	total := 0
	for _, m := range res {
		total += len(redisString(m.Values["d"]))
	}
	assert.LessOrEqual(t, total, 10_000)
	assert.Greater(t, total, 10_000-1_000, "no more went than needed")
	assert.Contains(t, redisString(res[len(res)-1].Values["d"]), `"path":"049`)
	counted, err := a.cfg.Redis.Get(ctx, a.shared.key+":bytes").Int()
	require.NoError(t, err)
	assert.Equal(t, total, counted)
	// A 9,000-byte event takes the place of as many as it needs.
	a.Publish(Event{Type: TypeCreated, Path: strings.Repeat("y", 9_000)})
	res, err = a.cfg.Redis.XRange(ctx, a.shared.key, "-", "+").Result()
	require.NoError(t, err)
	assert.Len(t, res, 1)
}

// watchShared is a replica on a real root: its hub on Redis, its provider,
// and Watch (the lease) with the provider's versions.
type sharedReplica struct {
	hub     *Hub
	local   *fs.Local
	watcher interface{ Close() error }
	sub     *sse
}

func startShared(t *testing.T, replica func(Config) *Hub, root string, lease time.Duration) *sharedReplica {
	t.Helper()
	h := replica(Config{QueueEvents: 4096})
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	version := func(rel string) (string, bool) {
		ctx := context.Background()
		tg, err := local.Resolve(ctx, "read", rel, "")
		if err != nil {
			return "", false
		}
		info, err := local.Stat(ctx, tg)
		return string(info.Version), err == nil && info.Type == fs.TypeFile
	}
	w, err := Watch(h, WatchConfig{Workspace: local, Quiet: quiet, Version: version, Lease: lease})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return &sharedReplica{hub: h, local: local, watcher: w, sub: subscribe(t, serve(t, h).URL, "")}
}

// write writes through the replica's tools path: announced, written,
// published.
func (r *sharedReplica) write(t *testing.T, rel, content string) {
	t.Helper()
	ctx := context.Background()
	r.hub.Expect(rel)
	tg, err := r.local.Resolve(ctx, "write", rel, "")
	require.NoError(t, err)
	out, err := r.local.WriteText(ctx, tg, content, nil)
	require.NoError(t, err)
	r.hub.Publish(Event{Type: TypeWrite, Path: rel, Session: "s", Version: string(out.Version)})
}

// events are the types and paths of the events on r's stream within d.
func (r *sharedReplica) events(t *testing.T, d time.Duration) []string {
	t.Helper()
	var out []string
	deadline := time.After(d)
	for {
		select {
		case f, ok := <-r.sub.frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f.Data == "" {
				continue
			}
			var e struct{ Type, Path string }
			require.NoError(t, json.Unmarshal([]byte(f.Data), &e))
			out = append(out, strings.TrimSpace(e.Type+" "+e.Path))
		case <-deadline:
			return out
		}
	}
}

// holder is the replicas of rs that watch.
func holder(rs ...*sharedReplica) []*sharedReplica {
	var out []*sharedReplica
	for _, r := range rs {
		if l, ok := r.watcher.(*lease); ok && l.watching.Load() {
			out = append(out, r)
		}
	}
	return out
}

// die stops l as a killed process would: no more renewals, nothing handed
// back.
func (l *lease) die() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.unwatch()
	})
}

// TestSharedExternalChangeReportedOnce: three replicas on one root watch
// through the lease: one of them watches, an external change reaches every
// subscriber once, and a write through any replica is reported once, by its
// write event, never also as an external change by the replica that
// watches.
func TestSharedExternalChangeReportedOnce(t *testing.T) {
	replica := replicas(t, nil)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	rs := []*sharedReplica{startShared(t, replica, root, 0), startShared(t, replica, root, 0), startShared(t, replica, root, 0)}
	require.Len(t, holder(rs...), 1, "one replica watches")
	for _, r := range rs {
		r.events(t, 100*time.Millisecond)
	}

	write(t, filepath.Join(root, "ext.txt"), "outside\n")
	for _, r := range rs {
		assert.Equal(t, []string{"created ext.txt"}, r.events(t, 10*quiet))
	}
	// Through each replica in turn, the watcher's among them.
	for i, r := range rs {
		r.write(t, "own.txt", fmt.Sprintf("v%d\n", i))
		for _, s := range rs {
			assert.Equal(t, []string{"write own.txt"}, s.events(t, 10*quiet), "write through replica %d", i)
		}
	}
	write(t, filepath.Join(root, "own.txt"), "by hand\n")
	for _, r := range rs {
		assert.Equal(t, []string{"modified own.txt"}, r.events(t, 10*quiet))
	}
}

// TestSharedAnnouncedWriteOnAnotherReplica: a write announced through A
// whose event lags its rename (a loaded replica) is held back by the
// watching replica until the event comes, then reported once, as a write.
func TestSharedAnnouncedWriteOnAnotherReplica(t *testing.T) {
	replica := replicas(t, nil)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	a, b := startShared(t, replica, root, 0), startShared(t, replica, root, 0)
	hs := holder(a, b)
	require.Len(t, hs, 1)
	writer := a
	if hs[0] == a {
		writer = b
	}
	a.events(t, 200*time.Millisecond)
	b.events(t, 200*time.Millisecond)
	ctx := context.Background()
	writer.hub.Expect("late.txt")
	tg, err := writer.local.Resolve(ctx, "write", "late.txt", "")
	require.NoError(t, err)
	out, err := writer.local.WriteText(ctx, tg, "x\n", nil)
	require.NoError(t, err)
	time.Sleep((maxEchoRetries + 3) * quiet)
	writer.hub.Publish(Event{Type: TypeWrite, Path: "late.txt", Session: "s", Version: string(out.Version)})
	for _, r := range []*sharedReplica{a, b} {
		assert.Equal(t, []string{"write late.txt"}, r.events(t, 10*quiet))
	}
}

// TestSharedWatcherTakeover: when the replica holding the watcher lease
// dies (it stops renewing, hands nothing back), another takes over within
// about the lease, says so with an overflow, and external changes are
// reported again, once.
func TestSharedWatcherTakeover(t *testing.T) {
	replica := replicas(t, nil)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	const leaseTTL = 600 * time.Millisecond
	a, b := startShared(t, replica, root, leaseTTL), startShared(t, replica, root, leaseTTL)
	hs := holder(a, b)
	require.Len(t, hs, 1)
	dead, survivor := hs[0], a
	if dead == a {
		survivor = b
	}
	survivor.events(t, 200*time.Millisecond)
	dead.watcher.(*lease).die()
	start := time.Now()
	eventually(t, func() bool { return len(holder(survivor)) == 1 }, "the takeover")
	t.Logf("taken over after %v (lease %v)", time.Since(start), leaseTTL)
	assert.Equal(t, []string{"overflow"}, survivor.events(t, 200*time.Millisecond))
	write(t, filepath.Join(root, "after.txt"), "x\n")
	assert.Equal(t, []string{"created after.txt"}, survivor.events(t, 10*quiet))
}

// TestSharedRedisOutage: while Redis is down publishing fails; once it is
// back the stream says reset (an event was lost), every subscriber of a
// replica whose reader saw the outage is dropped with a reset (it resumes
// or reloads), and events flow again without a restart.
func TestSharedRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	replica := replicas(t, srv)
	a, b := replica(Config{}), replica(Config{})
	s := subscribe(t, serve(t, b).URL, "")
	a.Publish(Event{Type: TypeCreated, Path: "before"})
	before := s.next(5 * time.Second)
	srv.Stop()
	a.Publish(Event{Type: TypeCreated, Path: "lost"})
	require.NoError(t, srv.Start())
	// The reader's reconnection drops the stream with a reset.
	frames := s.ended(15 * time.Second)
	require.NotEmpty(t, frames)
	assert.Equal(t, `{"type":"reset"}`, frames[len(frames)-1].Data)
	// Redis restarted empty: a resume from before is a reset too, and then
	// the news.
	r := subscribe(t, serve(t, b).URL, before.ID)
	a.Publish(Event{Type: TypeCreated, Path: "after"})
	var got []string
	for len(got) < 2 {
		got = append(got, r.next(10*time.Second).Data)
	}
	assert.Equal(t, `{"type":"reset"}`, got[0])
	assert.Contains(t, got[1], `"path":"after"`)
}
