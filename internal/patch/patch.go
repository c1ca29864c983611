// Package patch is the apply_patch dialect of SPEC §25: Codex's patch
// grammar parsed into file operations (Parse), the Responses API's
// apply_patch_call operations turned into the same model (FromOperations),
// and one file's hunks applied to its bytes (Apply), each hunk found at the
// strictest level that finds exactly one place (docs/edits.md, "apply_patch").
//
// It is pure: no disk, no policy, no paths resolved. The executor resolves
// the paths, checks the policy and publishes every file as one change
// (SPEC §24). Every failure is a *fault.Error; nothing panics on input, and
// every input is bounded (MaxBytes, MaxFiles, MaxHunks, MaxFileBytes, and a
// budget of the bytes one file's search may read).
package patch

import "path"

// Bounds of one patch (docs/edits.md, "apply_patch"). A patch beyond them
// is refused before anything is read.
const (
	// MaxBytes is the most bytes a patch's text may have (the request body
	// cap, --max-body-bytes, is the other bound).
	MaxBytes = 16 << 20
	// MaxFiles is the most file operations one patch may have.
	MaxFiles = 1000
	// MaxHunks is the most hunks one patch may have, all files together.
	MaxHunks = 10000
	// MaxFileBytes is the largest file a patch may update: Apply holds it,
	// its line index and the result in memory.
	MaxFileBytes = 64 << 20
)

// Op is what a file operation does.
type Op uint8

// The file operations of the grammar.
const (
	OpAdd    Op = iota + 1 // *** Add File: creates (or, as write would, replaces)
	OpDelete               // *** Delete File: removes a regular file
	OpUpdate               // *** Update File: changes, and with MoveTo renames
)

// String is the operation's name in the answer's metadata.
func (o Op) String() string {
	switch o {
	case OpAdd:
		return "add"
	case OpDelete:
		return "delete"
	case OpUpdate:
		return "update"
	}
	return ""
}

// Patch is a parsed patch: its file operations in patch order, at least one.
type Patch struct {
	Files []File
}

// File is one file operation.
type File struct {
	Op   Op
	Path string // as written, trimmed; never ""
	// MoveTo is an Update's destination ("" when it stays).
	MoveTo string
	// Line is the 1-based line of the operation's marker in the patch (for
	// operations, its index in the array, 0-based).
	Line int
	// Content is an Add's whole new content.
	Content string
	// Hunks are an Update's hunks, in order.
	Hunks []Hunk
}

// Hunk is one "@@" section of an Update.
type Hunk struct {
	// Headers are the texts after its "@@" lines (trimmed; none for a
	// bare "@@"): several "@@ <header>" lines before a hunk's lines narrow
	// in turn, the hunk sought after the first line equal to each, trimmed.
	Headers []string
	Lines   []Line
	// EOF: "*** End of File" ended the hunk, so its lines end the file.
	EOF bool
	// Line is the 1-based line of the hunk's "@@" (or its first line).
	Line int
}

// Line is one line of a hunk.
type Line struct {
	// Kind is ' ' (context), '-' (removed) or '+' (added).
	Kind byte
	Text string
	// Bare: an empty line written without its " " (Codex reads it as empty
	// context). Bare lines at either end of a hunk are dropped when the hunk
	// is not found with them: they are most often the patch's own spacing.
	Bare bool
}

// Old is the hunk's context and removed lines: what it seeks.
func (h *Hunk) Old() []string {
	var out []string
	for _, l := range h.Lines {
		if l.Kind != '+' {
			out = append(out, l.Text)
		}
	}
	return out
}

// New is the hunk's context and added lines: what replaces its place.
func (h *Hunk) New() []string {
	var out []string
	for _, l := range h.Lines {
		if l.Kind != '-' {
			out = append(out, l.Text)
		}
	}
	return out
}

// Paths are every path the patch names, in patch order (an Update's MoveTo
// right after its Path).
func (p *Patch) Paths() []string {
	var out []string
	for _, f := range p.Files {
		out = append(out, f.Path)
		if f.MoveTo != "" {
			out = append(out, f.MoveTo)
		}
	}
	return out
}

// sameName is the literal form two paths are compared in for duplicates;
// the executor compares resolved targets too.
func sameName(p string) string { return path.Clean(p) }
