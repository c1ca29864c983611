package handlers

import (
	"net/http"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Codes raised by the HTTP layer itself (the filesystem and search layers
// bring their own).
const (
	codeInvalidArgument  = "INVALID_ARGUMENT"
	codeInvalidSession   = "INVALID_SESSION"
	codeUnauthorized     = "UNAUTHORIZED"
	codeBodyTooLarge     = "BODY_TOO_LARGE"
	codeNotFound         = "NOT_FOUND"
	codeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	codeInternal         = "INTERNAL"
	codeForbiddenHost    = "FORBIDDEN_HOST"
)

// statusByCode is the one table that maps a stable code to its HTTP status
// (SPEC §4, §10). Unknown codes are 500.
var statusByCode = map[string]int{
	codeInvalidArgument:           http.StatusBadRequest,
	codeInvalidSession:            http.StatusBadRequest,
	"SEARCH_INVALID_PATTERN":      http.StatusBadRequest,
	codeUnauthorized:              http.StatusUnauthorized,
	string(fs.CodeSandboxDenied):  http.StatusForbidden,
	string(fs.CodePermission):     http.StatusForbidden,
	codeForbiddenHost:             http.StatusForbidden,
	string(fs.CodeNotFound):       http.StatusNotFound,
	codeNotFound:                  http.StatusNotFound,
	codeMethodNotAllowed:          http.StatusMethodNotAllowed,
	string(fs.CodeStaleVersion):   http.StatusConflict,
	string(fs.CodeNotObserved):    http.StatusConflict,
	codeBodyTooLarge:              http.StatusRequestEntityTooLarge,
	string(fs.CodeNotText):        http.StatusUnprocessableEntity,
	string(fs.CodeNotRegularFile): http.StatusUnprocessableEntity,
	string(fs.CodeEditNotFound):   http.StatusUnprocessableEntity,
	string(fs.CodeAmbiguousEdit):  http.StatusUnprocessableEntity,
	string(fs.CodeNotDirectory):   http.StatusUnprocessableEntity,
	string(fs.CodeTooLarge):       http.StatusUnprocessableEntity,
	"SEARCH_RAW_OUTPUT_OVERFLOW":  http.StatusUnprocessableEntity,
	string(fs.CodeIO):             http.StatusInternalServerError,
	// Writes and edits wait for the session store (docs/deployment.md).
	string(policy.CodeUnavailable): http.StatusServiceUnavailable,
	"SEARCH_FAILED":                http.StatusInternalServerError,
	"SEARCH_ABORTED":               http.StatusGatewayTimeout,
	// A cancelled call has no client left to read the answer; nginx's 499
	// keeps it apart from server faults in access logs and metrics.
	string(fs.CodeAborted): 499,
}

func statusOf(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// toolError is a failure with its stable code and model-facing message.
type toolError struct {
	code    string
	message string
}

func (e *toolError) Error() string { return e.message }

func argError(message string) *toolError {
	return &toolError{code: codeInvalidArgument, message: message}
}

func sessionError(message string) *toolError {
	return &toolError{code: codeInvalidSession, message: message}
}

// problem is the RFC 9457 body every failure answers with.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Output string `json:"output"`
}

func newProblem(code, message string) problem {
	status := statusOf(code)
	title := http.StatusText(status)
	if title == "" {
		title = "Client Closed Request"
	}
	return problem{
		Type:   "about:blank",
		Title:  title,
		Status: status,
		Detail: message,
		Code:   code,
		Output: render.ErrorOutput(message),
	}
}

// writeProblem is the one writer of problem bodies: handlers, the validator,
// auth, the body cap and the generated code's error hooks all end here.
func writeProblem(w http.ResponseWriter, code, message string) {
	p := newProblem(code, message)
	writeJSON(w, p.Status, "application/problem+json", p)
}
