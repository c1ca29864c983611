package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// openFiles is the process's open descriptors, by what they point at.
func openFiles(t *testing.T) map[string]int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	out := map[string]int{}
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out[target]++
		}
	}
	return out
}

// TestShutdownDrains: a server serving an event stream, a call waiting for
// a person's approval and a long poll of the approvals shuts down at once
// (none of them ends by itself): the waiting call is answered cancelled,
// the long poll answers, the stream ends; a second Shutdown is a no-op; and
// every descriptor New opened (the root, the private folder, the lock
// folder, the watcher's inotify) is closed again.
func TestShutdownDrains(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	client := &http.Client{Transport: &http.Transport{}}
	before := openFiles(t)

	srv, err := server.New(server.Config{
		Root: root, Addr: "127.0.0.1:0", Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"},
		Events: events.Settings{Enabled: true, MaxWatches: 64}, Tools: tools.Settings{SandboxMode: "read-only"}, Approvals: approval.Settings{Timeout: time.Minute},
	}, nil)
	require.NoError(t, err)
	addr, err := srv.Listen()
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	base := "http://" + addr.String()

	stream, err := client.Get(base + "/events")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, stream.StatusCode)
	type answer struct {
		status int
		body   string
	}
	post := func(path, body string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
			if err != nil {
				ch <- answer{body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ch <- answer{resp.StatusCode, string(b)}
		}()
		return ch
	}
	require.Equal(t, http.StatusOK, (<-post("/tools/read", `{"file_path":"a.txt"}`)).status, "the default session read the file")
	escalated := post("/tools/write", `{"file_path":"a.txt","content":"two\n","sandbox_permissions":"workspace-write","justification":"j"}`)
	poll := make(chan int, 1)
	go func() {
		// After the first approval (cursor 1), so only the end of the
		// server ends the wait.
		resp, err := client.Get(base + "/approvals?wait=60s&after=1")
		if err != nil {
			poll <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		poll <- resp.StatusCode
	}()
	require.Eventually(t, func() bool {
		resp, err := client.Get(base + "/approvals")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), `"tool":"write"`)
	}, 5*time.Second, 10*time.Millisecond, "the write waits for a person")

	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	assert.Less(t, time.Since(began), 5*time.Second, "nothing held the drain")
	a := <-escalated
	assert.Equal(t, http.StatusForbidden, a.status)
	assert.Contains(t, a.body, `"output":"Error: approval for escalating to \"workspace-write\" was cancelled"`)
	assert.Equal(t, http.StatusOK, <-poll)
	_, err = bufio.NewReader(stream.Body).ReadString(0)
	assert.Error(t, err, "the event stream ended")
	stream.Body.Close()
	assert.NoError(t, <-served)
	assert.NoError(t, srv.Shutdown(ctx), "a second Shutdown is a no-op")

	data, err := os.ReadFile(filepath.Join(root, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(data), "the cancelled write wrote nothing")
	client.CloseIdleConnections()
	require.Eventually(t, func() bool {
		after := openFiles(t)
		for target, n := range after {
			if n > before[target] && !strings.HasPrefix(target, "socket:") {
				return false
			}
		}
		return true
	}, 5*time.Second, 20*time.Millisecond, "descriptors left open: before %v, after %v", before, openFiles(t))
}

// TestNewRefusesWhatValidateRefuses: New takes zero bounds for their
// defaults but refuses a value no server can run with, in its flag's
// words.
func TestNewRefusesWhatValidateRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{Tools: tools.Settings{Profile: "fancy"}}, `--profile must be extended or original, not "fancy"`},
		{server.Config{Tools: tools.Settings{SandboxMode: "full"}}, `--sandbox-mode must be off, read-only, workspace-write or danger-full-access, not "full"`},
		{server.Config{SessionStore: "mysql://db"}, `--session-store must be memory, redis://host:port/db or rediss://host:port/db, not "mysql://db"`},
		{server.Config{Sessions: tools.SessionSettings{Default: "has space"}}, `--default-session "has space": it must be 1-128 characters of A-Za-z0-9._:-`},
		{server.Config{Tools: tools.Settings{ReadLimit: -1}}, `--read-limit must be positive`},
	} {
		c.cfg.Root = t.TempDir()
		_, err := server.New(c.cfg, nil)
		assert.EqualError(t, err, c.want)
	}
}
