package fs

import "github.com/toolfs/toolfs-api/internal/fault"

// Bounds of the fault.Hint a missed or ambiguous edit carries.
const (
	HintMaxLines     = 20
	HintLineMaxBytes = 64 << 10
)

// NotObservedError is CodeNotObserved's text for a write over display, a
// file the caller's precondition says is absent.
func NotObservedError(display string) *fault.Error {
	return fault.New(fault.CodeNotObserved, `cannot overwrite existing "`+display+`" without reading it first`)
}

// StaleError is CodeStaleVersion's text for op ("write", "edit") on
// display: the file is not the one the caller's precondition describes.
func StaleError(op, display string) *fault.Error {
	return fault.New(fault.CodeStaleVersion, `cannot `+op+` "`+display+`": file changed since it was read`)
}
