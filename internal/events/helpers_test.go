package events

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// frame is one SSE frame as a client sees it: an event (ID, Data) or a
// comment.
type frame struct {
	ID      string
	Data    string
	Comment string
	Retry   string
}

func (f frame) typ(t *testing.T) string {
	t.Helper()
	var v struct{ Type string }
	require.NoError(t, json.Unmarshal([]byte(f.Data), &v), f.Data)
	return v.Type
}

// sse is a real HTTP client reading one /events stream frame by frame.
type sse struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
	frames chan frame
	done   chan error
}

// serve mounts the hub on a real loopback server.
func serve(t *testing.T, h *Hub) *httptest.Server {
	srv := httptest.NewServer(h.Handler(minimalProblem, nil))
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv
}

// subscribe opens GET url (query included) with an optional Last-Event-ID;
// it returns once the response headers are in, so the subscription exists.
func subscribe(t *testing.T, url, lastID string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	s := &sse{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel, frames: make(chan frame, 1024), done: make(chan error, 1)}
	t.Cleanup(s.close)
	if resp.StatusCode == http.StatusOK {
		go s.read()
	}
	return s
}

func (s *sse) close() { s.cancel(); s.resp.Body.Close() }

func (s *sse) read() {
	var f frame
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			close(s.frames)
			s.done <- err
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			s.frames <- f
			f = frame{}
		case strings.HasPrefix(line, ":"):
			f.Comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			f.ID = line[4:]
		case strings.HasPrefix(line, "data: "):
			f.Data = line[6:]
		case strings.HasPrefix(line, "retry: "):
			f.Retry = line[7:]
		default:
			s.t.Errorf("unexpected SSE line %q", line)
		}
	}
}

// next returns the next event frame (skipping comments and the retry
// frame), failing the test after timeout.
func (s *sse) next(timeout time.Duration) frame {
	s.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				s.t.Fatalf("stream ended while waiting for an event")
			}
			if f.Data != "" {
				return f
			}
		case <-deadline:
			s.t.Fatalf("no event within %v", timeout)
		}
	}
}

// quiet asserts that no event arrives within d.
func (s *sse) quiet(d time.Duration) {
	s.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case f, ok := <-s.frames:
			if ok && f.Data != "" {
				s.t.Fatalf("unexpected event %s %s", f.ID, f.Data)
			}
			if !ok {
				return
			}
		case <-deadline:
			return
		}
	}
}

// ended waits for the server to end the stream and returns the event
// frames that came before the end.
func (s *sse) ended(timeout time.Duration) []frame {
	s.t.Helper()
	var out []frame
	deadline := time.After(timeout)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return out
			}
			if f.Data != "" {
				out = append(out, f)
			}
		case <-deadline:
			s.t.Fatalf("stream still open after %v", timeout)
		}
	}
}

// eventually polls cond for up to 5 s.
func eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (h *Hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// value is the current value of a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// minimalProblem stands for the REST router's problem writer: an RFC
// 9457 body, 503 for too many subscribers, else 400.
func minimalProblem(w http.ResponseWriter, code fault.Code, message string) {
	status := http.StatusBadRequest
	if code == fault.CodeTooManySubscribers {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status,
		"detail": message, "code": code, "output": "Error: " + message,
	})
}
