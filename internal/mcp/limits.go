package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfs/toolfs-api/internal/jsonscan"
	"github.com/toolfs/toolfs-api/internal/render"
)

// MaxBatch is the most messages one JSON-RPC batch may hold (docs/mcp.md,
// "Limits"): the SDK still accepts batches on the revisions before
// 2025-06-18 and holds every answer of one until the last is ready.
const MaxBatch = 16

// answerFraming bounds what a tool result's JSON-RPC envelope adds to its
// texts: jsonrpc, result, content, type, isError (the id echoes the request).
const answerFraming = 256

// errOverBudget answers, inside the SDK, a tool call whose result would
// pass its request's budget (or that was not run because an earlier one
// did). No client sees it: the request is answered with refuseBudget.
var errOverBudget = errors.New("the answers to this request are over their budget")

// batchMessage and budgetMessage are the refusals' texts (docs/mcp.md,
// "Limits").
func batchMessage(n int) string {
	return "batch of " + strconv.Itoa(n) + " messages exceeds the limit of " + strconv.Itoa(MaxBatch)
}

func budgetMessage(limit int64) string {
	return "answers to this request exceed the limit of " + strconv.FormatInt(limit, 10) + " bytes"
}

// refuse answers 400 with a JSON-RPC Invalid Request error whose id is null:
// the refusal is the whole request's, not one message's.
func refuse(w http.ResponseWriter, message string) {
	writeRPCError(w, http.StatusBadRequest, message)
}

// writeRPCError answers status with a JSON-RPC Invalid Request error whose
// id is null.
func writeRPCError(w http.ResponseWriter, status int, message string) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      *int     `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", nil, rpcError{-32600, message}})
	w.Write(b)
}

// readAnswerBound is the most bytes one read answer can take as a JSON-RPC
// result under caps: the shown lines' texts (at most MaxBytes, or the one
// line a window always shows, truncated to MaxLineLength code points of up
// to 4 bytes), a path of up to PATH_MAX, every byte of them escaped at worst
// as \u00XX, the line prefixes, the tags and footer; with structuredContent
// the metadata repeats texts and path.
func readAnswerBound(caps render.Caps, structured bool) int64 {
	text := int64(max(caps.MaxBytes, 4*caps.MaxLineLength+64))
	const path = 4096
	n := 6*(text+path) + 24*int64(caps.Limit) + 1024
	if structured {
		n += 6*(text+path) + 48*int64(caps.Limit)
	}
	return n
}

// defaultBudget is the answer budget of one request: a batch of MaxBatch
// reads fits by construction, with 4 MiB to spare (docs/mcp.md, "Limits").
func defaultBudget(caps render.Caps, structured bool) int64 {
	return MaxBatch*readAnswerBound(caps, structured) + 4<<20
}

// imageAnswerBound is what an image read's picture adds to its answer at
// most (docs/media.md): maxBytes in base64 in the image block, and again in
// the structured content.
func imageAnswerBound(maxBytes int64, structured bool) int64 {
	n := base64Len(int(maxBytes)) + answerFraming
	if structured {
		n *= 2
	}
	return n
}

// base64Len is the length of n bytes in standard base64 with padding.
func base64Len(n int) int64 { return int64(n+2) / 3 * 4 }

// budget counts the answers of one HTTP request against its limit. A nil
// budget has no limit.
type budget struct {
	limit  int64
	used   atomic.Int64
	over   atomic.Bool
	cancel context.CancelCauseFunc // the request's other calls, once over
}

// spent reports whether the request's answers already passed the limit:
// its calls that have not started do not run.
func (b *budget) spent() bool { return b != nil && b.over.Load() }

// charge counts res, and text, its first content's text already encoded
// (nil: none), and reports whether the answers still fit.
func (b *budget) charge(res *sdk.CallToolResult, text []byte) bool {
	if b == nil {
		return true
	}
	n := int64(answerFraming) + rawLen(text)
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			n += encodedLen(c.Text)
		case *sdk.ImageContent:
			n += base64Len(len(c.Data)) + answerFraming
		}
	}
	if raw, ok := res.StructuredContent.(json.RawMessage); ok {
		n += rawLen(raw)
	}
	if b.used.Add(n) > b.limit {
		b.over.Store(true)
		if b.cancel != nil {
			b.cancel(errOverBudget)
		}
		return false
	}
	return true
}

// extra is what encoding/json adds to one byte of a string: the escapes of
// control characters, quote and backslash, and of <, > and & (the SDK does
// not escape them in one answer, but json.Marshal does when it joins a
// batch's answers). A lead byte 0xE2 counts 3, for U+2028 and U+2029, which
// take 6 bytes escaped.
var extra = func() (t [256]int8) {
	for c := range 0x20 {
		t[c] = 5
	}
	t['\n'], t['\r'], t['\t'], t['"'], t['\\'] = 1, 1, 1, 1, 1
	t['<'], t['>'], t['&'] = 5, 5, 5
	t[0xE2] = 3
	return t
}()

// encodedLen is an upper bound on the bytes s takes as a JSON string.
func encodedLen(s string) int64 {
	n := int64(len(s)) + 2
	for i := 0; i < len(s); i++ {
		n += int64(extra[s[i]])
	}
	if !utf8.ValidString(s) { // each invalid byte becomes \ufffd
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				n += 5
			}
		}
	}
	return n
}

// rawLen is an upper bound on the bytes of encoded JSON once a batch's
// json.Marshal has escaped its <, >, & and U+2028/U+2029.
func rawLen(b []byte) int64 {
	n := int64(len(b))
	for _, c := range b {
		switch c {
		case '<', '>', '&':
			n += 5
		case 0xE2:
			n += 3
		}
	}
	return n
}

// request is what readRequest learned of a POST's body.
type request struct {
	batch   int    // the elements of a batch; 0 for one message
	args    []byte // a single tools/call's arguments, lifted out of the body
	writes  bool   // it may call a tool that writes (asked for only)
	traceID string // a single message's params._meta.traceparent's (bodyTraceID)
}

// readRequest reads r's body before the SDK does (it is capped by
// --max-body-bytes, and the SDK reads it whole anyway) and hands the SDK
// what it is to see. A JSON array (a batch) has its elements counted
// (more than MaxBatch is refused). A single tools/call has its arguments
// lifted out (liftArgs). With scoped, the body is also read for a call of
// a tool that writes (callsWritingTool). A body that cannot be read is
// handed on as far as it was read, then its error, which the SDK answers as
// it would have (413 past the cap), running nothing.
func readRequest(r *http.Request, scoped bool) request {
	if r.Body == nil || r.Body == http.NoBody {
		return request{}
	}
	body := r.Body
	buf, err := readBody(body, r.ContentLength)
	if err != nil {
		r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), failing{err}), body}
		return request{}
	}
	r.Body = readCloser{bytes.NewReader(buf), body}
	if scoped && callsWritingTool(buf) {
		return request{writes: true} // refused: nothing more to learn
	}
	var req request
	if i := jsonscan.SkipSpace(buf, 0); i < len(buf) && buf[i] == '[' {
		req.batch = batchLen(buf)
		return req
	}
	if spliced, lifted, ok := liftArgs(buf); ok {
		buf, req.args = spliced, lifted
		r.ContentLength = int64(len(buf))
	}
	req.traceID = bodyTraceID(buf) // after the lift: the arguments are not scanned
	r.Body = readCloser{bytes.NewReader(buf), body}
	return req
}

// readBody reads body whole. A declared length (the MaxBytesReader around
// body still caps it) sizes the buffer once: io.ReadAll's doubling left
// about twice a 60 KiB write's bytes as garbage per call
// (docs/performance.md, "MCP at the speed of REST").
func readBody(body io.Reader, length int64) ([]byte, error) {
	const most = 64 << 20 // a larger declared length grows as it arrives
	if length <= 0 || length > most {
		return io.ReadAll(body)
	}
	buf := make([]byte, 0, length+1) // +1: the read that sees EOF
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) { // longer than declared: net/http refuses it, but do not rely on it
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// batchLen is the number of elements of the JSON array b, counted from its
// nesting and strings without decoding them (the SDK decodes the body once
// this check passed; a malformed one it refuses).
func batchLen(b []byte) int {
	depth, n := 0, 0
	inString, escaped, counted := false, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if depth == 1 {
			switch c {
			case ',':
				counted = false
				continue
			case ']':
				return n
			}
			if !counted {
				counted = true
				n++
			}
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		}
	}
	return n
}

// answerWriter is what the SDK answers a POST through. Until the SDK writes,
// nothing is sent; if by then the request's answers passed their budget,
// what the SDK writes is dropped and finish sends the refusal instead. With
// JSON answers the SDK writes once, when the last answer is ready.
type answerWriter struct {
	http.ResponseWriter
	b     *budget
	texts *held // spliced into what the SDK writes
	mu    sync.Mutex
	state answerState
}

type answerState int

const (
	undecided answerState = iota
	passing               // the SDK's answer goes out
	dropped               // the SDK's answer is dropped; finish refuses
	finished              // served: anything written later is dropped
)

// pass decides, at the SDK's first write, whether its answer goes out.
func (w *answerWriter) pass() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == undecided {
		w.state = passing
		if w.b.spent() {
			w.state = dropped
		}
	}
	return w.state == passing
}

func (w *answerWriter) WriteHeader(code int) {
	if w.pass() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *answerWriter) Write(p []byte) (int, error) {
	if w.pass() {
		if _, err := w.ResponseWriter.Write(w.texts.splice(p)); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (w *answerWriter) Flush() {
	if w.pass() {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish sends the budget's refusal when the SDK's answer was dropped, or
// when the SDK wrote nothing at all for a request over its budget.
func (w *answerWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == dropped || (w.state == undecided && w.b.spent()) {
		refuse(w.ResponseWriter, budgetMessage(w.b.limit))
	}
	w.state = finished
}
