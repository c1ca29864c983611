package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// feed is a real server with GET /events over a real root, external
// changes watched.
type feed struct {
	*harness
}

type feedOptions struct {
	token          string
	origins        []string
	maxSubscribers int
}

func startFeed(t *testing.T, o feedOptions) *feed {
	t.Helper()
	srv := servertest.Start(t, server.Config{
		Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		Token:  o.token, CORSOrigins: strings.Join(o.origins, ","), MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
		Events:      events.Settings{Enabled: true, MaxSubscribers: o.maxSubscribers, MaxWatches: server.DefaultConfig().Events.MaxWatches},
		EventsQuiet: 30 * time.Millisecond,
	})
	return &feed{harness: &harness{t: t, root: srv.Root, srv: srv, token: o.token}}
}

// stream is one open GET /events, read line by line.
type stream struct {
	t      *testing.T
	resp   *http.Response
	lines  chan frame
	cancel context.CancelFunc
}

// frame is one event: its id and data.
type frame struct{ id, data string }

func (f *feed) subscribe(query string, headers ...string) *stream {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/events"+query, nil)
	require.NoError(f.t, err)
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	s := &stream{t: f.t, resp: resp, lines: make(chan frame, 256), cancel: cancel}
	f.t.Cleanup(func() { cancel(); resp.Body.Close() })
	go func() {
		defer close(s.lines)
		r := bufio.NewReader(resp.Body)
		var id string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				s.lines <- frame{id: id, data: v}
			}
		}
	}()
	return s
}

// next is the next event's data.
func (s *stream) next() string {
	s.t.Helper()
	return s.nextFrame().data
}

func (s *stream) nextFrame() frame {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		require.True(s.t, ok, "the stream ended")
		return l
	case <-time.After(5 * time.Second):
		s.t.Fatal("no event within 5s")
		return frame{}
	}
}

// quiet asserts that no event arrives within d.
func (s *stream) quiet(d time.Duration) {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if ok {
			s.t.Fatalf("unexpected event %s", l.data)
		}
	case <-time.After(d):
	}
}

func TestEventsStreamsExternalChanges(t *testing.T) {
	f := startFeed(t, feedOptions{})
	s := f.subscribe("")
	require.Equal(t, 200, s.resp.StatusCode)
	assert.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
	assert.Equal(t, "no", s.resp.Header.Get("X-Accel-Buffering"))
	require.NoError(t, os.WriteFile(f.path("made-by-an-editor.txt"), []byte("x"), 0o644))
	assert.Equal(t, `{"type":"created","path":"made-by-an-editor.txt"}`, s.next())
}

func TestEventsNeedsTheToken(t *testing.T) {
	f := startFeed(t, feedOptions{token: "sekret"})
	r := f.do(http.MethodGet, "/events?x", "", "Authorization", "Bearer wrong")
	assert.Equal(t, 401, r.Status)
	assert.Equal(t, "UNAUTHORIZED", r.Code)
	// A token in the query string is not accepted (docs/events.md).
	f.token = ""
	r = f.do(http.MethodGet, "/events?access_token=sekret", "")
	assert.Equal(t, 401, r.Status)
	f.token = "sekret"
	s := f.subscribe("")
	assert.Equal(t, 200, s.resp.StatusCode)
}

func TestEventsRefusalsAreProblems(t *testing.T) {
	f := startFeed(t, feedOptions{maxSubscribers: 1})
	f.subscribe("")
	r := f.do(http.MethodGet, "/events", "")
	assert.Equal(t, 503, r.Status)
	assert.Equal(t, "TOO_MANY_SUBSCRIBERS", r.Code)
	assert.Equal(t, "too many event subscribers (at most 1): close another stream or retry later", r.Detail)
	assert.Equal(t, "Service Unavailable", r.Title)
	assert.Equal(t, "5", r.Header.Get("Retry-After"))

	r = f.do(http.MethodGet, "/events?path=../up", "")
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "INVALID_ARGUMENT", r.Code)
	assert.Equal(t, "path must name a folder or file relative to the workspace root, with no .. segment", r.Detail)

	// Another method is refused as on /metrics, the other route served
	// outside the generated code.
	r = f.do(http.MethodPost, "/events", "")
	m := f.do(http.MethodPost, "/metrics", "")
	assert.Equal(t, m.Status, r.Status)
	assert.Equal(t, m.Code, r.Code)
}

func TestEventsCORS(t *testing.T) {
	f := startFeed(t, feedOptions{origins: []string{"http://app.example"}})
	req, err := http.NewRequest(http.MethodOptions, f.srv.URL+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://app.example")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "authorization,last-event-id")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "http://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "authorization,last-event-id", strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")))

	s := f.subscribe("", "Origin", "http://app.example")
	assert.Equal(t, "http://app.example", s.resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestNoEventsRouteWithoutAHub(t *testing.T) {
	h := start(t, options{})
	r := h.do(http.MethodGet, "/events", "")
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "NOT_FOUND", r.Code)
	assert.Equal(t, "no such endpoint: GET /events (the change feed is off: --events=false)", r.Detail)
}

// versionOf is the provider's version of a file (docs/api.md): dev, inode,
// size, mtime and ctime in nanoseconds.
func versionOf(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &st))
	return fmt.Sprintf("%d:%d:%d:%d:%d", st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
}

// A write and an edit through REST appear once each, with their session,
// the new version and the answer's diffs; the watcher does not report them
// again.
func TestMutationsThroughRESTAppearWithTheirDiffs(t *testing.T) {
	f := startFeed(t, feedOptions{})
	s := f.subscribe("")
	r := f.tool("write", "s1", obj{"file_path": "dir/a.txt", "content": "one\ntwo\nthree\n"})
	require.Equal(t, 200, r.Status, r.Raw)
	v1 := versionOf(t, f.path("dir/a.txt"))
	r = f.tool("edit", "s1", obj{"file_path": "dir/a.txt", "old_string": "two", "new_string": "2"})
	require.Equal(t, 200, r.Status, r.Raw)
	v2 := versionOf(t, f.path("dir/a.txt"))

	// The folder the write made is news (the watcher reports it when it
	// has gathered it, maybe after the edit); the file's own inotify echoes
	// are not.
	var got []string
	for range 3 {
		if e := s.next(); e == `{"type":"created","path":"dir"}` {
			t.Logf("the folder came at position %d", len(got))
		} else {
			got = append(got, e)
		}
	}
	assert.Equal(t, []string{
		`{"type":"write","path":"dir/a.txt","session":"s1","version":"` + v1 + `","diffs":[]}`,
		`{"type":"edit","path":"dir/a.txt","session":"s1","version":"` + v2 + `","diffs":[{"path":"dir/a.txt","oldText":"one\ntwo\nthree","newText":"one\n2\nthree"}]}`,
	}, got)
	s.quiet(300 * time.Millisecond)

	// Someone else changes the file: that is reported.
	require.NoError(t, os.WriteFile(f.path("dir/a.txt"), []byte("outside\n"), 0o644))
	assert.Equal(t, `{"type":"modified","path":"dir/a.txt"}`, s.next())
}

func TestMutationFilters(t *testing.T) {
	f := startFeed(t, feedOptions{})
	mine := f.subscribe("?session=s2")
	under := f.subscribe("?path=src")
	for _, c := range []struct{ session, path string }{{"s1", "src/a.txt"}, {"s2", "b.txt"}, {"s2", "src/c.txt"}} {
		r := f.tool("write", c.session, obj{"file_path": c.path, "content": "x"})
		require.Equal(t, 200, r.Status, r.Raw)
	}
	assert.Contains(t, mine.next(), `"path":"b.txt","session":"s2"`)
	assert.Contains(t, mine.next(), `"path":"src/c.txt","session":"s2"`)
	mine.quiet(300 * time.Millisecond)
	var paths []string
	for range 3 { // the writes in order; the folder src whenever gathered
		var e struct{ Type, Path string }
		require.NoError(t, json.Unmarshal([]byte(under.next()), &e))
		if e.Type != "created" || e.Path != "src" {
			paths = append(paths, e.Type+" "+e.Path)
		}
	}
	assert.Equal(t, []string{"write src/a.txt", "write src/c.txt"}, paths)
	under.quiet(300 * time.Millisecond)
}

// A write through a symlink inside the root is reported at the file it
// changed: one file, one path, whoever changes it.
func TestMutationThroughALinkNamesTheFile(t *testing.T) {
	f := startFeed(t, feedOptions{})
	s := f.subscribe("")
	f.file("real.txt", "a\n")
	require.NoError(t, os.Symlink("real.txt", f.path("link.txt")))
	assert.Equal(t, `{"type":"created","path":"real.txt"}`, s.next())
	assert.Equal(t, `{"type":"created","path":"link.txt"}`, s.next())
	r := f.tool("read", "s1", obj{"file_path": "link.txt"})
	require.Equal(t, 200, r.Status, r.Raw)
	r = f.tool("edit", "s1", obj{"file_path": "link.txt", "old_string": "a", "new_string": "b"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, `{"type":"edit","path":"real.txt","session":"s1","version":"`+versionOf(t, f.path("real.txt"))+`","diffs":[{"path":"link.txt","oldText":"a","newText":"b"}]}`, s.next())
	s.quiet(300 * time.Millisecond)
}

// Resuming with Last-Event-ID after a disconnect delivers the mutations
// made meanwhile, and only them.
func TestResumeThroughREST(t *testing.T) {
	f := startFeed(t, feedOptions{})
	s := f.subscribe("")
	require.Equal(t, 200, f.tool("write", "s1", obj{"file_path": "a.txt", "content": "1"}).Status)
	first := s.nextFrame()
	s.cancel()
	require.Equal(t, 200, f.tool("write", "s1", obj{"file_path": "a.txt", "content": "2"}).Status)
	require.Equal(t, 200, f.tool("write", "s1", obj{"file_path": "b.txt", "content": "3"}).Status)
	r := f.subscribe("", "Last-Event-ID", first.id)
	assert.Contains(t, r.next(), `"path":"a.txt"`)
	assert.Contains(t, r.next(), `"path":"b.txt"`)
	r.quiet(300 * time.Millisecond)
}

// A subscriber that reads nothing does not slow writes down, and is
// dropped. The write latency with one stalled subscriber is measured
// against the same writes with none (docs/events.md, "Bounds").
func TestStalledSubscriberDoesNotDelayWrites(t *testing.T) {
	f := startFeed(t, feedOptions{})
	// One long line and a counter: each write's diff is small to compute
	// and about 128 KB to send (the long line is the hunk's context).
	long := strings.Repeat("x", 64<<10)
	big := func(i int) string { return fmt.Sprintf("%d\n%s\n", i, long) }
	const n = 100
	writes := func(name string) []time.Duration {
		var took []time.Duration
		for i := 0; i < n; i++ {
			start := time.Now()
			r := f.tool("write", "s1", obj{"file_path": name, "content": big(i)})
			took = append(took, time.Since(start))
			require.Equal(t, 200, r.Status, r.Raw)
		}
		slices.Sort(took)
		return took
	}
	writes("warm-up.txt") // page cache, allocator, pools
	base := writes("alone.txt")

	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /events HTTP/1.1\r\nHost: %s\r\n\r\n", strings.TrimPrefix(f.srv.URL, "http://"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.metric("toolfs_events_subscribers") == 1 }, 5*time.Second, 10*time.Millisecond)

	stalled := writes("stalled.txt")
	p := func(d []time.Duration, q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
	t.Logf("write latency, no subscriber: p50 %v p90 %v max %v", p(base, .5), p(base, .9), base[n-1])
	t.Logf("write latency, stalled subscriber: p50 %v p90 %v max %v", p(stalled, .5), p(stalled, .9), stalled[n-1])
	t.Logf("ratio p50 %.2f, p90 %.2f", float64(p(stalled, .5))/float64(p(base, .5)), float64(p(stalled, .9))/float64(p(base, .9)))
	assert.Less(t, float64(p(stalled, .5)), 3*float64(p(base, .5)), "a stalled subscriber must not slow writes down")
	assert.Equal(t, 1.0, f.metric("toolfs_events_subscribers_dropped_total"))
	assert.Equal(t, 0.0, f.metric("toolfs_events_subscribers"))
}

// metric reads one unlabelled series from /metrics.
func (f *feed) metric(name string) float64 {
	f.t.Helper()
	r := f.do(http.MethodGet, "/metrics", "")
	for _, line := range strings.Split(r.Raw, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			x, err := strconv.ParseFloat(v, 64)
			require.NoError(f.t, err)
			return x
		}
	}
	f.t.Fatalf("no series %s", name)
	return 0
}

// until reads the stream up to the event that says mark/<name> was created,
// and returns the events before it. The watcher handles inotify events in
// order and publishes gathered changes first noted first, so every change
// made before the mark was handled by then.
func (s *stream) until(name string) []string {
	s.t.Helper()
	want := `{"type":"created","path":"mark/` + name + `"}`
	var seen []string
	for {
		e := s.next()
		if e == want {
			return seen
		}
		seen = append(seen, e)
	}
}

// A folder swapped for a link to the outside while the watcher is busy and
// events for it are queued reports nothing from outside the root
// (docs/events.md, "Folders moved, removed or swapped for a link"): the
// watcher is kept busy by a tree of 1,550 folders moved in, a/b0 is made,
// then a is renamed away (within the root, or out of it) and a symlink
// a -> outside takes its place. The old watcher, which listed a/b0 by its
// full path, listed outside/b0 and reported its names.
func TestEventsNeverReportAFolderOutsideTheRoot(t *testing.T) {
	f := startFeed(t, feedOptions{})
	base := t.TempDir() // beside the root, on the same filesystem
	outside := filepath.Join(base, "outside")
	staging := filepath.Join(base, "staging")
	gone := filepath.Join(base, "gone")
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "b0"), 0o755))
	require.NoError(t, os.Mkdir(gone, 0o755))
	for i := range 50 {
		for j := range 30 {
			require.NoError(t, os.MkdirAll(filepath.Join(staging, "tree", fmt.Sprintf("d%02d", i), fmt.Sprintf("e%02d", j)), 0o755))
		}
	}
	require.NoError(t, os.Mkdir(f.path("mark"), 0o755))
	s := f.subscribe("?path=a&path=away&path=mark")
	mark := func(name string) { require.NoError(t, os.WriteFile(f.path("mark/"+name), nil, 0o644)) }

	const runs = 50
	start := time.Now()
	leaks, newPath := 0, 0
	for i := range runs {
		require.Less(t, time.Since(start), 3*time.Minute, "run %d", i)
		require.NoError(t, os.Mkdir(f.path("a"), 0o755))
		mark(fmt.Sprintf("ready-%d", i))
		s.until(fmt.Sprintf("ready-%d", i)) // a is watched
		require.NoError(t, os.WriteFile(filepath.Join(outside, "b0", fmt.Sprintf("SECRET-outside-name-%d.txt", i)), nil, 0o644))

		require.NoError(t, os.Rename(filepath.Join(staging, "tree"), f.path("tree"))) // the watcher lists and watches 1,550 folders
		require.NoError(t, os.Mkdir(f.path("a/b0"), 0o755))
		within := i%2 == 0
		if within {
			require.NoError(t, os.Rename(f.path("a"), f.path("away")))
		} else {
			require.NoError(t, os.Rename(f.path("a"), filepath.Join(gone, fmt.Sprintf("a-%d", i))))
		}
		require.NoError(t, os.Symlink(outside, f.path("a")))
		mark(fmt.Sprintf("done-%d", i))

		seen := s.until(fmt.Sprintf("done-%d", i))
		if k := slices.IndexFunc(seen, func(e string) bool { return strings.Contains(e, "SECRET") }); k >= 0 {
			leaks++
			t.Errorf("run %d reported a name from outside the root: %s", i, seen[k])
		}
		// b0 was in the root all along: reported where it was seen, at
		// its old place (handled before the swap) or at its new one.
		if within && (slices.Contains(seen, `{"type":"created","path":"away/b0"}`) || slices.Contains(seen, `{"type":"created","path":"a/b0"}`)) {
			newPath++
		}

		require.NoError(t, os.Remove(f.path("a")))
		require.NoError(t, os.Rename(f.path("tree"), filepath.Join(staging, "tree")))
		require.NoError(t, os.RemoveAll(f.path("away")))
	}
	t.Logf("%d runs in %v: %d reported outside names; b0 reported in %d of %d runs renamed within the root", runs, time.Since(start).Round(time.Millisecond), leaks, newPath, runs/2)
	assert.Zero(t, leaks)
	assert.Equal(t, runs/2, newPath)
}
