package sandbox

// Requirement says what a caller does where the kernel cannot confine a
// program (no Landlock): the values of --search-sandbox, for rg
// (docs/search.md) and the checkers (docs/diagnostics.md).
type Requirement string

// The requirements.
const (
	// Require (the default): without Landlock the program does not run.
	Require Requirement = "require"
	// BestEffort runs the program unconfined without Landlock.
	BestEffort Requirement = "best-effort"
)
