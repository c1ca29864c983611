package handlers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// rest serves the routes of api/openapi.yaml: each tool route turns the
// request into a tools.Call and the raw body, runs the executor, and writes
// its result or error. It holds no tool logic.
type rest struct {
	x        *tools.Executor
	cfg      Config
	deps     Deps
	sessions sessionHeaders
	version  string // of api/openapi.yaml
	specJSON []byte // GET /openapi-full.json
	// The tokens DecideApproval tells apart.
	token         string // --token
	approverToken string // --approver-token
}

var _ api.ServerInterface = (*rest)(nil)

// msgContentType refuses a tool body not sent as JSON (docs/api.md,
// "Request bodies").
const msgContentType = "request body must be JSON (Content-Type: application/json)"

// body reads a tool's JSON body whole (bodyCap bounds it). The executor
// decodes it, once, with every check of the arguments; here only the
// transport's own refusals: too large, broken off, not sent as JSON. An
// empty body goes to the executor, which refuses it as any non-object.
func (s *rest) body(r *http.Request) ([]byte, *fault.Error) {
	var raw []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= s.cfg.MaxBodyBytes {
		raw = bodies.get(n)
		_, err = io.ReadFull(r.Body, raw)
	} else {
		raw, err = io.ReadAll(r.Body)
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, fault.New(fault.CodeBodyTooLarge, bodyTooLargeMessage(mbe.Limit))
	case err != nil:
		return nil, tools.BodyIncomplete()
	case len(bytes.TrimSpace(raw)) == 0:
		return raw, nil
	}
	if err := jsonContentType(r.Header.Values("Content-Type")); err != nil {
		return nil, err
	}
	return raw, nil
}

// jsonContentType refuses a body not sent as application/json, and one
// whose Content-Type does not parse (RFC 9110 §8.3): a media type that
// another reader might take for JSON must not skip the strict checks.
func jsonContentType(values []string) *fault.Error {
	if len(values) != 1 {
		return fault.New(fault.CodeInvalidArgument, msgContentType)
	}
	if values[0] == "application/json" {
		return nil // what clients send; ParseMediaType would allocate to agree
	}
	mt, _, err := mime.ParseMediaType(values[0])
	if err != nil {
		return fault.New(fault.CodeInvalidArgument, "malformed Content-Type "+render.Quote(values[0])+
			": it must parse as a media type (RFC 9110 §8.3); send Content-Type: application/json")
	}
	if mt != "application/json" {
		return fault.New(fault.CodeInvalidArgument, msgContentType)
	}
	return nil
}

func bodyTooLargeMessage(limit int64) string {
	return "request body is larger than the " + strconv.FormatInt(limit, 10) + "-byte limit"
}

// ReadTool serves POST /tools/read, as JSON or, with Accept: text/plain, as
// a streamed text body.
func (s *rest) ReadTool(w http.ResponseWriter, r *http.Request) {
	rd, terr := s.read(r)
	if terr != nil {
		writeError(w, terr)
		return
	}
	if prefersText(r.Header.Get("Accept")) {
		s.stream(w, r.Context(), rd)
		return
	}
	res, terr := rd.Window(r.Context())
	if terr != nil {
		writeError(w, terr)
		return
	}
	if res.IsMedia() { // an image or PDF (docs/media.md): not a text window
		writeJSON(w, http.StatusOK, "application/json", tools.Result{Output: res.Output(), Metadata: res.Meta})
		return
	}
	if b, ok := res.Memo("rest json", func() []byte { return readResult{res}.appendJSON(nil) }); ok {
		writeBytes(w, http.StatusOK, "application/json", b)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", readResult{res})
}

// read starts the read of a request: its body, then the executor.
func (s *rest) read(r *http.Request) (*tools.Reading, *fault.Error) {
	c := callOf(r.Context())
	raw, terr := s.body(r)
	if terr != nil {
		s.x.Refuse(c, tools.ToolRead, terr)
		return nil, terr
	}
	return s.x.Read(r.Context(), c, raw)
}

// stream answers a read as a chunked text/plain body (docs/api.md,
// "Streaming reads"). A failure after the first bytes left breaks the
// transfer, so the client never mistakes it for a short success.
func (s *rest) stream(w http.ResponseWriter, ctx context.Context, rd *tools.Reading) {
	out := &lineWriter{w: w, rc: http.NewResponseController(w), window: s.cfg.StreamWriteWindow}
	begun, terr := rd.Stream(ctx, out)
	switch {
	case terr == nil:
	case !begun:
		writeError(w, terr)
	default:
		panic(http.ErrAbortHandler)
	}
}

// WriteTool serves POST /tools/write.
func (s *rest) WriteTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolWrite, s.x.Write)
}

// EditTool serves POST /tools/edit.
func (s *rest) EditTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolEdit, s.x.Edit)
}

// ApplyPatchTool serves POST /tools/apply_patch (extended profile only).
func (s *rest) ApplyPatchTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolApplyPatch, s.x.ApplyPatch)
}

// EditLinesTool serves POST /tools/edit_lines (extended profile only).
func (s *rest) EditLinesTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolEditLines, s.x.EditLines)
}

// MoveTool serves POST /tools/move (extended profile only).
func (s *rest) MoveTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolMove, s.x.Move)
}

// ModelMove serves POST /model/move (extended profile only).
func (s *rest) ModelMove(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolMove)
}

// DeleteTool serves POST /tools/delete (extended profile only).
func (s *rest) DeleteTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolDelete, s.x.DeleteTool)
}

// ModelDelete serves POST /model/delete (extended profile only).
func (s *rest) ModelDelete(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolDelete)
}

// MkdirTool serves POST /tools/mkdir (extended profile only).
func (s *rest) MkdirTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolMkdir, s.x.Mkdir)
}

// ModelMkdir serves POST /model/mkdir (extended profile only).
func (s *rest) ModelMkdir(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolMkdir)
}

// GlobTool serves POST /tools/glob.
func (s *rest) GlobTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolGlob, s.x.Glob)
}

// GrepTool serves POST /tools/grep.
func (s *rest) GrepTool(w http.ResponseWriter, r *http.Request) {
	s.call(w, r, tools.ToolGrep, s.x.Grep)
}

// runFunc is one of the executor's tool calls other than read.
type runFunc func(context.Context, tools.Call, []byte) (tools.Result, *fault.Error)

// call answers a call as JSON. A tool the server's profile does not offer
// has no endpoint (404), as on /model (docs/api.md).
func (s *rest) call(w http.ResponseWriter, r *http.Request, tool string, run runFunc) {
	if !s.x.Offers(tool) {
		noSuchEndpoint(w, r)
		return
	}
	res, terr := s.run(r, tool, run)
	if terr != nil {
		writeError(w, terr)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", res)
}

// run reads a request's body and runs the call. The body's buffer is
// recycled when the call returns: the executor copies every argument it
// keeps, and a read's window is rendered within Run.
func (s *rest) run(r *http.Request, tool string, run runFunc) (tools.Result, *fault.Error) {
	c := callOf(r.Context())
	raw, terr := s.body(r)
	if terr != nil {
		s.x.Refuse(c, tool, terr)
		return tools.Result{}, terr
	}
	defer bodies.put(raw)
	return run(r.Context(), c, raw)
}

// bodies recycles the buffers of tool bodies up to maxPooledBody bytes: a
// 60 KiB write's body was a quarter of what the call allocated, and garbage
// is what the collector's cycles cost (docs/performance.md, section 5).
var bodies bodyBuffers

const maxPooledBody = 1 << 20

type bodyBuffers struct{ p sync.Pool }

// get returns a buffer of n bytes.
func (b *bodyBuffers) get(n int64) []byte {
	if n <= maxPooledBody {
		if p, ok := b.p.Get().(*[]byte); ok && int64(cap(*p)) >= n {
			return (*p)[:n]
		}
	}
	return make([]byte, n)
}

// put takes back a buffer nothing refers to any more.
func (b *bodyBuffers) put(raw []byte) {
	if c := cap(raw); c > 0 && c <= maxPooledBody {
		b.p.Put(&raw)
	}
}

// ModelRead serves POST /model/read. A read is answered whole, never
// streamed, so a late failure keeps its status (docs/api.md, "Model text
// answers").
func (s *rest) ModelRead(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolRead)
}

// ModelWrite serves POST /model/write.
func (s *rest) ModelWrite(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolWrite)
}

// ModelEdit serves POST /model/edit.
func (s *rest) ModelEdit(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolEdit)
}

// ModelApplyPatch serves POST /model/apply_patch (extended profile only).
func (s *rest) ModelApplyPatch(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolApplyPatch)
}

// ModelEditLines serves POST /model/edit_lines (extended profile only).
func (s *rest) ModelEditLines(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolEditLines)
}

// ModelGlob serves POST /model/glob.
func (s *rest) ModelGlob(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolGlob)
}

// ModelGrep serves POST /model/grep.
func (s *rest) ModelGrep(w http.ResponseWriter, r *http.Request) {
	s.model(w, r, tools.ToolGrep)
}

// model answers a call with its model text alone, through the executor's
// one entry of text transports; modelText made every failure text. A tool
// the profile does not offer has no endpoint (404).
func (s *rest) model(w http.ResponseWriter, r *http.Request, tool string) {
	if !s.x.Offers(tool) {
		noSuchEndpoint(w, r)
		return
	}
	res, terr := s.run(r, tool, func(ctx context.Context, c tools.Call, raw []byte) (tools.Result, *fault.Error) {
		return s.x.Run(ctx, c, tool, raw)
	})
	if terr != nil {
		writeError(w, terr)
		return
	}
	writeText(w, http.StatusOK, res.Output)
}

// ListTools serves GET /tools: the catalog, or with ?format= the tools in
// an ecosystem's shape (an empty format counts as absent).
func (s *rest) ListTools(w http.ResponseWriter, r *http.Request, p api.ListToolsParams) {
	format := ""
	if p.Format != nil {
		format = string(*p.Format)
	}
	dialect, terr := dialectOf(r)
	if terr != nil {
		writeError(w, terr)
		return
	}
	body, terr := catalogIn(format, s.x.CatalogIn(dialect).Allowed(canWrite(r)))
	if terr != nil {
		writeError(w, terr)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", body)
}

// DeleteSession serves DELETE /sessions/{id}: 204 whether or not it existed.
func (s *rest) DeleteSession(w http.ResponseWriter, r *http.Request, id string) {
	if !render.ValidSessionID(id) {
		writeProblem(w, fault.CodeInvalidSession, "malformed session id: it must be "+render.SessionIDRule)
		return
	}
	c := sessionCaller(r)
	c.Session = id
	if err := s.x.ForgetSession(c); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Healthz serves GET /healthz.
func (s *rest) Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, "application/json", api.Health{Status: "ok"})
}

// Readyz serves GET /readyz: 200 while every configured dependency can
// serve, else 503 NOT_READY with the reasons (docs/deployment.md,
// "Readiness"). The causes are logged by the checker, never sent.
func (s *rest) Readyz(w http.ResponseWriter, _ *http.Request) {
	if s.deps.Ready != nil {
		if ok, reason := s.deps.Ready(); !ok {
			writeProblem(w, fault.CodeNotReady, "not ready: "+reason)
			return
		}
	}
	writeJSON(w, http.StatusOK, "application/json", api.Health{Status: "ok"})
}

// GetStatus serves GET /status: what the console's state screen shows
// (docs/console.md, "Server state").
func (s *rest) GetStatus(w http.ResponseWriter, _ *http.Request) {
	st := api.Status{
		Version: s.cfg.Version, Ready: true, Profile: api.StatusProfile(s.cfg.Profile),
		Dialect: s.cfg.Dialect, SandboxMode: api.StatusSandboxMode(s.cfg.SandboxMode),
	}
	if s.deps.Ready != nil {
		if ok, reason := s.deps.Ready(); !ok {
			st.Ready, st.Reason = false, &reason
		}
	}
	if s.deps.Sessions != nil {
		if n := s.deps.Sessions(); n >= 0 {
			st.Sessions = &n
		}
	}
	writeJSON(w, http.StatusOK, "application/json", st)
}

// prefersText reports whether the first of the listed media types that we
// serve is text/plain. Quality values are not ranked: clients that stream
// send Accept: text/plain.
func prefersText(accept string) bool {
	for rest := accept; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, ",")
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "text/plain", "text/*":
			return true
		case "application/json", "application/*", "*/*":
			return false
		}
	}
	return false
}

// lineWriter is the tools.LineSink of a streamed read: it batches lines
// into a buffer and flushes after each batch, giving every flush its own
// write deadline so a client that stops reading cannot pin the goroutine
// and the open file.
type lineWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	bw     *bufio.Writer
	window time.Duration
	num    []byte // scratch for a line's number prefix
}

var _ tools.TextSink = (*lineWriter)(nil)

func (o *lineWriter) Begin(header string) error {
	o.commit()
	o.bw = bufio.NewWriterSize(o.w, 32<<10)
	_, err := o.bw.WriteString(header)
	return err
}

func (o *lineWriter) commit() {
	// Canonical keys and shared values: Set would canonicalize and
	// allocate on every read.
	h := o.w.Header()
	h["Content-Type"] = textType
	h["X-Accel-Buffering"] = accelNo // nginx: pass each chunk on at once
	h["Cache-Control"] = noStore
	o.w.WriteHeader(http.StatusOK)
}

// The streamed answer's header values. Each slice's capacity is its
// length, so an Add elsewhere copies instead of writing into it.
var (
	textType = []string{"text/plain; charset=utf-8"}
	accelNo  = []string{"no"}
	noStore  = []string{"no-store"}
)

// Text writes a cached window's whole answer (tools.TextSink). It does not
// flush: the handler returns at once, and net/http then sends what is left
// together with the closing chunk, one write(2) instead of two.
func (o *lineWriter) Text(b []byte) error {
	o.commit()
	if o.window > 0 {
		o.rc.SetWriteDeadline(time.Now().Add(o.window))
	}
	_, err := o.w.Write(b)
	return err
}

func (o *lineWriter) Lines(lines []render.Line) error {
	if o.window > 0 {
		o.rc.SetWriteDeadline(time.Now().Add(o.window))
	}
	for _, l := range lines {
		// "<number>: <text>\n" (render.ReadOutput), without building a
		// string per line.
		o.num = render.AppendLinePrefix(o.num[:0], l)
		o.bw.Write(o.num)
		o.bw.WriteString(l.Text)
		if err := o.bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	return o.flush()
}

func (o *lineWriter) End(tail string) error {
	o.bw.WriteString(tail)
	return o.flush()
}

func (o *lineWriter) flush() error {
	if err := o.bw.Flush(); err != nil {
		return err
	}
	return o.rc.Flush()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
