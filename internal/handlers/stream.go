package handlers

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/toolfs/toolfs-api/internal/render"
)

// errAbortStream tells the response error hook that a streamed read failed
// after its first bytes left: the transfer must break, not end cleanly.
var errAbortStream = errors.New("streamed read aborted")

// streamedRead answers a read with Accept: text/plain. Nothing is sent before
// the first line of the window is known (or the file ends), so early failures
// are ordinary problem bodies; after that, lines are flushed as they are
// produced and a failure aborts the transfer.
type streamedRead struct {
	x     *executor
	ctx   context.Context
	c     call
	read  *reading
	start time.Time
}

func (s streamedRead) VisitReadToolResponse(w http.ResponseWriter) error {
	x, rd := s.x, s.read
	defer rd.file.Close()
	win := render.NewWindower(rd.offset, rd.limit, x.cfg.Caps)

	// Until the first lines are ready, an error is still a problem body.
	var first []render.Line
	err := feed(s.ctx, rd.file, win, func(lines []render.Line) error {
		first = lines
		return errFirstLines
	})
	eof := err == nil
	if err != nil && !errors.Is(err, errFirstLines) {
		return x.fail("read", s.start, x.readFailure(rd.target, err)).visit(w)
	}
	var window render.Window
	if eof {
		if window, err = win.Close(); err != nil {
			return x.fail("read", s.start, x.readFailure(rd.target, err)).visit(w)
		}
		first = win.Ready()
	}

	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each chunk on at once
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	out := &lineWriter{w: w, rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, 32<<10), window: x.cfg.StreamWriteWindow}
	out.bw.WriteString(render.ReadHeader(rd.target.Display))
	if err := out.lines(first); err != nil {
		return s.abort(err)
	}
	if !eof {
		if err := feed(s.ctx, rd.file, win, out.lines); err != nil {
			return s.abort(err)
		}
		if window, err = win.Close(); err != nil {
			return s.abort(err)
		}
		if err := out.lines(win.Ready()); err != nil {
			return s.abort(err)
		}
	}
	out.bw.WriteString(render.ReadTail(window))
	if err := out.flush(); err != nil {
		return s.abort(err)
	}
	x.readDone(s.c, rd, window, s.start)
	return nil
}

var errFirstLines = errors.New("first lines ready")

func (s streamedRead) abort(err error) error {
	code := s.x.readFailure(s.read.target, err).code
	s.x.done("read", s.start, code)
	s.x.Logger.Info("streamed read aborted", "code", code)
	return errAbortStream
}

// lineWriter batches lines into a buffer and flushes after each batch, giving
// every flush its own write deadline so a client that stops reading cannot
// pin the goroutine and the open file.
type lineWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	bw     *bufio.Writer
	window time.Duration
	num    []byte // scratch for a line's number prefix
}

func (o *lineWriter) lines(lines []render.Line) error {
	if o.window > 0 {
		o.rc.SetWriteDeadline(time.Now().Add(o.window))
	}
	for _, l := range lines {
		// render.LineText without building a string per line.
		o.num = strconv.AppendInt(o.num[:0], int64(l.Number), 10)
		o.num = append(o.num, ": "...)
		o.bw.Write(o.num)
		o.bw.WriteString(l.Text)
		if err := o.bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	return o.flush()
}

func (o *lineWriter) flush() error {
	if err := o.bw.Flush(); err != nil {
		return err
	}
	return o.rc.Flush()
}
