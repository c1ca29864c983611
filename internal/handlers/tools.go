package handlers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
)

// executor is the tool executor between the generated handlers and the
// layers: it validates arguments, resolves paths, asks the policy for the
// intent of each mutation, calls the provider, and turns results into output
// and metadata. It makes exactly one Stat per read and none per write or edit.
type executor struct {
	cfg Config
	Deps
}

var _ api.StrictServerInterface = (*executor)(nil)

type readMetadata struct {
	Path       string        `json:"path"`
	Offset     int           `json:"offset"`
	Lines      []render.Line `json:"lines"`
	TotalLines int           `json:"totalLines"`
	Lang       string        `json:"lang,omitempty"`
}

type writeMetadata struct {
	Operation fs.Operation  `json:"operation"`
	Diffs     []render.Diff `json:"diffs"`
}

type editMetadata struct {
	Diffs []render.Diff `json:"diffs"`
}

type result struct {
	Output   string `json:"output"`
	Metadata any    `json:"metadata"`
}

// ReadTool serves POST /tools/read, as JSON or as a streamed text body.
func (x *executor) ReadTool(ctx context.Context, req api.ReadToolRequestObject) (api.ReadToolResponseObject, error) {
	start := time.Now()
	c := callFrom(ctx)
	rd, terr := x.openRead(ctx, c, req.Body)
	if terr != nil {
		return x.fail("read", start, terr), nil
	}
	if c.wantText {
		return streamedRead{x: x, ctx: ctx, c: c, read: rd, start: start}, nil
	}
	defer rd.file.Close()
	win := render.NewWindower(rd.offset, rd.limit, x.cfg.Caps)
	if err := feed(ctx, rd.file, win, nil); err != nil {
		return x.fail("read", start, x.readFailure(rd.target, err)), nil
	}
	window, err := win.Close()
	if err != nil {
		return x.fail("read", start, x.readFailure(rd.target, err)), nil
	}
	x.readDone(c, rd, window, start)
	return ok(readResult{display: rd.target.Display, window: window, meta: readMeta(rd.target, window)}), nil
}

// reading is a read whose arguments are valid and whose file is open.
type reading struct {
	target fs.Target
	file   io.ReadCloser
	info   fs.Info
	offset int
	limit  int
}

func (x *executor) openRead(ctx context.Context, c call, body *api.ReadRequest) (*reading, *toolError) {
	path, terr := filePathArg(body.FilePath)
	if terr != nil {
		return nil, terr
	}
	offset, terr := positiveInt(body.Offset, 1, render.MsgOffset)
	if terr != nil {
		return nil, terr
	}
	limit, terr := positiveInt(body.Limit, x.cfg.Caps.Limit, render.MsgLimit)
	if terr != nil {
		return nil, terr
	}
	if limit > x.cfg.Caps.Limit {
		return nil, argError(render.MsgLimitMax(x.cfg.Caps.Limit))
	}
	t, terr := x.target(ctx, c, "read", path)
	if terr != nil {
		return nil, terr
	}
	x.Metrics.statCalls.Inc()
	info, err := x.FS.Stat(ctx, t)
	if err != nil {
		return nil, x.fsFailure(err)
	}
	switch info.Type {
	case fs.TypeFile:
	case fs.TypeMissing:
		x.storeFailed("observe", x.Gate.ObserveAbsent(c.session, t.Key))
		return nil, &toolError{code: string(fs.CodeNotFound), message: render.MsgReadNotFound(t.Display)}
	default:
		return nil, &toolError{code: string(fs.CodeNotRegularFile), message: render.MsgReadNotRegular(t.Display)}
	}
	f, opened, err := x.FS.OpenText(ctx, t)
	if err != nil {
		if fs.CodeOf(err) == fs.CodeNotFound {
			x.storeFailed("observe", x.Gate.ObserveAbsent(c.session, t.Key)) // deleted since the Stat
		}
		return nil, x.fsFailure(err)
	}
	return &reading{target: t, file: f, info: opened, offset: offset, limit: limit}, nil
}

// readDone records a successful read: the version of the bytes that were
// read, and the footer.
func (x *executor) readDone(c call, rd *reading, window render.Window, start time.Time) {
	x.storeFailed("observe", x.Gate.ObservePresent(c.session, rd.target.Key, rd.info.Version))
	x.Metrics.readFooters.WithLabelValues(window.Footer.String()).Inc()
	x.done("read", start, "ok")
}

func readMeta(t fs.Target, w render.Window) readMetadata {
	lines := w.Lines
	if lines == nil {
		lines = []render.Line{}
	}
	return readMetadata{Path: t.Display, Offset: w.Offset, Lines: lines, TotalLines: w.TotalLines, Lang: render.Lang(t.Display)}
}

// readFailure maps what can go wrong after the file is open.
func (x *executor) readFailure(t fs.Target, err error) *toolError {
	var oor *render.OffsetOutOfRangeError
	switch {
	case errors.Is(err, render.ErrBinary):
		return &toolError{code: string(fs.CodeNotText), message: render.MsgReadBinary(t.Display)}
	case errors.Is(err, render.ErrInvalidUTF8):
		return &toolError{code: string(fs.CodeNotText), message: render.MsgReadInvalidUTF8(t.Display)}
	case errors.As(err, &oor):
		return &toolError{code: string(fs.CodeNotFound), message: render.MsgOffsetOutOfRange(oor.Offset, t.Display, oor.Total)}
	}
	return x.fsFailure(err)
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// feed copies the file into the windower chunk by chunk (memory is bounded by
// the chunk, never by the file). After each chunk it hands the lines that are
// ready to emit, if emit is set.
func feed(ctx context.Context, f io.Reader, win *render.Windower, emit func([]render.Line) error) error {
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
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fs.NewError(fs.CodeAborted, "read aborted")
		}
	}
}

// WriteTool serves POST /tools/write.
func (x *executor) WriteTool(ctx context.Context, req api.WriteToolRequestObject) (api.WriteToolResponseObject, error) {
	start := time.Now()
	c := callFrom(ctx)
	path, terr := filePathArg(req.Body.FilePath)
	var t fs.Target
	if terr == nil {
		t, terr = x.mutationTarget(ctx, c, "write", path)
	}
	if terr != nil {
		return x.fail("write", start, terr), nil
	}
	intent, err := x.Gate.WriteIntent(c.session, t)
	if err != nil {
		x.storeFailed("decide", err)
		return x.fail("write", start, x.mutationFailure("write", err)), nil
	}
	out, err := x.FS.WriteText(ctx, t, []byte(req.Body.Content), intent)
	if err != nil {
		return x.fail("write", start, x.mutationFailure("write", err)), nil
	}
	x.storeFailed("observe", x.Gate.ObservePresent(c.session, t.Key, out.Version))
	x.done("write", start, "ok")
	return ok(result{
		Output:   render.WriteOutput(t.Display, out.Operation == fs.OpCreate),
		Metadata: writeMetadata{Operation: out.Operation, Diffs: diffsOf(req.Body.FilePath, out.Before, &out.After)},
	}), nil
}

// EditTool serves POST /tools/edit.
func (x *executor) EditTool(ctx context.Context, req api.EditToolRequestObject) (api.EditToolResponseObject, error) {
	start := time.Now()
	c := callFrom(ctx)
	b := req.Body
	replaceAll := b.ReplaceAll != nil && *b.ReplaceAll
	path, terr := filePathArg(b.FilePath)
	switch {
	case terr != nil:
	case b.OldString == "":
		terr = argError(render.MsgOldString)
	case b.OldString == b.NewString:
		terr = argError(render.MsgStringsEqual)
	}
	var t fs.Target
	if terr == nil {
		t, terr = x.mutationTarget(ctx, c, "edit", path)
	}
	if terr != nil {
		return x.fail("edit", start, terr), nil
	}
	guard, err := x.Gate.EditGuard(c.session, t)
	if err != nil {
		x.storeFailed("decide", err)
		return x.fail("edit", start, x.mutationFailure("edit", err)), nil
	}
	out, err := x.FS.EditText(ctx, t, fs.EditRequest{OldString: b.OldString, NewString: b.NewString, ReplaceAll: replaceAll}, guard)
	if err != nil {
		return x.fail("edit", start, x.mutationFailure("edit", err)), nil
	}
	x.storeFailed("observe", x.Gate.ObservePresent(c.session, t.Key, out.Version))
	x.done("edit", start, "ok")
	return ok(result{
		Output:   render.EditOutput(t.Display, replaceAll),
		Metadata: editMetadata{Diffs: diffsOf(b.FilePath, out.Before, out.After)},
	}), nil
}

// GlobTool serves POST /tools/glob.
func (x *executor) GlobTool(ctx context.Context, req api.GlobToolRequestObject) (api.GlobToolResponseObject, error) {
	return x.search(ctx, "glob", func(cwd fs.Target) (search.Result, error) {
		return x.Search.Glob(ctx, x.FS, cwd, req.Body.Pattern, req.Body.Path)
	}), nil
}

// GrepTool serves POST /tools/grep.
func (x *executor) GrepTool(ctx context.Context, req api.GrepToolRequestObject) (api.GrepToolResponseObject, error) {
	return x.search(ctx, "grep", func(cwd fs.Target) (search.Result, error) {
		return x.Search.Grep(ctx, x.FS, cwd, req.Body.Pattern, req.Body.Path, req.Body.Include)
	}), nil
}

func (x *executor) search(ctx context.Context, tool string, run func(cwd fs.Target) (search.Result, error)) response {
	start := time.Now()
	if x.Search == nil || !x.Search.Available() {
		return x.fail(tool, start, &toolError{code: "SEARCH_FAILED",
			message: tool + " could not start its search command (ripgrep launch failed)"})
	}
	cwd, terr := x.cwd(ctx, callFrom(ctx))
	if terr != nil {
		return x.fail(tool, start, terr)
	}
	res, err := run(cwd)
	if err != nil {
		var se *search.Error
		if errors.As(err, &se) {
			return x.fail(tool, start, &toolError{code: se.Code, message: se.Message})
		}
		return x.fail(tool, start, x.fsFailure(err))
	}
	x.done(tool, start, "ok")
	return ok(result{Output: res.Output, Metadata: res.Metadata})
}

// ListTools serves GET /tools.
// Without ripgrep, glob and grep leave the tool list and are named under
// "unavailable", so a frontend never offers a model a tool that cannot run.
func (x *executor) ListTools(context.Context, api.ListToolsRequestObject) (api.ListToolsResponseObject, error) {
	searchable := x.Search != nil && x.Search.Available()
	c := catalog{Tools: render.Catalog(x.cfg.Caps.Limit, searchable)}
	if !searchable {
		const reason = "ripgrep (rg) was not found at start-up; install it or set --rg-path"
		c.Unavailable = []unavailableTool{{"glob", reason}, {"grep", reason}}
	}
	return ok(c), nil
}

type catalog struct {
	Tools       []render.Tool     `json:"tools"`
	Unavailable []unavailableTool `json:"unavailable,omitempty"`
}

type unavailableTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// DeleteSession serves DELETE /sessions/{id}: 204 whether or not it existed.
func (x *executor) DeleteSession(_ context.Context, req api.DeleteSessionRequestObject) (api.DeleteSessionResponseObject, error) {
	if _, err := x.Gate.Forget(req.Id); err != nil {
		x.storeFailed("forget", err)
		return failure(&toolError{code: string(policy.CodeUnavailable),
			message: "cannot forget the session: the session store is unavailable; retry shortly"}), nil
	}
	return response{status: 204}, nil
}

// Healthz serves GET /healthz.
func (x *executor) Healthz(context.Context, api.HealthzRequestObject) (api.HealthzResponseObject, error) {
	return ok(map[string]string{"status": "ok"}), nil
}

// mutationTarget resolves the target of a write or edit, whose session is
// required while the policy is on (arguments are checked first, SPEC §3).
func (x *executor) mutationTarget(ctx context.Context, c call, op, path string) (fs.Target, *toolError) {
	if x.cfg.PolicyOn && c.session == "" {
		return fs.Target{}, sessionError("X-Session-ID is required on write and edit: the read-before-write policy tracks what each session has read")
	}
	return x.target(ctx, c, op, path)
}

// diffsOf is the hunks between the provider's diff bases; none when it
// declined one (a create, or text it would not hold in memory).
func diffsOf(path string, before, after *string) []render.Diff {
	if before == nil || after == nil {
		return []render.Diff{}
	}
	return render.Diffs(path, *before, *after)
}

// cwd is the session's working directory: the root, or X-Session-Cwd when it
// names an existing folder inside the root.
func (x *executor) cwd(ctx context.Context, c call) (fs.Target, *toolError) {
	p := "."
	if c.cwd != nil {
		p = *c.cwd
	}
	t, err := x.FS.Resolve(ctx, "read", p, "")
	if err == nil {
		var info fs.Info
		info, err = x.FS.Stat(ctx, t)
		if err == nil && info.Type != fs.TypeDirectory {
			err = errors.New("not a folder")
		}
	}
	if err != nil {
		return fs.Target{}, sessionError("X-Session-Cwd " + quote(p) + " is not an existing folder inside the workspace root")
	}
	return t, nil
}

// target resolves a tool's file_path against the session cwd.
func (x *executor) target(ctx context.Context, c call, op, path string) (fs.Target, *toolError) {
	cwd := ""
	if c.cwd != nil {
		ct, terr := x.cwd(ctx, c)
		if terr != nil {
			return fs.Target{}, terr
		}
		cwd = ct.Display
	}
	t, err := x.FS.Resolve(ctx, op, path, cwd)
	if err != nil {
		return fs.Target{}, x.fsFailure(err)
	}
	return t, nil
}

// fsFailure keeps an *fs.Error's code and message; anything else is an
// internal fault whose cause is logged, not sent.
func (x *executor) fsFailure(err error) *toolError {
	var fe *fs.Error
	if errors.As(err, &fe) {
		if fe.Err != nil {
			x.Logger.Debug("fs error", "code", fe.Code, "cause", fe.Err)
		}
		return &toolError{code: string(fe.Code), message: fe.Message}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &toolError{code: string(fs.CodeAborted), message: "aborted"}
	}
	x.Logger.Error("unexpected error", "err", err)
	return &toolError{code: string(fs.CodeIO), message: "internal I/O error"}
}

// mutationFailure adds the remedy the model needs after a refused write or
// edit (SPEC §4) and counts stale versions.
func (x *executor) mutationFailure(tool string, err error) *toolError {
	terr := x.fsFailure(err)
	if terr.code == string(fs.CodeStaleVersion) {
		x.Metrics.staleVersions.WithLabelValues(tool).Inc()
	}
	terr.message += render.Remedy(terr.code)
	return terr
}

// storeFailed logs and counts a session store failure (nil and the policy's
// own refusals, such as FS_NOT_OBSERVED, are not failures). A lost
// observation fails closed: the session must read again (docs/deployment.md).
func (x *executor) storeFailed(op string, err error) {
	if err == nil || !errors.Is(err, policy.ErrUnavailable) {
		return
	}
	x.Metrics.storeErrors.WithLabelValues(op).Inc()
	x.Logger.Warn("session store unavailable", "op", op, "err", err)
}

func (x *executor) fail(tool string, start time.Time, terr *toolError) response {
	x.done(tool, start, terr.code)
	return failure(terr)
}

func (x *executor) done(tool string, start time.Time, code string) {
	x.Metrics.toolCalls.WithLabelValues(tool, code).Inc()
	x.Metrics.toolDuration.WithLabelValues(tool).Observe(time.Since(start).Seconds())
}

// countRejected counts a tool call the validator refused before it reached
// the executor.
func (x *executor) countRejected(r *http.Request, code string) {
	switch tool := toolOf(r); tool {
	case "read", "write", "edit", "glob", "grep":
		x.Metrics.toolCalls.WithLabelValues(tool, code).Inc()
	}
}

func quote(s string) string {
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return `"` + s + `"`
}
