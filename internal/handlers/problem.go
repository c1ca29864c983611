package handlers

import (
	"io"
	"net/http"
	"strconv"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// statusByCode is the one table that maps a stable code to its HTTP status
// (docs/api.md, "Errors"). Unknown codes are 500.
var statusByCode = map[fault.Code]int{
	fault.CodeInvalidArgument:      http.StatusBadRequest,
	fault.CodeInvalidSession:       http.StatusBadRequest,
	fault.CodeSearchInvalidPattern: http.StatusBadRequest,
	fault.CodeUnauthorized:         http.StatusUnauthorized,
	fault.CodeSandboxDenied:        http.StatusForbidden,
	fault.CodeEscalationDenied:     http.StatusForbidden,
	// MCP alone answers it (an input_required result); REST never asks a
	// client's user, so this row only keeps the table whole.
	fault.CodeInputRequired:      http.StatusForbidden,
	fault.CodeNotApprover:        http.StatusForbidden,
	fault.CodeInsufficientScope:  http.StatusForbidden,
	fault.CodeApprovalNotFound:   http.StatusNotFound,
	fault.CodeApprovalNotPending: http.StatusConflict,
	// Approvals are bounded (--max-approvals); retry once some are decided.
	fault.CodeTooManyApprovals: http.StatusServiceUnavailable,
	fault.CodePermission:       http.StatusForbidden,
	fault.CodeForbiddenHost:    http.StatusForbidden,
	fault.CodeNotFound:         http.StatusNotFound,
	fault.CodeNoSuchEndpoint:   http.StatusNotFound,
	fault.CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	fault.CodeStaleVersion:     http.StatusConflict,
	fault.CodeNotObserved:      http.StatusConflict,
	fault.CodeAlreadyExists:    http.StatusConflict,
	fault.CodeNotEmpty:         http.StatusConflict,
	fault.CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	// An upload under --upload-min-rate (docs/files.md, "Slow uploads").
	fault.CodeBodyTooSlow: http.StatusRequestTimeout,
	// PUT and DELETE /files without If-Match (docs/files.md).
	fault.CodePreconditionRequired: http.StatusPreconditionRequired,
	fault.CodeNotText:              http.StatusUnprocessableEntity,
	fault.CodeNotRegularFile:       http.StatusUnprocessableEntity,
	fault.CodeEditNotFound:         http.StatusUnprocessableEntity,
	fault.CodeAmbiguousEdit:        http.StatusUnprocessableEntity,
	fault.CodeNotDirectory:         http.StatusUnprocessableEntity,
	fault.CodeTooLarge:             http.StatusUnprocessableEntity,
	fault.CodeNotRevertible:        http.StatusUnprocessableEntity,
	fault.CodeSearchOverflow:       http.StatusUnprocessableEntity,
	fault.CodeIO:                   http.StatusInternalServerError,
	fault.CodeInternal:             http.StatusInternalServerError,
	fault.CodeSearchFailed:         http.StatusInternalServerError,
	// Writes and edits wait for the session store (docs/deployment.md).
	fault.CodeSessionStoreUnavailable: http.StatusServiceUnavailable,
	// GET /events past --events-max-subscribers (docs/events.md).
	fault.CodeTooManySubscribers: http.StatusServiceUnavailable,
	fault.CodeNotReady:           http.StatusServiceUnavailable,
	fault.CodeAuditUnavailable:   http.StatusServiceUnavailable,
	fault.CodeSearchAborted:      http.StatusGatewayTimeout,
	// A cancelled call has no client left to read the answer; nginx's 499
	// keeps it apart from server faults in access logs and metrics.
	fault.CodeAborted: 499,
}

func statusOf(code fault.Code) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// problem is the RFC 9457 body every failure answers with (the Problem
// schema of api/openapi.yaml, members in the RFC's order).
type problem struct {
	Type   string     `json:"type"`
	Title  string     `json:"title"`
	Status int        `json:"status"`
	Detail string     `json:"detail"`
	Code   fault.Code `json:"code"`
	Output string     `json:"output"`
	// Hint is a missed edit's most similar region (extended profile;
	// docs/edits.md).
	Hint *fault.Hint `json:"hint,omitempty"`
	// Paths are the files a refused revert names (docs/checkpoints.md).
	Paths []string `json:"paths,omitempty"`
}

func newProblem(err *fault.Error) problem {
	status := statusOf(err.Code)
	title := http.StatusText(status)
	if title == "" {
		title = "Client Closed Request"
	}
	return problem{
		Type:   "about:blank",
		Title:  title,
		Status: status,
		Detail: err.Message,
		Code:   err.Code,
		Output: tools.Output(err),
		Hint:   err.Hint,
		Paths:  err.Paths,
	}
}

// writeError is the one writer of problem bodies: tool calls, auth, the
// body cap, the session headers, unknown routes and methods and the
// generated binding's error hooks all end here. Under /model/ (modelText)
// the body is the problem's output alone, as text, with the same status.
func writeError(w http.ResponseWriter, err *fault.Error) {
	p := newProblem(err)
	if answersText(w) {
		writeText(w, p.Status, p.Output)
		return
	}
	writeJSON(w, p.Status, "application/problem+json", p)
}

// writeText answers text/plain: the model text of /model/*.
func writeText(w http.ResponseWriter, status int, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(text)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, text)
}

// textAnswers marks the writer of a request under /model/: every answer
// there, failures included, is the model text alone (api/openapi.yaml,
// ModelText and ModelError), whichever layer fails.
type textAnswers struct{ http.ResponseWriter }

func (w textAnswers) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w textAnswers) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// modelText marks the requests under /model/ (see textAnswers). It runs
// before every step that can refuse a request (routes.go).
func modelText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(textAnswers{w}, r)
	})
}

func answersText(w http.ResponseWriter) bool {
	for {
		if _, ok := w.(textAnswers); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

func writeProblem(w http.ResponseWriter, code fault.Code, message string) {
	writeError(w, fault.New(code, message))
}

// noSuchEndpoint is the one 404 of a path no route serves.
func noSuchEndpoint(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, fault.CodeNoSuchEndpoint, "no such endpoint: "+r.Method+" "+r.URL.Path)
}

// methodNotAllowed is the one 405 of a route asked with another method.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, fault.CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
}

// NoSuchEndpoint and MethodNotAllowed answer as the API's 404 and 405, for
// a handler mounted beside the routes (the console, internal/console).
var (
	NoSuchEndpoint   http.Handler = http.HandlerFunc(noSuchEndpoint)
	MethodNotAllowed http.Handler = http.HandlerFunc(methodNotAllowed)
)
