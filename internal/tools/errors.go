package tools

import (
	"context"
	"errors"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/render"
)

// CodeOK is the metrics label of a success; never an error's code.
const CodeOK fault.Code = "ok"

// Output is the exact model text of a failure, "Error: <message>": the
// problem's output on REST, the error result's text on MCP.
func Output(e *fault.Error) string { return render.ErrorOutput(e.Message) }

func argError(message string) *fault.Error { return fault.New(fault.CodeInvalidArgument, message) }

func sessionError(message string) *fault.Error { return fault.New(fault.CodeInvalidSession, message) }

// errorOf maps what a layer returned to the *fault.Error a transport
// answers: a *fault.Error keeps its code and message (a copy, so what the
// executor appends never changes what a layer returned; the provider's
// edit hint is left out, the change pipeline's failure sets the one shown); a cancellation
// is FS_ABORTED; anything else is an internal fault, logged by the caller,
// sent as a bare FS_IO_ERROR.
func errorOf(err error) *fault.Error {
	var fe *fault.Error
	switch {
	case errors.As(err, &fe):
		return &fault.Error{Code: fe.Code, Message: fe.Message, Err: fe.Err, Paths: fe.Paths}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &fault.Error{Code: fault.CodeAborted, Message: "aborted", Err: err}
	}
	return &fault.Error{Code: fault.CodeIO, Message: "internal I/O error", Err: err}
}
