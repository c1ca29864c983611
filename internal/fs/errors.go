package fs

import "errors"

// Code is a stable, machine-readable error code. The values are part of the
// HTTP contract.
type Code string

// The filesystem error codes.
const (
	CodeNotFound       Code = "FS_NOT_FOUND"
	CodeNotDirectory   Code = "FS_NOT_DIRECTORY"
	CodeNotText        Code = "FS_NOT_TEXT"
	CodeNotRegularFile Code = "FS_NOT_REGULAR_FILE"
	CodeTooLarge       Code = "FS_TOO_LARGE"
	CodePermission     Code = "FS_PERMISSION_DENIED"
	CodeSandboxDenied  Code = "FS_SANDBOX_DENIED"
	CodeIO             Code = "FS_IO_ERROR"
	CodeStaleVersion   Code = "FS_STALE_VERSION"
	CodeNotObserved    Code = "FS_NOT_OBSERVED"
	CodeAmbiguousEdit  Code = "FS_AMBIGUOUS_EDIT"
	CodeEditNotFound   Code = "FS_EDIT_NOT_FOUND"
	CodeAborted        Code = "FS_ABORTED"
)

// Error is every error the seam returns on purpose. Message is model-facing
// contract text (it names the DISPLAY path, never the real one); Err is the
// internal cause, for logs only.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Hint is set on CodeEditNotFound and CodeAmbiguousEdit when the edit
	// asked for hints and the provider found some.
	Hint *EditHint
}

// EditHint is what a missed edit can show the model (docs/edits.md).
type EditHint struct {
	// StartLine and EndLine (1-based, inclusive) are the most similar
	// region of a miss, Lines its lines (without line endings, each at most
	// HintLineMaxBytes, whole characters); 0 and nil when nothing is close.
	// At most HintMaxLines lines.
	StartLine, EndLine int
	Lines              []string
	// MatchLines are the first lines of an ambiguous edit's matches,
	// ascending, at most HintMaxLines+1 (more means there were more).
	MatchLines []int
}

// Bounds of an EditHint.
const (
	HintMaxLines     = 20
	HintLineMaxBytes = 64 << 10
)

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Err }

// NewError is a convenience constructor for an *Error without a cause.
func NewError(code Code, message string) *Error {
	return &Error{Code: code, Message: message}
}

// StaleError is CodeStaleVersion's text for op ("write", "edit") on
// display: the file is not the one the caller's precondition describes.
func StaleError(op, display string) *Error {
	return NewError(CodeStaleVersion, `cannot `+op+` "`+display+`": file changed since it was read`)
}

// CodeOf returns the code of err if it is (or wraps) an *Error, else "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
