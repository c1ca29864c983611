package main

import (
	"io"
	"sync"
	"time"
)

// logWriter batches the server's log lines before they reach stderr: the
// access log writes a line per request, and one write(2) per request was a
// measurable part of a cached read's cost (docs/performance.md, "What
// profiling changed"); the logger flushes it after every other record
// (batching). A line waits at most every for its write; the
// buffer never holds more than max bytes (a Write that would pass it writes
// the buffer out first, in the caller's goroutine). Close writes what is
// left, so a clean shutdown loses no line; later Writes go straight
// through. A crash can lose the last every of lines.
type logWriter struct {
	w     io.Writer
	every time.Duration
	max   int

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer // armed while buf holds lines
	closed bool
}

func newLogWriter(w io.Writer, every time.Duration, max int) *logWriter {
	l := &logWriter{w: w, every: every, max: max, buf: make([]byte, 0, max)}
	l.timer = time.AfterFunc(time.Hour, l.Flush)
	l.timer.Stop()
	return l
}

// Write keeps p for the next flush. slog hands each record to Write whole,
// so lines are never split between flushes.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(p) > l.max {
		if err := l.flushLocked(); err != nil {
			return 0, err
		}
		return l.w.Write(p)
	}
	if len(l.buf)+len(p) > l.max {
		if err := l.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(l.buf) == 0 {
		l.timer.Reset(l.every)
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// Flush writes the buffered lines out now.
func (l *logWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *logWriter) flushLocked() error {
	l.timer.Stop()
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.w.Write(l.buf)
	l.buf = l.buf[:0]
	return err
}

// Close writes the buffered lines out; from then on every Write goes
// straight to the underlying writer.
func (l *logWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.flushLocked()
}
