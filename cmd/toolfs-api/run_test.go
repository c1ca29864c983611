package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRunServesAndDrains(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hi\n"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--lock-dir", "off"},
			env(map[string]string{"TOOLFS_ROOT": root, "TOOLFS_LOG_FORMAT": "json"}), &stdout, &stderr)
	}()

	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(stdout.String())
		if m == nil {
			return false
		}
		base = m[1]
		return true
	}, 5*time.Second, 10*time.Millisecond)

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)

	resp, err = http.Post(base+"/tools/read", "application/json", strings.NewReader(`{"file_path":"a.txt"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), `1: hi`)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not shut down")
	}
	assert.Contains(t, stderr.String(), `"msg":"shutting down`)
}

func TestRunRefusesBadConfig(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"missing root", []string{"--root", "/definitely/not/here"}, nil, "--root"},
		{"bad number flag", []string{"--read-limit", "lots"}, nil, "read-limit"},
		{"zero limit", []string{"--read-limit", "0"}, nil, "--read-limit must be positive"},
		{"bad env twin", nil, map[string]string{"TOOLFS_READ_MAX_BYTES": "x"}, "TOOLFS_READ_MAX_BYTES"},
		{"bad duration", []string{"--session-ttl", "soon"}, nil, "session-ttl"},
		{"bad log format", []string{"--log-format", "xml"}, nil, "--log-format"},
		{"public without token", []string{"--addr", "0.0.0.0:0"}, nil, "--token"},
		{"stray argument", []string{"serve"}, nil, "unexpected argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(context.Background(), tc.args, env(tc.env), io.Discard, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error()+stderr.String(), tc.want)
		})
	}
}

func TestFlagWinsOverEnv(t *testing.T) {
	c, err := parseConfig([]string{"--read-limit", "10"}, env(map[string]string{"TOOLFS_READ_LIMIT": "20", "TOOLFS_POLICY": "false"}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 10, c.readLimit)
	assert.False(t, c.policy)
}
