package events

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
)

func str(s string) *string { return &s }

func TestStreamDeliversEventsWithIDsAndHeaders(t *testing.T) {
	h := NewHub(Config{})
	srv := serve(t, h)
	s := subscribe(t, srv.URL, "")
	assert.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
	assert.Equal(t, "no", s.resp.Header.Get("X-Accel-Buffering"))
	assert.Equal(t, "no-store", s.resp.Header.Get("Cache-Control"))

	h.Publish(Event{Type: TypeEdit, Path: "src/a.txt", Session: "s1", Version: "1:2:3:4:5",
		Diffs: []render.Diff{{Path: "src/a.txt", OldText: str("one\ntwo"), NewText: "one\n2"}}})
	h.Publish(Event{Type: TypeWrite, Path: "new.txt", Session: "s1", Version: "1:9:3:4:5"})
	h.Publish(Event{Type: TypeCreated, Path: "b.txt"})
	h.Publish(Event{Type: TypeOverflow})

	want := []string{
		`{"type":"edit","path":"src/a.txt","session":"s1","version":"1:2:3:4:5","diffs":[{"path":"src/a.txt","oldText":"one\ntwo","newText":"one\n2"}]}`,
		`{"type":"write","path":"new.txt","session":"s1","version":"1:9:3:4:5","diffs":[]}`,
		`{"type":"created","path":"b.txt"}`,
		`{"type":"overflow"}`,
	}
	for i, w := range want {
		f := s.next(2 * time.Second)
		assert.Equal(t, w, f.Data)
		assert.Equal(t, h.id(uint64(i+1)), f.ID)
	}
}

func TestRetryFieldOpensTheStream(t *testing.T) {
	h := NewHub(Config{})
	s := subscribe(t, serve(t, h).URL, "")
	select {
	case f := <-s.frames:
		assert.Equal(t, "2000", f.Retry)
	case <-time.After(2 * time.Second):
		t.Fatal("no retry frame")
	}
}

func TestFilters(t *testing.T) {
	events := []Event{
		{Type: TypeEdit, Path: "src/a.go", Session: "s1"},
		{Type: TypeWrite, Path: "src/b.go", Session: "s2"},
		{Type: TypeCreated, Path: "srcx/c.go"},
		{Type: TypeModified, Path: "src"},
		{Type: TypeOverflow},
		{Type: TypeRemoved, Path: "docs/d.md"},
	}
	cases := []struct {
		name  string
		query string
		want  []string // paths ("" for overflow)
	}{
		{"none", "", []string{"src/a.go", "src/b.go", "srcx/c.go", "src", "", "docs/d.md"}},
		{"session", "?session=s1", []string{"src/a.go", ""}},
		{"two sessions", "?session=s1&session=s2", []string{"src/a.go", "src/b.go", ""}},
		{"path by segments", "?path=src", []string{"src/a.go", "src/b.go", "src", ""}},
		{"path with slashes", "?path=/src/", []string{"src/a.go", "src/b.go", "src", ""}},
		{"file path", "?path=src/a.go", []string{"src/a.go", ""}},
		{"root path", "?path=.", []string{"src/a.go", "src/b.go", "srcx/c.go", "src", "", "docs/d.md"}},
		{"two paths", "?path=docs&path=srcx", []string{"srcx/c.go", "", "docs/d.md"}},
		{"session and path", "?session=s2&path=src", []string{"src/b.go", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := NewHub(Config{})
			s := subscribe(t, serve(t, h).URL+c.query, "")
			for _, e := range events {
				h.Publish(e)
			}
			h.Publish(Event{Type: TypeCreated, Path: "zzz-end"}) // passes only unfiltered and root
			var got []string
			for range c.want {
				f := s.next(2 * time.Second)
				var p string
				if f.typ(t) != "overflow" {
					p = strings.TrimPrefix(strings.Split(f.Data, `"path":"`)[1], "")
					p = p[:strings.IndexByte(p, '"')]
				}
				got = append(got, p)
			}
			assert.Equal(t, c.want, got)
		})
	}
}

func TestBadFilterIs400(t *testing.T) {
	h := NewHub(Config{})
	srv := serve(t, h)
	for _, c := range []struct{ query, detail string }{
		{"?session=", "session must be 1-128 characters of A-Za-z0-9._:- only"},
		{"?session=a%20b", "session must be 1-128 characters of A-Za-z0-9._:- only"},
		{"?path=../etc", "path must name a folder or file relative to the workspace root, with no .. segment"},
		{"?path=a/../../b", "path must name a folder or file relative to the workspace root, with no .. segment"},
		{"?path=a%00b", "path must name a folder or file relative to the workspace root, with no .. segment"},
	} {
		resp, err := http.Get(srv.URL + c.query)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 400, resp.StatusCode, c.query)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		assert.JSONEq(t, `{"type":"about:blank","title":"Bad Request","status":400,"code":"INVALID_ARGUMENT",
			"detail":"`+c.detail+`","output":"Error: `+c.detail+`"}`, string(body), c.query)
	}
	assert.Equal(t, 0, h.subscribers())
}

func TestResumeDeliversWhatWasMissed(t *testing.T) {
	h := NewHub(Config{})
	srv := serve(t, h)
	s := subscribe(t, srv.URL, "")
	h.Publish(Event{Type: TypeCreated, Path: "a"})
	first := s.next(2 * time.Second)
	s.close()
	eventually(t, func() bool { return h.subscribers() == 0 }, "the stream to end")

	h.Publish(Event{Type: TypeCreated, Path: "b"})
	h.Publish(Event{Type: TypeModified, Path: "c"})
	r := subscribe(t, srv.URL, first.ID)
	assert.Equal(t, `{"type":"created","path":"b"}`, r.next(2*time.Second).Data)
	assert.Equal(t, `{"type":"modified","path":"c"}`, r.next(2*time.Second).Data)
	h.Publish(Event{Type: TypeRemoved, Path: "d"})
	f := r.next(2 * time.Second)
	assert.Equal(t, `{"type":"removed","path":"d"}`, f.Data)
	assert.Equal(t, h.epoch+"-4", f.ID)

	// Resuming from the latest id misses nothing and replays nothing.
	l := subscribe(t, srv.URL, f.ID)
	l.quiet(200 * time.Millisecond)
}

func TestResumeHonoursTheFilter(t *testing.T) {
	h := NewHub(Config{})
	srv := serve(t, h)
	h.Publish(Event{Type: TypeCreated, Path: "a"})
	id := h.id(1)
	h.Publish(Event{Type: TypeEdit, Path: "x/b", Session: "s1"})
	h.Publish(Event{Type: TypeEdit, Path: "y/c", Session: "s1"})
	r := subscribe(t, srv.URL+"?path=y", id)
	f := r.next(2 * time.Second)
	assert.Equal(t, `{"type":"edit","path":"y/c","session":"s1","diffs":[]}`, f.Data)
	assert.Equal(t, h.id(3), f.ID)
}

func TestResetWhenTheRingCannotResume(t *testing.T) {
	h := NewHub(Config{RingEvents: 4})
	srv := serve(t, h)
	for i := 0; i < 10; i++ {
		h.Publish(Event{Type: TypeModified, Path: "a"})
	}
	cases := []struct{ name, lastID string }{
		{"evicted", h.id(2)},
		{"another process", "0badc0de-9"},
		{"from the future", h.id(11)},
		{"malformed", "garbage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := subscribe(t, srv.URL, c.lastID)
			f := s.next(2 * time.Second)
			assert.Equal(t, `{"type":"reset"}`, f.Data)
			assert.Equal(t, h.id(10), f.ID, "a reset carries the id to continue from")
			s.quiet(100 * time.Millisecond)
		})
	}
	// The oldest id the ring still covers resumes without a reset.
	s := subscribe(t, srv.URL, h.id(6))
	for i := 7; i <= 10; i++ {
		assert.Equal(t, h.id(uint64(i)), s.next(2*time.Second).ID)
	}
}

func TestRingIsBoundedByBytes(t *testing.T) {
	h := NewHub(Config{RingEvents: 100, RingBytes: 1000})
	e := Event{Type: TypeModified, Path: strings.Repeat("p", 90)}
	size := len(e.encode(1 << 20))
	for i := 0; i < 50; i++ {
		h.Publish(e)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, 1000/size, h.n)
	assert.Equal(t, int64(h.n*size), h.bytes)
}

func TestHugeDiffsAreOmitted(t *testing.T) {
	h := NewHub(Config{MaxEventBytes: 200})
	s := subscribe(t, serve(t, h).URL, "")
	h.Publish(Event{Type: TypeEdit, Path: "a", Session: "s", Version: "v",
		Diffs: []render.Diff{{Path: "a", NewText: strings.Repeat("x", 300)}}})
	assert.Equal(t, `{"type":"edit","path":"a","session":"s","version":"v","diffsOmitted":true}`, s.next(2*time.Second).Data)
}

func TestTooManySubscribersIs503(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := NewHub(Config{MaxSubscribers: 2, Metrics: NewMetrics(reg)})
	srv := serve(t, h)
	subscribe(t, srv.URL, "")
	subscribe(t, srv.URL, "")
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	assert.JSONEq(t, `{"type":"about:blank","title":"Service Unavailable","status":503,"code":"TOO_MANY_SUBSCRIBERS",
		"detail":"too many event subscribers (at most 2): close another stream or retry later",
		"output":"Error: too many event subscribers (at most 2): close another stream or retry later"}`, string(body))
	assert.Equal(t, 1.0, value(h.cfg.Metrics.refused))
	assert.Equal(t, 2.0, value(h.cfg.Metrics.subscribers))
}

func TestClientDisconnectEndsTheStream(t *testing.T) {
	h := NewHub(Config{})
	s := subscribe(t, serve(t, h).URL, "")
	eventually(t, func() bool { return h.subscribers() == 1 }, "the subscription")
	s.close()
	eventually(t, func() bool { return h.subscribers() == 0 }, "the subscription to end")
}

func TestHeartbeat(t *testing.T) {
	h := NewHub(Config{Heartbeat: 50 * time.Millisecond})
	s := subscribe(t, serve(t, h).URL, "")
	deadline := time.After(2 * time.Second)
	for {
		select {
		case f := <-s.frames:
			if f.Comment == "heartbeat" {
				return
			}
		case <-deadline:
			t.Fatal("no heartbeat")
		}
	}
}

func TestHubCloseEndsStreams(t *testing.T) {
	h := NewHub(Config{})
	s := subscribe(t, serve(t, h).URL, "")
	h.Close()
	assert.Empty(t, s.ended(2*time.Second))
	h.Publish(Event{Type: TypeCreated, Path: "a"}) // a no-op, no panic
}

// A subscriber that stops reading fills its socket, then its queue; Publish
// never waits for it, and it is dropped: when it reads again it finds the
// events that were queued, then a reset naming the first event it missed,
// then the end of the stream.
func TestStalledSubscriberIsDroppedWithAReset(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := NewHub(Config{QueueEvents: 64, QueueBytes: 64 << 20, MaxEventBytes: 1 << 20, RingBytes: 64 << 20, Metrics: NewMetrics(reg)})
	srv := serve(t, h)
	stalled := stallingClient(t, srv.URL)
	live := subscribe(t, srv.URL, "")
	eventually(t, func() bool { return h.subscribers() == 2 }, "both subscriptions")
	got := make(chan int)
	const n = 400 // 25 MiB: more than a socket's buffers hold
	go func() {
		i := 0
		for ; i < n; i++ {
			f, ok := <-live.frames
			if !ok {
				break
			}
			if f.Data == "" {
				i--
			}
		}
		got <- i
	}()

	big := strings.Repeat("x", 64<<10)
	start := time.Now()
	var slowest time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		h.Publish(Event{Type: TypeEdit, Path: "big", Session: "s", Diffs: []render.Diff{{Path: "big", NewText: big}}})
		slowest = max(slowest, time.Since(t0))
		time.Sleep(time.Millisecond) // a steady stream, not one burst
	}
	t.Logf("%d publishes in %v, slowest %v", n, time.Since(start), slowest)
	assert.Less(t, slowest, 250*time.Millisecond, "Publish must not wait for a stalled subscriber")
	assert.Equal(t, n, <-got, "the live subscriber got every event")
	assert.Equal(t, 1, h.subscribers(), "the stalled subscriber was dropped")
	assert.Equal(t, 1.0, value(h.cfg.Metrics.dropped))

	frames := stalled.drain(t)
	require.GreaterOrEqual(t, len(frames), 2)
	last := frames[len(frames)-1]
	assert.Equal(t, `{"type":"reset"}`, last.Data)
	assert.Equal(t, h.id(n), last.ID, "a reset names the latest event: what follows is news")
	for _, f := range frames[:len(frames)-1] {
		assert.Contains(t, f.Data, `"type":"edit"`)
	}
}

// stallingClient opens a stream on a raw connection and reads nothing until
// drain is called.
type stalling struct{ conn net.Conn }

func stallingClient(t *testing.T, url string) *stalling {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	require.NoError(t, err)
	return &stalling{conn: conn}
}

func (s *stalling) drain(t *testing.T) []frame {
	t.Helper()
	require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(s.conn), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the server must end the stream")
	var out []frame
	for _, chunk := range strings.Split(string(body), "\n\n") {
		var f frame
		for _, line := range strings.Split(chunk, "\n") {
			if strings.HasPrefix(line, "id: ") {
				f.ID = line[4:]
			}
			if strings.HasPrefix(line, "data: ") {
				f.Data = line[6:]
			}
		}
		if f.Data != "" {
			out = append(out, f)
		}
	}
	return out
}
