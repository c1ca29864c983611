package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/server"
)

// countingWriter is a syncBuffer that counts the writes it gets.
type countingWriter struct {
	syncBuffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.syncBuffer.Write(p)
}

func (c *countingWriter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

func TestLogWriterBatchesLines(t *testing.T) {
	var out countingWriter
	l := newLogWriter(&out, 50*time.Millisecond, 1<<10)
	for range 5 {
		_, err := l.Write([]byte("line\n"))
		require.NoError(t, err)
	}
	assert.Empty(t, out.String(), "lines wait for the timer")
	require.Eventually(t, func() bool { return out.String() == strings.Repeat("line\n", 5) }, 2*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, out.count(), "five lines, one write")

	_, err := l.Write([]byte("again\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.HasSuffix(out.String(), "again\n") }, 2*time.Second, 5*time.Millisecond,
		"the timer is armed again after a flush")
}

func TestLogWriterBound(t *testing.T) {
	var out countingWriter
	l := newLogWriter(&out, time.Hour, 100)
	line := []byte(strings.Repeat("x", 39) + "\n") // 40 bytes
	for range 2 {
		l.Write(line)
	}
	assert.Equal(t, 0, out.count())
	l.Write(line) // 120 bytes would pass the bound: the first two go out
	assert.Equal(t, 1, out.count())
	assert.Equal(t, string(line)+string(line), out.String())

	big := []byte(strings.Repeat("y", 200) + "\n")
	l.Write(big) // above the bound on its own: buffered line, then it, at once
	assert.Equal(t, 3, out.count())
	assert.Equal(t, strings.Repeat(string(line), 3)+string(big), out.String())
	assert.LessOrEqual(t, cap(l.buf), 100, "the buffer never grows past the bound")
}

func TestLogWriterCloseLosesNothing(t *testing.T) {
	var out countingWriter
	l := newLogWriter(&out, time.Hour, 1<<10)
	l.Write([]byte("before close\n"))
	require.NoError(t, l.Close())
	assert.Equal(t, "before close\n", out.String(), "Close writes what is buffered")
	l.Write([]byte("after close\n"))
	assert.Equal(t, "before close\nafter close\n", out.String(), "after Close, lines go straight through")
}

// TestRunFlushesLogOnReturn: run's last log lines reach stderr before it
// returns, though they are batched.
func TestRunFlushesLogOnReturn(t *testing.T) {
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve, then shut down at once
	err := run(ctx, []string{"--addr", "127.0.0.1:0", "--lock-dir", "off", "--root", t.TempDir()}, env(nil), &strings.Builder{}, &stderr)
	require.NoError(t, err)
	assert.Contains(t, stderr.String(), "msg=listening")
	assert.Contains(t, stderr.String(), `msg="shutting down`)
}

// TestLoggerBatchesOnlyAccessLines: the access log's lines wait for the
// batch; any other record is written at once, with what waited before it.
func TestLoggerBatchesOnlyAccessLines(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var out countingWriter
			lw := newLogWriter(&out, time.Hour, 1<<10)
			log := newLogger(format, lw).With("component", "test")
			log.Info(server.AccessLogMessage, "path", "/tools/read")
			assert.Empty(t, out.String(), "an access line waits")
			log.Warn("store unreachable")
			assert.Contains(t, out.String(), "/tools/read")
			assert.Contains(t, out.String(), "store unreachable")
			assert.Less(t, strings.Index(out.String(), "/tools/read"), strings.Index(out.String(), "store unreachable"), "in order")
			assert.Equal(t, 1, out.count())
		})
	}
}
