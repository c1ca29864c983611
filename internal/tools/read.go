package tools

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/media"
	"github.com/toolfs/toolfs-api/internal/render"
)

// ReadMetadata is a read's metadata; Path is DISPLAY.
type ReadMetadata struct {
	Path       string        `json:"path"`
	Offset     int           `json:"offset"`
	Lines      []render.Line `json:"lines"`
	TotalLines int           `json:"totalLines"`
	Lang       string        `json:"lang,omitempty"`
	// Image is an image read's picture; Pages and TotalPages a PDF read's
	// window (docs/media.md). Lines is then empty.
	Image      *ReadImage    `json:"image,omitempty"`
	Pages      []render.Page `json:"pages,omitempty"`
	TotalPages *int          `json:"totalPages,omitempty"`
}

// ReadResult is a successful read: the window and its metadata. Its output
// is render.ReadOutput(Display, Window), built by Output, or encoded
// straight into a body by a transport that wants to avoid the copy.
type ReadResult struct {
	Display string
	Window  render.Window
	Meta    ReadMetadata
	hit     *cached // the cached window it came from
	cache   *Cache
	media   *mediaAnswer // an image or PDF read's answer; Window is then empty
}

// IsMedia says the read answered an image or a PDF: its output and
// metadata are not a text window's.
func (r ReadResult) IsMedia() bool { return r.media != nil }

// Memo returns a transport's encoding of the answer, named name: for an
// answer served from a cached window, encode runs once per window and
// display path and its bytes are kept with the window (counted against
// --cache-bytes), so a repeated read writes bytes instead of encoding them
// again. ok is false for any other answer: encode yourself. The bytes must
// not be modified.
func (r ReadResult) Memo(name string, encode func() []byte) (b []byte, ok bool) {
	if r.hit == nil {
		return nil, false
	}
	return memoOf(r.cache, r.hit, name, r.Display, encode), true
}

func memoOf(c *Cache, e *cached, name, display string, encode func() []byte) []byte {
	if m := e.find(name, display); m != nil {
		return m.b
	}
	m := &memo{name: name, display: display, b: encode()}
	c.remember(e, m)
	return m.b
}

// TextSink is a LineSink that can also take a whole answer at once: a
// streamed read of a cached window gets its text (header, lines, tail) as
// one slice of bytes, kept with the window, instead of line by line.
type TextSink interface {
	LineSink
	// Text commits the answer and writes all of it; b must not be modified.
	Text(b []byte) error
}

// Output is the exact model-facing text of the read.
func (r ReadResult) Output() string {
	if r.media != nil {
		return r.media.output
	}
	return render.ReadOutput(r.Display, r.Window)
}

// Reading is a read whose arguments are valid and whose file is open. Finish
// it with Window or Stream; either closes the file. Close releases it
// without finishing (the transport gave up): it is then counted as aborted.
type Reading struct {
	x      *Executor
	c      Call
	target fs.Target
	file   io.ReadCloser // nil when hit is set
	info   fs.Info
	offset int
	limit  int
	// anchors: the call's dialect shows anchored lines (docs/edits.md,
	// "Anchored lines"); the window's lines carry their tags.
	anchors bool
	closed  bool
	kind    media.Kind // an image or a PDF (extended profile): readMedia answers

	// The read caches (docs/performance.md, "Caches"): hit is this window
	// of this version, already rendered; index lets the window start at
	// the mark nearest its offset; indexer builds that index during a full
	// read of a large file. at is when the version was stat'ed, at the
	// latest (the racy-timestamp rule).
	hit     *cached
	index   *cached
	indexer *render.Indexer
	at      time.Time
}

// Read checks the arguments of a read, resolves and stats its target (one
// provider Stat, plus one for a session cwd) and opens it. A missing target
// is recorded as seen absent for the session.
func (x *Executor) Read(ctx context.Context, c Call, raw []byte) (*Reading, *fault.Error) {
	c = c.started()
	a, err := x.readArgs(raw)
	if err != nil {
		return nil, x.fail(c, ToolRead, err)
	}
	ct, err := x.cwdOf(ctx, c)
	if err != nil {
		return nil, x.fail(c, ToolRead, err)
	}
	// The read's one Stat comes from the walk that resolves the path (no
	// second walk of it). at is taken before it: the racy rule errs on the
	// safe side.
	at := time.Now()
	t, info, serr := x.resolveStat(ctx, "read", a.path, ct.Display)
	if serr != nil {
		return nil, x.fail(c, ToolRead, errorOf(serr))
	}
	switch info.Type {
	case fs.TypeFile:
	case fs.TypeMissing:
		x.storeFailed("observe", x.gateOf(c).ObserveAbsent(c.key(), t.Key))
		return nil, x.fail(c, ToolRead, fault.New(fault.CodeNotFound, render.MsgReadNotFound(t.Display)))
	default:
		return nil, x.fail(c, ToolRead, fault.New(fault.CodeNotRegularFile, render.MsgReadNotRegular(t.Display)))
	}
	anchors := x.DialectOf(c).Anchored()
	if x.cache != nil {
		if e, ok := x.cache.window(info.Version, a.offset, a.limit, x.caps, anchors); ok {
			return &Reading{x: x, c: c, target: t, info: info, offset: a.offset, limit: a.limit, anchors: anchors, hit: e, at: at}, nil
		}
	}
	f, opened, oerr := x.fs.OpenText(ctx, t)
	if oerr != nil {
		if fault.CodeOf(oerr) == fault.CodeNotFound {
			x.storeFailed("observe", x.gateOf(c).ObserveAbsent(c.key(), t.Key)) // deleted since the Stat
		}
		return nil, x.fail(c, ToolRead, errorOf(oerr))
	}
	r := &Reading{x: x, c: c, target: t, file: f, info: opened, offset: a.offset, limit: a.limit, anchors: anchors, at: at, kind: x.sniff(f, opened.Size)}
	if _, seeks := f.(io.ReaderAt); x.cache != nil && seeks && opened.Size >= IndexMinBytes && r.kind == media.KindNone {
		if e, ok := x.cache.index(opened.Version); ok {
			r.index = e
		} else if x.cache.cacheable(opened, at) {
			r.indexer = render.NewIndexer(max(indexEvery, opened.Size/indexMarks), indexMarks)
		}
	}
	return r, nil
}

// Display is the read's DISPLAY path.
func (r *Reading) Display() string { return r.target.Display }

// Close releases the file of a reading that will not be finished.
func (r *Reading) Close() {
	if !r.closed {
		r.closed = true
		if r.file != nil {
			r.file.Close()
		}
		r.x.done(r.c, ToolRead, fault.CodeAborted)
	}
}

// Window reads the whole window: the answer of a non-streamed read.
func (r *Reading) Window(ctx context.Context) (ReadResult, *fault.Error) {
	r.closed = true
	if r.hit != nil {
		r.succeeded(r.hit.window)
		res := r.result(r.hit.window)
		res.hit, res.cache = r.hit, r.x.cache
		return res, nil
	}
	if r.kind != media.KindNone {
		return r.readMedia(ctx)
	}
	defer r.file.Close()
	win, src := r.windower()
	if err := r.feed(ctx, src, win, nil); err != nil {
		return ReadResult{}, r.x.fail(r.c, ToolRead, r.failure(err))
	}
	window, err := r.finish(win)
	if err != nil {
		return ReadResult{}, r.x.fail(r.c, ToolRead, r.failure(err))
	}
	r.succeeded(window)
	return r.result(window), nil
}

// windower starts the window and says where its bytes come from: the
// file from the top, or from the mark of the cached index nearest the
// offset. A full read of a large file feeds the indexer too.
func (r *Reading) windower() (*render.Windower, io.Reader) {
	if r.index != nil {
		at := r.index.index.Seek(r.offset)
		win := render.ResumeWindower(r.offset, r.limit, r.x.caps, at)
		if r.anchors {
			win.Anchor()
		}
		return win, io.NewSectionReader(r.file.(io.ReaderAt), at.Byte, math.MaxInt64-at.Byte)
	}
	win := render.NewWindower(r.offset, r.limit, r.x.caps)
	if r.anchors {
		win.Anchor()
	}
	if r.indexer != nil {
		return win, io.TeeReader(r.file, r.indexer)
	}
	return win, r.file
}

// feed feeds the window; a window read from an index stops as soon as it
// is complete, since the index knows the rest of the file.
func (r *Reading) feed(ctx context.Context, src io.Reader, win *render.Windower, emit func([]render.Line) error) error {
	return feed(ctx, src, win, emit, r.index != nil)
}

// finish closes the window: a window read from an index is stopped, with
// the index's line count.
func (r *Reading) finish(win *render.Windower) (render.Window, error) {
	if r.index != nil && !win.Selecting() {
		return win.Stop(r.index.index.Total)
	}
	return win.Close()
}

func (r *Reading) result(w render.Window) ReadResult {
	lines := w.Lines
	if lines == nil {
		lines = []render.Line{}
	}
	d := r.target.Display
	return ReadResult{Display: d, Window: w, Meta: ReadMetadata{Path: d, Offset: w.Offset, Lines: lines, TotalLines: w.TotalLines, Lang: render.Lang(d)}}
}

// LineSink receives a streamed read. Begin comes once, when the first lines
// of the window are known or the file has ended: before it, a failure is an
// ordinary error answer; after it, the transport must break its transfer so
// the client never takes a failure for a short success.
type LineSink interface {
	// Begin commits the answer and writes the output's opening.
	Begin(header string) error
	// Lines writes numbered lines; the sink flushes them.
	Lines(lines []render.Line) error
	// End writes the output's closing (blank line, footer, </content>).
	End(tail string) error
}

// Stream reads the window into sink, the lines leaving as they are produced
// (docs/api.md, "Streaming reads"). begun reports whether sink.Begin was
// called: when it was, a non-nil error means the transfer must be aborted;
// when not, the error is answered like any other.
func (r *Reading) Stream(ctx context.Context, sink LineSink) (begun bool, _ *fault.Error) {
	r.closed = true
	if r.hit != nil {
		return true, r.streamHit(sink)
	}
	if r.kind != media.KindNone {
		return r.streamMedia(ctx, sink)
	}
	defer r.file.Close()
	win, src := r.windower()

	// Until the first lines are ready, an error is still an ordinary answer.
	var first []render.Line
	err := r.feed(ctx, src, win, func(lines []render.Line) error {
		first = lines
		return errFirstLines
	})
	eof := err == nil
	if err != nil && !errors.Is(err, errFirstLines) {
		return false, r.x.fail(r.c, ToolRead, r.failure(err))
	}
	var window render.Window
	if eof {
		if window, err = r.finish(win); err != nil {
			return false, r.x.fail(r.c, ToolRead, r.failure(err))
		}
		first = win.Ready()
	}
	if err := sink.Begin(render.ReadHeader(r.target.Display)); err != nil {
		return true, r.abort(err)
	}
	if err := sink.Lines(first); err != nil {
		return true, r.abort(err)
	}
	if !eof {
		if err := r.feed(ctx, src, win, sink.Lines); err != nil {
			return true, r.abort(err)
		}
		if window, err = r.finish(win); err != nil {
			return true, r.abort(err)
		}
		if err := sink.Lines(win.Ready()); err != nil {
			return true, r.abort(err)
		}
	}
	if err := sink.End(render.ReadTail(window)); err != nil {
		return true, r.abort(err)
	}
	r.succeeded(window)
	return true, nil
}

var errFirstLines = errors.New("first lines ready")

// streamHit streams a cached window.
func (r *Reading) streamHit(sink LineSink) *fault.Error {
	w := r.hit.window
	if ts, ok := sink.(TextSink); ok {
		b := memoOf(r.x.cache, r.hit, "text", r.target.Display, func() []byte { return []byte(render.ReadOutput(r.target.Display, w)) })
		if err := ts.Text(b); err != nil {
			return r.abort(err)
		}
		r.succeeded(w)
		return nil
	}
	if err := sink.Begin(render.ReadHeader(r.target.Display)); err != nil {
		return r.abort(err)
	}
	if err := sink.Lines(w.Lines); err != nil {
		return r.abort(err)
	}
	if err := sink.End(render.ReadTail(w)); err != nil {
		return r.abort(err)
	}
	r.succeeded(w)
	return nil
}

func (r *Reading) abort(err error) *fault.Error {
	e := r.x.fail(r.c, ToolRead, r.failure(err))
	r.x.log.Info("streamed read aborted", "code", e.Code)
	return e
}

// succeeded records a successful read: the version of the bytes that were
// read, and the footer; and caches what the read computed.
func (r *Reading) succeeded(w render.Window) {
	h := r.contentHash()
	r.store(w, h)
	r.x.storeFailed("observe", r.x.gateOf(r.c).ObservePresent(r.c.key(), r.target.Key, r.info.Version, h))
	r.x.obs.ReadFooter(w.Footer.String())
	if r.c.Span != nil {
		var n int
		for _, l := range w.Lines {
			n += len(l.Text)
		}
		r.c.Span.Read(int64(n))
	}
	r.x.done(r.c, ToolRead, CodeOK)
}

// contentHash is the provider's hash of the version's bytes (docs/edits.md,
// "No false staleness"): the reader's, once it read the whole file, or the
// cache entry's, which the read that made it computed.
func (r *Reading) contentHash() fs.Hash {
	switch {
	case r.hit != nil:
		return r.hit.hash
	case r.index != nil:
		return r.index.hash // the file was read from a mark, not whole
	}
	if ch, ok := r.file.(fs.ContentHasher); ok {
		if h, ok := ch.ContentHash(); ok {
			return h
		}
	}
	return ""
}

// store caches the window of a read that was not a hit, and the index a
// full read built, with the hash of the version, unless the version is
// racy.
func (r *Reading) store(w render.Window, h fs.Hash) {
	c := r.x.cache
	if c == nil || r.hit != nil || !c.cacheable(r.info, r.at) {
		return
	}
	c.putWindow(r.info.Version, r.offset, r.limit, r.x.caps, r.anchors, w, h)
	r.storeIndex(w.TotalLines, h)
}

func (r *Reading) storeIndex(total int, h fs.Hash) {
	if r.indexer != nil {
		r.x.cache.putIndex(r.info.Version, r.indexer.Index(total), h)
		r.indexer = nil
	}
}

// failure maps what can go wrong after the file is open.
func (r *Reading) failure(err error) *fault.Error {
	d := r.target.Display
	var oor *render.OffsetOutOfRangeError
	if errors.As(err, &oor) && r.x.cache != nil && r.x.cache.cacheable(r.info, r.at) {
		r.storeIndex(oor.Total, r.contentHash()) // the whole file was read and passed the checks
	}
	switch {
	case errors.Is(err, render.ErrBinary):
		return fault.New(fault.CodeNotText, render.MsgReadBinary(d))
	case errors.Is(err, render.ErrInvalidUTF8):
		return fault.New(fault.CodeNotText, render.MsgReadInvalidUTF8(d))
	case errors.As(err, &oor):
		return fault.New(fault.CodeNotFound, render.MsgOffsetOutOfRange(oor.Offset, d, oor.Total))
	}
	return errorOf(err)
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// feed copies the file into the windower chunk by chunk (memory is bounded by
// the chunk, never by the file). After each chunk it hands the lines that are
// ready to emit, if emit is set.
// With early, it stops once the window is complete.
func feed(ctx context.Context, f io.Reader, win *render.Windower, emit func([]render.Line) error, early bool) error {
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	buf := *bp
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := win.Write(buf[:n]); werr != nil {
				return werr
			}
			if emit != nil {
				if lines := win.Ready(); len(lines) > 0 {
					if eerr := emit(lines); eerr != nil {
						return eerr
					}
				}
			}
		}
		if err == io.EOF || (early && !win.Selecting()) {
			return nil
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fault.New(fault.CodeAborted, "read aborted")
		}
	}
}
