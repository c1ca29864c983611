package render

import (
	"strconv"
	"strings"
)

// The apply_patch tool (SPEC §25, docs/edits.md "apply_patch"): the patch
// dialect of an edit, declared in Tools with Dialect DialectApplyPatch: the
// catalogs of the apply_patch and all dialects list it (dialect.go), and
// every tool stays callable at POST /tools/<name>.

// MaxOperations is the most operations one apply_patch call may carry (as
// the patch's file operations).
const MaxOperations = 1000

// The argument messages of apply_patch.
const (
	MsgPatchInput      = `input must be a string: the patch, from "*** Begin Patch" to "*** End Patch"`
	MsgPatchOperations = "operations must be an array of {type, path, diff} objects"
	MsgPatchBothForms  = "provide either input or operations, not both"
	MsgOperationType   = "type must be one of create_file, update_file, delete_file"
	MsgOperationPath   = "path must be a non-empty string"
	MsgOperationDiff   = "diff must be a string"
)

// MsgOperationsCount is the message of an operations array outside
// 1-MaxOperations.
var MsgOperationsCount = "operations must contain between 1 and " + strconv.Itoa(MaxOperations) + " operations"

// ApplyPatch is apply_patch's declaration.
var ApplyPatch = Decl{
	Name:        "apply_patch",
	Dialect:     DialectApplyPatch,
	Description: "Add, delete, update and move files with one patch, all or nothing.",
	Guidance: "Use the apply_patch tool to edit files. Send the patch as input:\n" +
		"*** Begin Patch\n*** Update File: path/to/file.py\n@@ def example():\n-    pass\n+    return 123\n*** End Patch\n" +
		"Each file is one operation: \"*** Add File: <path>\" then its lines each after \"+\"; \"*** Delete File: <path>\"; " +
		"\"*** Update File: <path>\" (then \"*** Move to: <new path>\" to rename it) and hunks: \"@@\" optionally followed by a line the hunk comes after " +
		"(a class or function), then the lines, each after \" \" (context), \"-\" (removed) or \"+\" (added), with about 3 lines of context around each change. " +
		"Read a file before you update or delete it (the default fs-policy requires it). Nothing is written unless every operation applies.",
	Params: concat(
		[]Param{
			{Name: "input", Type: "string", Required: true, Unless: "operations", Message: MsgPatchInput, Description: "The patch: \"*** Begin Patch\", its file operations, \"*** End Patch\"."},
			{
				Name: "operations", Type: "array", Min: 1, Max: MaxOperations, Message: MsgPatchOperations,
				Description: "Instead of input: the operations of an OpenAI apply_patch_call, applied as one patch (1-" + strconv.Itoa(MaxOperations) + " items).",
				Items: []Param{
					{Name: "type", Type: "string", Required: true, Enum: []string{"create_file", "update_file", "delete_file"}, Message: MsgOperationType, Description: "What the operation does."},
					{Name: "path", Type: "string", Required: true, NonEmpty: true, Message: MsgOperationPath, Description: "The file's path."},
					{Name: "diff", Type: "string", Message: MsgOperationDiff, Description: "create_file: the new file's lines, each after \"+\"; update_file: its hunks; delete_file: none."},
				},
			},
		},
		escalationParams,
		[]Param{{Name: "dry_run", Type: "boolean", Description: "Check everything (arguments, the read-before-write policy, every hunk) and return the change as unified diffs without writing anything. Defaults to false.", Message: MsgDryRun}},
	),
}

// PatchFile is one file of a patch's answer: its operation ("add",
// "update", "delete" or "move"), its path and, for a move, where to
// (paths as the answer shows them).
type PatchFile struct {
	Op       string
	Path, To string
}

// PatchMatch is a hunk found at a tolerant level: the level's number and
// name (the tolerant edit's: 3, 4 or 6, docs/edits.md), its first and
// last line, the file.
type PatchMatch struct {
	Level              int
	StartLine, EndLine int
	Path               string
}

// PatchOutput is apply_patch's success text: "Applied the patch: <n>
// file(s) changed." then one line per file in patch order (`A <p>`, `M
// <p>`, `D <p>`, `R <p> -> <q>`), then one line per hunk found at a
// tolerant level: "Matched after <what> at lines <a>-<b> of <p>.".
func PatchOutput(files []PatchFile, matches []PatchMatch) string {
	var b strings.Builder
	b.WriteString("Applied the patch: " + strconv.Itoa(len(files)) + " file(s) changed.")
	patchLines(&b, files, matches)
	return b.String()
}

// PatchDryRunOutput is apply_patch's answer to a dry run: "Dry run: no
// changes were written. The patch would change <n> file(s):", the same
// lines as PatchOutput, then each file's change as a unified diff.
func PatchDryRunOutput(files []PatchFile, matches []PatchMatch, diffs []string) string {
	var b strings.Builder
	b.WriteString("Dry run: no changes were written. The patch would change " + strconv.Itoa(len(files)) + " file(s):")
	patchLines(&b, files, matches)
	for _, d := range diffs {
		b.WriteString("\n" + d)
	}
	return b.String()
}

func patchLines(b *strings.Builder, files []PatchFile, matches []PatchMatch) {
	for _, f := range files {
		b.WriteString("\n" + PatchFileLine(f))
	}
	for _, m := range matches {
		b.WriteString("\n" + PatchMatchLine(m))
	}
}

// PatchFileLine is a file's line in a patch's answer: `A <p>`, `M <p>`,
// `D <p>` or `R <p> -> <q>`.
func PatchFileLine(f PatchFile) string {
	switch f.Op {
	case "add":
		return "A " + f.Path
	case "delete":
		return "D " + f.Path
	case "move":
		return "R " + f.Path + " -> " + f.To
	}
	return "M " + f.Path
}

// PatchMatchLine is the disclosure of a hunk found at a tolerant level:
// "Matched after <what> at lines <a>-<b> of <p>.".
func PatchMatchLine(m PatchMatch) string {
	return "Matched after " + matchedWhat[m.Level] + " at lines " + strconv.Itoa(m.StartLine) + "-" + strconv.Itoa(m.EndLine) + " of " + m.Path + "."
}
