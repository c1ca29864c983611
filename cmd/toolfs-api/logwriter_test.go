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

// TestLoggerWritesAccessLinesByHand: the server's logger writes an access
// line itself (handlers.AccessWriter), the bytes its slog handler writes
// for the same record, batched as they are, with no allocation in text or
// JSON (the line's buffer is pooled); a logger with attributes added leaves
// the line to slog.
func TestLoggerWritesAccessLinesByHand(t *testing.T) {
	type accessWriter interface {
		WriteAccess(*server.AccessLine) bool
	}
	l := server.AccessLine{Time: time.Date(2026, 12, 7, 18, 55, 26, 123456789, time.UTC), Method: "POST", Path: "/tools/read",
		Status: 200, Bytes: 156962, Duration: 1500 * time.Microsecond, RequestID: "r-1"}
	for format, want := range map[string]string{
		"text": "time=2026-12-07T18:55:26.123Z level=INFO msg=request method=POST path=/tools/read status=200 bytes=156962 duration=1.5ms request_id=r-1\n",
		"json": `{"time":"2026-12-07T18:55:26.123456789Z","level":"INFO","msg":"request","method":"POST","path":"/tools/read","status":200,"bytes":156962,"duration":1500000,"request_id":"r-1"}` + "\n",
	} {
		t.Run(format, func(t *testing.T) {
			var out countingWriter
			lw := newLogWriter(&out, time.Hour, 1<<20)
			aw, ok := newLogger(format, lw).Handler().(accessWriter)
			require.True(t, ok, "the logger's handler writes access lines")
			require.True(t, aw.WriteAccess(&l))
			assert.Empty(t, out.String(), "an access line waits for the batch")
			lw.Flush()
			assert.Equal(t, want, out.String())
			if format == "json" {
				assert.Zero(t, testing.AllocsPerRun(100, func() { aw.WriteAccess(&l) }), "allocations per line")
			} else {
				// Duration.String's one string.
				assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { aw.WriteAccess(&l) }), 1.0, "allocations per line")
			}
			with, ok := newLogger(format, lw).With("component", "x").Handler().(accessWriter)
			require.True(t, ok)
			assert.False(t, with.WriteAccess(&l), "attributes added: slog writes the line")
		})
	}
}
