package tools

import (
	"context"
	"errors"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
)

// Code is a stable, machine-readable error code: the one code set of every
// failure a client can see, whatever layer raised it (docs/api.md, "Errors").
// Transports map a code to their own status (REST: one table in
// internal/handlers) and never invent codes of their own.
type Code string

// Codes of the tool calls themselves.
const (
	CodeOK              Code = "ok" // the metrics label of a success; never an error's code
	CodeInvalidArgument Code = "INVALID_ARGUMENT"
	CodeInvalidSession  Code = "INVALID_SESSION"

	CodeNotFound       = Code(fs.CodeNotFound)
	CodeNotDirectory   = Code(fs.CodeNotDirectory)
	CodeNotText        = Code(fs.CodeNotText)
	CodeNotRegularFile = Code(fs.CodeNotRegularFile)
	CodeTooLarge       = Code(fs.CodeTooLarge)
	CodePermission     = Code(fs.CodePermission)
	CodeSandboxDenied  = Code(fs.CodeSandboxDenied)
	CodeIO             = Code(fs.CodeIO)
	CodeStaleVersion   = Code(fs.CodeStaleVersion)
	CodeNotObserved    = Code(fs.CodeNotObserved)
	CodeAmbiguousEdit  = Code(fs.CodeAmbiguousEdit)
	CodeEditNotFound   = Code(fs.CodeEditNotFound)
	CodeAborted        = Code(fs.CodeAborted)

	// CodeSessionStoreUnavailable: a write, edit or forget while the
	// session store (Redis) cannot be reached; nothing was written.
	CodeSessionStoreUnavailable = Code(policy.CodeUnavailable)

	CodeSearchInvalidPattern = Code(search.CodeInvalidPattern)
	CodeSearchFailed         = Code(search.CodeFailed)
	CodeSearchOverflow       = Code(search.CodeRawOutputOverflow)
	CodeSearchAborted        = Code(search.CodeAborted)
)

// Codes a transport raises before or around a tool call.
const (
	CodeUnauthorized     Code = "UNAUTHORIZED"
	CodeBodyTooLarge     Code = "BODY_TOO_LARGE"
	CodeNoSuchEndpoint   Code = "NOT_FOUND"
	CodeMethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	CodeForbiddenHost    Code = "FORBIDDEN_HOST"
	CodeInternal         Code = "INTERNAL"
)

// Error is every failure of a tool call: a stable code and the model-facing
// message (without the "Error: " prefix, with its remedy when it has one).
// Err is the internal cause, for logs only; it is never sent.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Hint is the structured form of a missed edit's "Most similar text"
	// (extended profile), nil otherwise; Message carries it as text too.
	Hint *Hint
}

// Hint is the region of the file most similar to a missed old_string:
// lines StartLine to EndLine (1-based), as the hint's text shows them.
type Hint struct {
	StartLine int      `json:"startLine"`
	EndLine   int      `json:"endLine"`
	Lines     []string `json:"lines"`
}

// Error returns the model-facing message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the internal cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Output is the exact model text of the failure, "Error: <message>": the
// problem's output on REST, the error result's text on MCP.
func (e *Error) Output() string { return render.ErrorOutput(e.Message) }

// NewError returns an *Error without a cause.
func NewError(code Code, message string) *Error { return &Error{Code: code, Message: message} }

func argError(message string) *Error { return NewError(CodeInvalidArgument, message) }

func sessionError(message string) *Error { return NewError(CodeInvalidSession, message) }

// errorOf maps what a layer returned to an *Error: an *fs.Error or a
// *search.Error keeps its code and message; a cancellation is FS_ABORTED;
// anything else is an internal fault, logged by the caller, sent as a bare
// FS_IO_ERROR.
func errorOf(err error) *Error {
	var te *Error
	var fe *fs.Error
	var se *search.Error
	switch {
	case errors.As(err, &te):
		return te
	case errors.As(err, &fe):
		return &Error{Code: Code(fe.Code), Message: fe.Message, Err: fe.Err}
	case errors.As(err, &se):
		return &Error{Code: Code(se.Code), Message: se.Message, Err: se.Err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeAborted, Message: "aborted", Err: err}
	}
	return &Error{Code: CodeIO, Message: "internal I/O error", Err: err}
}
