// Package fault is the one vocabulary of failures: every error code a client
// can see and the one error type every layer returns (docs/architecture.md,
// "Where each kind of change goes"). It imports nothing of ours, so every package
// may import it; a transport maps a code to its own status in one table
// (REST: internal/handlers/problem.go).
package fault

import "errors"

// Code is a stable, machine-readable error code. The values are part of the
// HTTP contract (api/openapi.yaml, the Problem schema's code).
type Code string

// Codes of the tool calls' arguments and sessions.
const (
	CodeInvalidArgument Code = "INVALID_ARGUMENT"
	CodeInvalidSession  Code = "INVALID_SESSION"
)

// Codes of the filesystem provider and the policy.
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
	// CodeAlreadyExists: a move onto an existing destination without
	// overwrite (SPEC §26).
	CodeAlreadyExists Code = "FS_ALREADY_EXISTS"
	// CodeNotEmpty: the delete of a folder that holds anything.
	CodeNotEmpty Code = "FS_NOT_EMPTY"

	// CodeSessionStoreUnavailable: a write, edit or forget while the
	// session store (Redis) cannot be reached; nothing was written.
	CodeSessionStoreUnavailable Code = "SESSION_STORE_UNAVAILABLE"
)

// CodeNotRevertible: a revert past a change that cannot be reverted
// (docs/checkpoints.md).
const CodeNotRevertible Code = "FS_NOT_REVERTIBLE"

// CodePreconditionRequired: an upload over an existing file, or a delete,
// without If-Match: the files endpoints never overwrite or remove blindly
// (docs/files.md).
const CodePreconditionRequired Code = "PRECONDITION_REQUIRED"

// Codes of glob and grep (docs/search.md).
const (
	CodeSearchInvalidPattern Code = "SEARCH_INVALID_PATTERN"
	CodeSearchFailed         Code = "SEARCH_FAILED"
	CodeSearchOverflow       Code = "SEARCH_RAW_OUTPUT_OVERFLOW"
	CodeSearchAborted        Code = "SEARCH_ABORTED"
)

// Codes of sandbox escalations and their approvals (docs/sandbox.md).
const (
	// CodeEscalationDenied: a sandbox escalation was not granted (rejected,
	// timed out, the caller went away, or no approval channel).
	CodeEscalationDenied Code = "ESCALATION_DENIED"
	// CodeTooManyApprovals: --max-approvals approvals are pending already;
	// the call asked nobody and ran nothing.
	CodeTooManyApprovals   Code = "TOO_MANY_APPROVALS"
	CodeApprovalNotFound   Code = "APPROVAL_NOT_FOUND"
	CodeApprovalNotPending Code = "APPROVAL_NOT_PENDING"
	CodeNotApprover        Code = "NOT_APPROVER"
	// CodeInputRequired: the escalation is asked of the MCP client's own
	// user with the call's answer (input_required, docs/sandbox.md); the
	// call ran nothing and is retried with the answer. Never on REST.
	CodeInputRequired Code = "INPUT_REQUIRED"
)

// CodeTooManySubscribers: GET /events past --events-max-subscribers
// (docs/events.md).
const CodeTooManySubscribers Code = "TOO_MANY_SUBSCRIBERS"

// CodeNotReady: GET /readyz while a configured dependency cannot serve
// (Redis unreachable or refusing the server's credentials or database, the
// issuer's keys not held), before a first check passed, or when no check
// completed lately (docs/deployment.md, "Readiness").
const CodeNotReady Code = "NOT_READY"

// Codes of identities and the audit log (docs/identity.md).
const (
	// CodeInsufficientScope: a verified access token without the scope the
	// route needs.
	CodeInsufficientScope Code = "INSUFFICIENT_SCOPE"
	// CodeAuditUnavailable: a mutation refused because its audit record
	// cannot be written; nothing was changed.
	CodeAuditUnavailable Code = "AUDIT_UNAVAILABLE"
)

// Codes a transport raises before or around a tool call.
const (
	CodeUnauthorized     Code = "UNAUTHORIZED"
	CodeBodyTooLarge     Code = "BODY_TOO_LARGE"
	CodeBodyTooSlow      Code = "BODY_TOO_SLOW" // an upload under --upload-min-rate
	CodeNoSuchEndpoint   Code = "NOT_FOUND"
	CodeMethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	CodeForbiddenHost    Code = "FORBIDDEN_HOST"
	CodeInternal         Code = "INTERNAL"
)

// Error is every failure a layer returns on purpose, and what a transport
// answers: a stable code and the model-facing message (contract text; it
// names the display path, never the real one; without the "Error: "
// prefix). Err is the internal cause, for logs only; it is never sent.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Hint is what a missed edit can show the model (docs/edits.md): the
	// provider sets it on CodeEditNotFound and CodeAmbiguousEdit when the
	// edit asked for hints; the executor replaces it with the region it
	// shows (extended profile), which REST answers as the problem's hint.
	Hint *Hint
	// Paths are the files a refused revert names (CodeStaleVersion: each
	// file that changed since; docs/checkpoints.md), root-relative.
	Paths []string
}

// Hint is a missed edit's most similar region, or an ambiguous edit's
// matches.
type Hint struct {
	// StartLine and EndLine (1-based, inclusive) are the most similar
	// region of a miss, Lines its lines (without line endings, each at most
	// the provider's bound, whole characters); 0 and nil when nothing is
	// close.
	StartLine int      `json:"startLine"`
	EndLine   int      `json:"endLine"`
	Lines     []string `json:"lines"`
	// MatchLines are the first lines of an ambiguous edit's matches,
	// ascending, at most the provider's bound (docs/edits.md).
	// Never sent as such: the executor renders them into the message.
	MatchLines []int `json:"-"`
}

// Error returns the model-facing message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the internal cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error without a cause.
func New(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// CodeOf returns the code of err if it is (or wraps) an *Error, else "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
