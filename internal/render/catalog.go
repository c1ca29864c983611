package render

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Tool is one catalog entry: what a frontend hands a model about a tool.
// Parameters is the JSON input schema, byte for byte as the original's.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Guidance    string          `json:"guidance"`
}

// Profile chooses the surface the catalog advertises (docs/api.md,
// "Profiles").
type Profile string

// The two profiles.
const (
	// ProfileExtended (the default) adds dry_run to write and edit and edits
	// to edit, after the original's properties, and hints on edit misses.
	ProfileExtended Profile = "extended"
	// ProfileOriginal is the original's surface byte for byte.
	ProfileOriginal Profile = "original"
)

// ParseProfile accepts "extended" and "original".
func ParseProfile(s string) (Profile, bool) {
	switch p := Profile(s); p {
	case ProfileExtended, ProfileOriginal:
		return p, true
	}
	return "", false
}

// Descriptions of the extended profile's added properties (ours; docs/edits.md).
const (
	DescDryRun = "Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."
	DescEdits  = "Several edits applied in order, each to the result of the ones before, all or nothing (1-100 items). Send instead of old_string, new_string and replace_all."
)

// editsSchema is the schema of edit's "edits" property: an item has the
// single edit's three properties, with their original descriptions.
var editsSchema = func() json.RawMessage {
	item := schema([]param{
		{name: "old_string", typ: "string", description: "Literal text to replace. Must match exactly."},
		{name: "new_string", typ: "string", description: "Literal replacement text. Use an empty string to delete the match."},
		{name: "replace_all", typ: "boolean", description: "Replace all matches. Defaults to false; when false, old_string must appear exactly once."},
	}, "old_string", "new_string")
	var b bytes.Buffer
	b.WriteString(`{"type":"array","description":`)
	b.Write(jsonString(DescEdits))
	b.WriteString(`,"minItems":1,"maxItems":100,"items":`)
	b.Write(item)
	b.WriteByte('}')
	return b.Bytes()
}()

// The original's escalation parameters of write and edit under a sandbox
// fence (docs/sandbox.md), byte for byte, in both profiles.
var sandboxParams = []param{
	{name: "sandbox_permissions", raw: func() json.RawMessage {
		var b bytes.Buffer
		b.WriteString(`{"type":"string","enum":[`)
		for i, m := range SandboxModes {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(jsonString(m))
		}
		b.WriteString(`],"description":`)
		b.Write(jsonString("The wider sandbox mode this file operation needs. Only valid as a one-shot retry of an operation the sandbox just denied; requires justification and user approval."))
		b.WriteByte('}')
		return b.Bytes()
	}()},
	{name: "justification", typ: "string", description: "Required with sandbox_permissions: one sentence for the user explaining why this exact file operation needs the wider access."},
}

// SandboxModes are the values of sandbox_permissions: the modes a call can
// ask to be widened to.
var SandboxModes = []string{"workspace-write", "danger-full-access"}

// Catalog returns read, write and edit, then glob and grep when search is
// true. limit is the configured read limit, quoted in read's schema. The
// profile is applied here and nowhere else: every view of the catalog (REST,
// MCP, OpenAPI) reads it. fenced (a sandbox mode other than off) adds the
// original's sandbox_permissions and justification to write and edit, after
// the original's other properties and before the extended profile's.
func Catalog(limit int, search bool, profile Profile, fenced bool) []Tool {
	ext := profile != ProfileOriginal
	writeParams := []param{
		{name: "file_path", typ: "string", description: "Path to write, resolved by the filesystem backend."},
		{name: "content", typ: "string", description: "Full UTF-8 text content to write."},
	}
	editParams := []param{
		{name: "file_path", typ: "string", description: "Path to edit, resolved by the filesystem backend."},
		{name: "old_string", typ: "string", description: "Literal text to replace. Must match exactly."},
		{name: "new_string", typ: "string", description: "Literal replacement text. Use an empty string to delete the match."},
		{name: "replace_all", typ: "boolean", description: "Replace all matches. Defaults to false; when false, old_string must appear exactly once."},
	}
	editRequired := []string{"file_path", "old_string", "new_string"}
	if fenced {
		writeParams = append(writeParams, sandboxParams...)
		editParams = append(editParams, sandboxParams...)
	}
	if ext {
		dry := param{name: "dry_run", typ: "boolean", description: DescDryRun}
		writeParams = append(writeParams, dry)
		editParams = append(editParams, param{name: "edits", raw: editsSchema}, dry)
		// old_string and new_string are not required: edits may stand in
		// for them (docs/edits.md).
		editRequired = []string{"file_path"}
	}
	tools := []Tool{
		{
			Name:        "read",
			Description: "Read a UTF-8 text file and return line-numbered content.",
			Parameters: schema([]param{
				{name: "file_path", typ: "string", description: "Path to read, resolved by the filesystem backend."},
				{name: "offset", typ: "number", description: "1-based first line to return. Defaults to 1."},
				{name: "limit", typ: "number", description: "Maximum number of lines to return. Defaults to " + strconv.Itoa(limit) + "."},
			}, "file_path"),
			Guidance: "Use the read tool \u2014 not shell commands like cat \u2014 to inspect text files. Results include line numbers. Use offset and limit to continue reading large files.",
		},
		{
			Name:        "write",
			Description: "Create or fully replace a UTF-8 text file.",
			Parameters:  schema(writeParams, "file_path", "content"),
			Guidance:    "Use the write tool to create files or completely replace file contents. Existing files are overwritten, so read an existing file first (the default fs-policy requires it) and prefer edit for targeted changes.",
		},
		{
			Name:        "edit",
			Description: "Edit an existing UTF-8 text file by replacing literal text.",
			Parameters:  schema(editParams, editRequired...),
			Guidance:    "Use the edit tool for targeted changes to existing UTF-8 text files. It replaces literal old_string with new_string; by default old_string must appear exactly once. If old_string appears multiple times, provide a more specific old_string or set replace_all to true. Read the file first (the default fs-policy requires it), unless you just created or edited it in this session.",
		},
	}
	if !search {
		return tools
	}
	return append(tools,
		Tool{
			Name:        "glob",
			Description: "Find files whose paths match a glob pattern. Returns matching file paths \u2014 never directories \u2014 including hidden and ignored files (VCS metadata directories are excluded). Up to 100 paths come back in modification-time order; a larger result instead returns 100 paths sampled across top-level entries and says so. This tool does not enumerate directory entries.",
			Parameters: schema([]param{
				{name: "pattern", typ: "string", description: `Glob pattern to match file paths against (e.g. "**/*.ts", "src/**/*.test.js"). A pattern with no "/" matches the basename at any depth, so "*" and "*.ts" both search the whole tree; include a separator to anchor the depth.`},
				{name: "path", typ: "string", description: "Directory to search in. Defaults to the session workspace; a relative path resolves against it."},
			}, "pattern"),
			Guidance: "Use the glob tool \u2014 not shell find or ls \u2014 to find files by name pattern. Use grep to search file contents.",
		},
		Tool{
			Name:        "grep",
			Description: "Search file contents with a ripgrep regular expression. Returns matching lines with line numbers, grouped by file. Returns the first 250 matches inline and says when there were more. Use read on a matched file for surrounding context.",
			Parameters: schema([]param{
				{name: "pattern", typ: "string", description: "Regular expression to search for (ripgrep syntax)."},
				{name: "path", typ: "string", description: "File or directory to search. Defaults to the session workspace; a relative path resolves against it."},
				{name: "include", typ: "string", description: `One glob filter for which files to search (e.g. "*.ts", "*.{js,jsx}"). Not a list; negation is not supported.`},
			}, "pattern"),
			Guidance: "Use the grep tool \u2014 not shell grep or rg \u2014 to search file contents. Use read on a matched file when you need surrounding context.",
		},
	)
}

// param is one property of a tool's input schema: a type and description,
// or a whole raw schema.
type param struct {
	name, typ, description string
	raw                    json.RawMessage
}

// schema builds {"type":"object","properties":{...},"required":[...]} with
// the keys in the original's order (a Go map would sort them).
func schema(params []param, required ...string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i, p := range params {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(p.name))
		if p.raw != nil {
			b.WriteByte(':')
			b.Write(p.raw)
			continue
		}
		b.WriteString(`:{"type":`)
		b.Write(jsonString(p.typ))
		b.WriteString(`,"description":`)
		b.Write(jsonString(p.description))
		b.WriteByte('}')
	}
	b.WriteString(`},"required":[`)
	for i, r := range required {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(r))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}
