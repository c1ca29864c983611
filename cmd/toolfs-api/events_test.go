package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveRoot runs the whole server in-process on root and returns its base
// URL and a stop function that reports how long the shutdown took.
func serveRoot(t *testing.T, root string, args ...string) (string, func() time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0", "--lock-dir", "off", "--root", root}, args...),
			env(nil), &stdout, &stderr)
	}()
	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(stdout.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 5*time.Second, 10*time.Millisecond, stderr.String())
	stopped := false
	stop := func() time.Duration {
		if stopped {
			return 0
		}
		stopped = true
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(40 * time.Second):
			t.Fatal("server did not shut down")
		}
		return time.Since(start)
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

// An open change-feed stream ends when the drain starts: it does not hold
// the shutdown for the whole grace.
func TestEventsStreamsEndOnShutdown(t *testing.T) {
	root := t.TempDir()
	base, stop := serveRoot(t, root, "--shutdown-grace", "20s")
	resp, err := http.Get(base + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	lines := bufio.NewReader(resp.Body)

	require.NoError(t, os.WriteFile(filepath.Join(root, "x.txt"), []byte("x"), 0o644))
	for {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "data: ") {
			assert.Equal(t, "data: {\"type\":\"created\",\"path\":\"x.txt\"}\n", line)
			break
		}
	}
	took := stop()
	assert.Less(t, took, 5*time.Second)
	_, err = io.ReadAll(resp.Body)
	assert.NoError(t, err, "the stream ends cleanly")
}

func TestEventsOff(t *testing.T) {
	base, _ := serveRoot(t, t.TempDir(), "--events=false")
	resp, err := http.Get(base + "/events")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 404, resp.StatusCode)
}

func TestEventsFlagsAreChecked(t *testing.T) {
	for _, c := range []struct{ args []string }{
		{[]string{"--events-max-subscribers", "0"}},
		{[]string{"--events-max-watches", "-1"}},
		{[]string{"--events-heartbeat", "0s"}},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), c.args, env(nil), io.Discard, &stderr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), strings.TrimPrefix(c.args[0], ""))
	}
}
