package render

import "strconv"

// Param is one argument of a tool, declared once (docs/architecture.md,
// "Where each kind of change goes"). The catalog's schema, the executor's
// type pass, the MCP tool list, the OpenAPI views and the test that holds
// api/openapi.yaml's request schemas to it are all built from it.
type Param struct {
	Name string
	// Type is the JSON type: string, number, boolean or array (of objects
	// with the properties Items).
	Type string
	// Description is the catalog's text; LimitMark stands for the
	// configured read limit.
	Description string
	// Message is the argument message of a value of another type (or of a
	// required one missing), the executor's type pass reports it.
	Message string
	// Required: the call must send it, unless it sends Unless instead.
	Required bool
	// Unless names the argument that stands in for this required one
	// (edit's old_string and new_string beside edits): the catalog requires
	// this one only in a profile that does not advertise that one, and the
	// contract does not require it.
	Unless string
	// NonEmpty refuses an empty string in the type pass (an edits item's
	// old_string; the single edit's is a value check, after file_path's).
	NonEmpty bool
	// Min is a number's minimum (the contract's and the type pass's; the
	// original's catalog shows none) or an array's minItems; Max an array's
	// maxItems.
	Min, Max int
	// Enum lists the values a string may take.
	Enum  []string
	Items []Param
	// Deferred arguments are type-checked by the tool itself after the type
	// pass (the escalation's checks depend on the server's sandbox mode).
	Deferred bool
	// Extended arguments are advertised by the extended profile only
	// (accepted by both); Fenced ones only under a sandbox fence.
	Extended, Fenced bool
	// Note is what api/openapi.yaml adds after Description for HTTP clients.
	Note string
}

// LimitMark in a Description is replaced by the configured read limit.
const LimitMark = "{limit}"

// Decl declares one tool: its catalog texts and its arguments in the
// order the catalog lists them and the type pass checks them.
type Decl struct {
	Name, Description, Guidance string
	Params                      []Param
	// Search tools are listed only when ripgrep can run.
	Search bool
	// Dialect names the edit dialect whose edit tool this is: the catalog
	// of another dialect does not list it (DialectAll lists them all), and
	// the original profile lists edit alone. "" for a tool of every dialect.
	Dialect Dialect
	// Extended tools are listed (and callable) in the extended profile only
	// (move, delete, mkdir: SPEC §26).
	Extended bool
}

// The argument messages the original tool-fs does not have; ours, in its
// style (docs/api.md, "Argument messages").
const (
	MsgContent    = "content must be a string"
	MsgNewString  = "new_string must be a string"
	MsgReplaceAll = "replace_all must be a boolean"
	MsgPattern    = "pattern must be a non-empty string"
	MsgPath       = "path must be a non-empty string when given"
	MsgInclude    = "include must be a non-empty glob when given"
	MsgDryRun     = "dry_run must be a boolean"
	MsgEditsType  = "edits must be an array of {old_string, new_string, replace_all} objects"
)

// edit_lines's argument messages (docs/edits.md, "Anchored lines"); an
// item's are prefixed with its JSON path, "edits[<i>].".
const (
	MsgLineEditsType = "edits must be an array of {op, start, end, at, text} objects"
	MsgLineOp        = `op must be "replace", "insert_after" or "insert_before"`
	MsgLineText      = "text must be a string"
	msgAnchorOf      = ` must be a line anchor "<n>#<tag>" as read shows it, e.g. "12#KT"`
	MsgLineStart     = "start" + msgAnchorOf
	MsgLineEnd       = "end" + msgAnchorOf
	MsgLineAt        = "at" + msgAnchorOf
	MsgLineEndBefore = "end must not be before start"
)

// MsgLineItem is the message of an edits item of edit_lines that is not
// an object; at is its JSON path ("edits[<i>]").
func MsgLineItem(at string) string { return at + " must be an object with op and text" }

// MsgLineNeeds is the message of an item whose op lacks its anchor: a
// replace without start, an insert without at.
func MsgLineNeeds(at, op string) string {
	if op == "replace" {
		return at + ": replace needs start, the anchor of the first line to replace"
	}
	return at + ": " + op + " needs at, the anchor of the line to insert next to"
}

// MsgLineTakes is the message of an item with the other op's anchors.
func MsgLineTakes(at, op string) string {
	if op == "replace" {
		return at + ": replace takes start and end, not at"
	}
	return at + ": " + op + " takes at, not start or end"
}

// MsgLineInsertEmpty is the message of an insert whose text holds no line.
func MsgLineInsertEmpty(at, op string) string {
	return at + ".text must hold at least one line for " + op + ` (send "\n" for one empty line)`
}

// The sandbox modes a call can ask to be widened to (docs/sandbox.md):
// the values of sandbox_permissions.
const (
	ModeWorkspaceWrite   = "workspace-write"
	ModeDangerFullAccess = "danger-full-access"
)

// SandboxModes are sandbox_permissions's values, in the contract's order.
var SandboxModes = []string{ModeWorkspaceWrite, ModeDangerFullAccess}

// MsgSandboxPermissions is our message for a sandbox_permissions that is
// not one of SandboxModes.
const MsgSandboxPermissions = `sandbox_permissions must be "` + ModeWorkspaceWrite + `" or "` + ModeDangerFullAccess + `"`

// MaxEdits is the most edits one edit call may carry.
const MaxEdits = 100

// MsgEditsCount is the message for an edits array outside 1-MaxEdits.
var MsgEditsCount = "edits must contain between 1 and " + strconv.Itoa(MaxEdits) + " edits"

// Texts shared by several declarations.
const (
	descOldString    = "Literal text to replace. Must match exactly."
	descNewString    = "Literal replacement text. Use an empty string to delete the match."
	descReplaceAll   = "Replace all matches. Defaults to false; when false, old_string must appear exactly once."
	descDryRun       = "Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."
	noteBothProfiles = "Accepted in both profiles; advertised in the catalog by the extended one."
)

// escalationParams are write's, edit's and revert's sandbox_permissions
// and justification, the original tool-fs's escalation under a sandbox
// fence.
var escalationParams = []Param{
	{
		Name: "sandbox_permissions", Type: "string", Enum: SandboxModes, Fenced: true, Deferred: true,
		Description: "The wider sandbox mode this file operation needs. Only valid as a one-shot retry of an operation the sandbox just denied; requires justification and user approval.",
		Message:     MsgSandboxPermissions,
		Note:        "Only under --sandbox-mode other than off (docs/sandbox.md).",
	},
	{
		Name: "justification", Type: "string", Fenced: true, Deferred: true,
		Description: "Required with sandbox_permissions: one sentence for the user explaining why this exact file operation needs the wider access.",
	},
}

// EditToolMark in a Guidance is replaced by the name of the edit tool the
// catalog's dialect lists (write recommends it for targeted changes).
const EditToolMark = "{edit_tool}"

var dryRun = Param{Name: "dry_run", Type: "boolean", Description: descDryRun, Message: MsgDryRun, Extended: true, Note: noteBothProfiles}

// Tools declares every tool, in catalog order.
var Tools = []Decl{
	{
		Name:        "read",
		Description: "Read a UTF-8 text file and return line-numbered content.",
		Guidance:    "Use the read tool \u2014 not shell commands like cat \u2014 to inspect text files. Results include line numbers. Use offset and limit to continue reading large files.",
		Params: []Param{
			{Name: "file_path", Type: "string", Required: true, Message: MsgFilePath, Description: "Path to read, resolved by the filesystem backend."},
			{Name: "offset", Type: "number", Min: 1, Message: MsgOffset, Description: "1-based first line to return. Defaults to 1."},
			{
				Name: "limit", Type: "number", Min: 1, Message: MsgLimit,
				Description: "Maximum number of lines to return. Defaults to " + LimitMark + ".",
				Note:        "The default and the cap are the server's --read-limit.",
			},
		},
	},
	{
		Name:        "write",
		Description: "Create or fully replace a UTF-8 text file.",
		Guidance:    "Use the write tool to create files or completely replace file contents. Existing files are overwritten, so read an existing file first (the default fs-policy requires it) and prefer " + EditToolMark + " for targeted changes.",
		Params: concat(
			[]Param{
				{Name: "file_path", Type: "string", Required: true, Message: MsgFilePath, Description: "Path to write, resolved by the filesystem backend."},
				{Name: "content", Type: "string", Required: true, Message: MsgContent, Description: "Full UTF-8 text content to write."},
			},
			escalationParams,
			[]Param{dryRun},
		),
	},
	{
		Name:        "edit",
		Dialect:     DialectStrReplace,
		Description: "Edit an existing UTF-8 text file by replacing literal text.",
		Guidance:    "Use the edit tool for targeted changes to existing UTF-8 text files. It replaces literal old_string with new_string; by default old_string must appear exactly once. If old_string appears multiple times, provide a more specific old_string or set replace_all to true. Read the file first (the default fs-policy requires it), unless you just created or edited it in this session.",
		Params: concat(
			[]Param{
				{Name: "file_path", Type: "string", Required: true, Message: MsgFilePath, Description: "Path to edit, resolved by the filesystem backend."},
				{Name: "old_string", Type: "string", Required: true, Unless: "edits", Message: MsgOldString, Description: descOldString},
				{Name: "new_string", Type: "string", Required: true, Unless: "edits", Message: MsgNewString, Description: descNewString},
				{Name: "replace_all", Type: "boolean", Message: MsgReplaceAll, Description: descReplaceAll},
			},
			escalationParams,
			[]Param{
				{
					Name: "edits", Type: "array", Min: 1, Max: MaxEdits, Message: MsgEditsType, Extended: true, Note: noteBothProfiles,
					Description: "Several edits applied in order, each to the result of the ones before, all or nothing (1-" + strconv.Itoa(MaxEdits) + " items). Send instead of old_string, new_string and replace_all.",
					Items: []Param{
						{Name: "old_string", Type: "string", Required: true, NonEmpty: true, Message: MsgOldString, Description: descOldString},
						{Name: "new_string", Type: "string", Required: true, Message: MsgNewString, Description: descNewString},
						{Name: "replace_all", Type: "boolean", Message: MsgReplaceAll, Description: descReplaceAll},
					},
				},
				dryRun,
			},
		),
	},
	ApplyPatch,
	{
		Name:        "edit_lines",
		Dialect:     DialectAnchors,
		Description: "Edit an existing UTF-8 text file by line anchors: replace, delete or insert whole lines, each named by the <n>#<tag> anchor read shows before it.",
		Guidance:    "Use the edit_lines tool for targeted changes to existing UTF-8 text files. The read tool shows each line as <n>#<tag>: <text>; name lines by those anchors (e.g. \"12#KT\"), never by their text. replace puts text in place of the lines start through end (an empty text deletes them); insert_after and insert_before add text next to the line at. Every edit of one call refers to the file as you read it; they apply together or not at all. Read the file first (the default fs-policy requires it); each answer shows the changed lines with their new anchors, so you can go on without reading again.",
		Params: concat(
			[]Param{
				{Name: "file_path", Type: "string", Required: true, Message: MsgFilePath, Description: "Path to edit, resolved by the filesystem backend."},
				{
					Name: "edits", Type: "array", Required: true, Min: 1, Max: MaxEdits, Message: MsgLineEditsType,
					Description: "The edits, all referring to the file as read, applied together or not at all (1-" + strconv.Itoa(MaxEdits) + " items). They must not overlap.",
					Items: []Param{
						{Name: "op", Type: "string", Required: true, Enum: []string{"replace", "insert_after", "insert_before"}, Message: MsgLineOp, Description: "replace: the lines start through end become text. insert_after, insert_before: text is added after or before the line at."},
						{Name: "start", Type: "string", Message: MsgLineStart, Description: `replace: the anchor of the first line to replace, as read shows it (e.g. "12#KT").`},
						{Name: "end", Type: "string", Message: MsgLineEnd, Description: "replace: the anchor of the last line to replace. Defaults to start (one line)."},
						{Name: "at", Type: "string", Message: MsgLineAt, Description: "insert_after, insert_before: the anchor of the line to insert next to."},
						{Name: "text", Type: "string", Required: true, Message: MsgLineText, Description: "The new lines, without anchors, separated by newlines. For replace, an empty string deletes the lines."},
					},
				},
			},
			escalationParams,
			[]Param{dryRun},
		),
	},
	{
		Name:        "glob",
		Search:      true,
		Description: "Find files whose paths match a glob pattern. Returns matching file paths \u2014 never directories \u2014 including hidden and ignored files (VCS metadata directories are excluded). Up to 100 paths come back in modification-time order; a larger result instead returns 100 paths sampled across top-level entries and says so. This tool does not enumerate directory entries.",
		Guidance:    "Use the glob tool \u2014 not shell find or ls \u2014 to find files by name pattern. Use grep to search file contents.",
		Params: []Param{
			{Name: "pattern", Type: "string", Required: true, Message: MsgPattern, Description: `Glob pattern to match file paths against (e.g. "**/*.ts", "src/**/*.test.js"). A pattern with no "/" matches the basename at any depth, so "*" and "*.ts" both search the whole tree; include a separator to anchor the depth.`},
			{Name: "path", Type: "string", Message: MsgPath, Description: "Directory to search in. Defaults to the session workspace; a relative path resolves against it."},
		},
	},
	{
		Name:        "grep",
		Search:      true,
		Description: "Search file contents with a ripgrep regular expression. Returns matching lines with line numbers, grouped by file. Returns the first 250 matches inline and says when there were more. Use read on a matched file for surrounding context.",
		Guidance:    "Use the grep tool \u2014 not shell grep or rg \u2014 to search file contents. Use read on a matched file when you need surrounding context.",
		Params: []Param{
			{Name: "pattern", Type: "string", Required: true, Message: MsgPattern, Description: "Regular expression to search for (ripgrep syntax)."},
			{Name: "path", Type: "string", Message: MsgPath, Description: "File or directory to search. Defaults to the session workspace; a relative path resolves against it."},
			{Name: "include", Type: "string", Message: MsgInclude, Description: `One glob filter for which files to search (e.g. "*.ts", "*.{js,jsx}"). Not a list; negation is not supported.`},
		},
	},
	moveDecl,
	deleteDecl,
	mkdirDecl,
}

// DeclOf returns the declaration of the named tool, in Tools or
// HistoryTools.
func DeclOf(name string) (Decl, bool) {
	for _, d := range append(Tools[:len(Tools):len(Tools)], HistoryTools...) {
		if d.Name == name {
			return d, true
		}
	}
	return Decl{}, false
}

// ParamsOf returns the named tool's arguments; it panics on a name Tools
// and HistoryTools do not declare, a programming error caught at start-up.
func ParamsOf(name string) []Param {
	d, ok := DeclOf(name)
	if !ok {
		panic("render: no tool " + strconv.Quote(name))
	}
	return d.Params
}

// Nullable reports whether the contract accepts null for p (as absent):
// any argument no profile requires.
func (p Param) Nullable() bool { return !p.Required }

func concat(parts ...[]Param) []Param {
	var out []Param
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
