package server_test

// GET /readyz (docs/deployment.md, "Readiness"): 503 NOT_READY with the
// reason while a configured dependency cannot serve, 200 otherwise;
// /healthz stays a liveness check.

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// logBuffer is a log destination the server's goroutines share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLogged serves a server built from cfg on a loopback port, its log
// in the returned buffer.
func startLogged(t *testing.T, cfg server.Config) (url string, log *logBuffer) {
	t.Helper()
	if cfg.Root == "" {
		root, err := filepath.EvalSymlinks(t.TempDir())
		require.NoError(t, err)
		cfg.Root = root
	}
	log = &logBuffer{}
	s, err := server.New(cfg, slog.New(slog.NewTextHandler(log, nil)))
	require.NoError(t, err)
	hs := httptest.NewServer(s.Handler)
	t.Cleanup(func() { hs.Close(); s.Shutdown(context.Background()) })
	return hs.URL, log
}

// readyAnswer waits until /readyz answers status, at most within, and
// returns the answer and how long it took.
func readyAnswer(t *testing.T, url string, status int, within time.Duration) (answer, time.Duration) {
	t.Helper()
	start := time.Now()
	var a answer
	for time.Since(start) < within {
		if a = send(t, "GET", url+"/readyz", "", ""); a.status == status {
			return a, time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("/readyz did not answer %d within %s; last: %d %s", status, within, a.status, a.body)
	return a, 0
}

func TestReadyzRedisRefusesTheServer(t *testing.T) {
	rs := redistest.Start(t, "--requirepass", "s3cret")
	for _, c := range []struct{ name, store, reason string }{
		{"wrong password", "redis://:wrong@" + rs.Addr + "/0", "the session store (Redis) refused the server's credentials"},
		{"no password", "redis://" + rs.Addr + "/0", "the session store (Redis) refused the server's credentials"},
		{"wrong user", "redis://bob:s3cret@" + rs.Addr + "/0", "the session store (Redis) refused the server's credentials"},
		{"no such database", "redis://:s3cret@" + rs.Addr + "/99", "the session store (Redis) refused the server's database"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, log := startLogged(t, server.Config{Token: staticToken, Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, SessionStore: c.store})
			a, _ := readyAnswer(t, url, 503, 5*time.Second)
			assert.Equal(t, "NOT_READY", a.code())
			assert.Equal(t, "application/problem+json", a.header.Get("Content-Type"))
			assert.Contains(t, a.body, `"detail":"not ready: `+c.reason+`"`)
			assert.NotContains(t, a.body, "s3cret")
			assert.Equal(t, 200, send(t, "GET", url+"/healthz", "", "").status, "/healthz stays liveness")
			w := send(t, "POST", url+"/tools/write", staticToken, jsonBody(map[string]any{"file_path": "n.txt", "content": "x"}), "Content-Type", "application/json")
			assert.Equal(t, 503, w.status, "the write it cannot serve: %s", w.body)
			assert.Contains(t, log.String(), "not ready: "+c.reason)
			assert.NotContains(t, log.String(), "unreachable")
			assert.NotContains(t, log.String(), "wrong@", "the URL is redacted")
		})
	}
	t.Run("right credentials", func(t *testing.T) {
		url, _ := startLogged(t, server.Config{Token: staticToken, Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, SessionStore: "redis://:s3cret@" + rs.Addr + "/0"})
		a, _ := readyAnswer(t, url, 200, 5*time.Second)
		assert.JSONEq(t, `{"status":"ok"}`, a.body)
	})
}

// TestReadyzFollowsRedis: a Redis killed mid-run turns /readyz 503
// (unreachable) within the 5 s a check may be old, and back to 200 once
// it returns, each change logged once.
func TestReadyzFollowsRedis(t *testing.T) {
	rs := redistest.Start(t)
	url, log := startLogged(t, server.Config{Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, SessionStore: "redis://" + rs.Addr + "/0"})
	readyAnswer(t, url, 200, 5*time.Second)
	rs.Stop()
	a, took := readyAnswer(t, url, 503, 6*time.Second)
	t.Logf("503 %s after Redis stopped", took.Round(time.Millisecond))
	assert.Equal(t, "NOT_READY", a.code())
	assert.Contains(t, a.body, `"detail":"not ready: the session store (Redis) is unreachable"`)
	require.NoError(t, rs.Start())
	a, took = readyAnswer(t, url, 200, 6*time.Second)
	t.Logf("200 %s after Redis returned", took.Round(time.Millisecond))
	assert.JSONEq(t, `{"status":"ok"}`, a.body)
	assert.Contains(t, log.String(), "not ready: the session store (Redis) is unreachable")
	assert.Contains(t, log.String(), "ready again: the session store can serve")
}

// TestReadyzWithoutDependencies: a server with nothing to check is ready
// at once, and /readyz needs no token.
func TestReadyzWithoutDependencies(t *testing.T) {
	url, _ := startLogged(t, server.Config{Token: staticToken, Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}})
	a := send(t, "GET", url+"/readyz", "", "")
	assert.Equal(t, 200, a.status, a.body)
	assert.JSONEq(t, `{"status":"ok"}`, a.body)
	assert.Equal(t, 405, send(t, "POST", url+"/readyz", "", "").status)
}

// TestReadyzWithIdentities: the issuer's keys, fetched at start-up, make
// the server ready; /readyz needs no token.
func TestReadyzWithIdentities(t *testing.T) {
	f := newIDFixture(t, server.Config{})
	a, _ := readyAnswer(t, f.srv.URL, 200, 5*time.Second)
	assert.JSONEq(t, `{"status":"ok"}`, a.body)
}
