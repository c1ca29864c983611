package handlers

import (
	"io"
	"net/http"
	"strconv"

	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// statusByCode is the one table that maps a stable code to its HTTP status
// (docs/api.md, "Errors"). Unknown codes are 500.
var statusByCode = map[tools.Code]int{
	tools.CodeInvalidArgument:      http.StatusBadRequest,
	tools.CodeInvalidSession:       http.StatusBadRequest,
	tools.CodeSearchInvalidPattern: http.StatusBadRequest,
	tools.CodeUnauthorized:         http.StatusUnauthorized,
	tools.CodeSandboxDenied:        http.StatusForbidden,
	tools.CodeEscalationDenied:     http.StatusForbidden,
	CodeNotApprover:                http.StatusForbidden,
	CodeApprovalNotFound:           http.StatusNotFound,
	CodeApprovalNotPending:         http.StatusConflict,
	// Approvals are bounded (--max-approvals); retry once some are decided.
	tools.CodeTooManyApprovals: http.StatusServiceUnavailable,
	tools.CodePermission:       http.StatusForbidden,
	tools.CodeForbiddenHost:    http.StatusForbidden,
	tools.CodeNotFound:         http.StatusNotFound,
	tools.CodeNoSuchEndpoint:   http.StatusNotFound,
	tools.CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	tools.CodeStaleVersion:     http.StatusConflict,
	tools.CodeNotObserved:      http.StatusConflict,
	tools.CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	tools.CodeNotText:          http.StatusUnprocessableEntity,
	tools.CodeNotRegularFile:   http.StatusUnprocessableEntity,
	tools.CodeEditNotFound:     http.StatusUnprocessableEntity,
	tools.CodeAmbiguousEdit:    http.StatusUnprocessableEntity,
	tools.CodeNotDirectory:     http.StatusUnprocessableEntity,
	tools.CodeTooLarge:         http.StatusUnprocessableEntity,
	tools.CodeSearchOverflow:   http.StatusUnprocessableEntity,
	tools.CodeIO:               http.StatusInternalServerError,
	tools.CodeInternal:         http.StatusInternalServerError,
	tools.CodeSearchFailed:     http.StatusInternalServerError,
	// Writes and edits wait for the session store (docs/deployment.md).
	tools.CodeSessionStoreUnavailable: http.StatusServiceUnavailable,
	// GET /events past --events-max-subscribers (docs/events.md).
	tools.Code(events.CodeTooManySubscribers): http.StatusServiceUnavailable,
	tools.CodeSearchAborted:                   http.StatusGatewayTimeout,
	// A cancelled call has no client left to read the answer; nginx's 499
	// keeps it apart from server faults in access logs and metrics.
	tools.CodeAborted: 499,
}

func statusOf(code tools.Code) int {
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
	Code   tools.Code `json:"code"`
	Output string     `json:"output"`
	// Hint is a missed edit's most similar region (extended profile;
	// docs/edits.md).
	Hint *tools.Hint `json:"hint,omitempty"`
}

func newProblem(err *tools.Error) problem {
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
		Output: err.Output(),
		Hint:   err.Hint,
	}
}

// writeError is the one writer of problem bodies: tool calls, auth, the
// body cap, the session headers, unknown routes and methods and the
// generated binding's error hooks all end here. Under /model/ (modelText)
// the body is the problem's output alone, as text, with the same status.
func writeError(w http.ResponseWriter, err *tools.Error) {
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

func writeProblem(w http.ResponseWriter, code tools.Code, message string) {
	writeError(w, tools.NewError(code, message))
}

// noSuchEndpoint is the one 404 of a path no route serves.
func noSuchEndpoint(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, tools.CodeNoSuchEndpoint, "no such endpoint: "+r.Method+" "+r.URL.Path)
}

// methodNotAllowed is the one 405 of a route asked with another method.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, tools.CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
}
