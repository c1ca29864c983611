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

// Catalog returns read, write and edit, then glob and grep when search is
// true. limit is the configured read limit, quoted in read's schema.
func Catalog(limit int, search bool) []Tool {
	tools := []Tool{
		{
			Name:        "read",
			Description: "Read a UTF-8 text file and return line-numbered content.",
			Parameters: schema([]param{
				{"file_path", "string", "Path to read, resolved by the filesystem backend."},
				{"offset", "number", "1-based first line to return. Defaults to 1."},
				{"limit", "number", "Maximum number of lines to return. Defaults to " + strconv.Itoa(limit) + "."},
			}, "file_path"),
			Guidance: "Use the read tool \u2014 not shell commands like cat \u2014 to inspect text files. Results include line numbers. Use offset and limit to continue reading large files.",
		},
		{
			Name:        "write",
			Description: "Create or fully replace a UTF-8 text file.",
			Parameters: schema([]param{
				{"file_path", "string", "Path to write, resolved by the filesystem backend."},
				{"content", "string", "Full UTF-8 text content to write."},
			}, "file_path", "content"),
			Guidance: "Use the write tool to create files or completely replace file contents. Existing files are overwritten, so read an existing file first (the default fs-policy requires it) and prefer edit for targeted changes.",
		},
		{
			Name:        "edit",
			Description: "Edit an existing UTF-8 text file by replacing literal text.",
			Parameters: schema([]param{
				{"file_path", "string", "Path to edit, resolved by the filesystem backend."},
				{"old_string", "string", "Literal text to replace. Must match exactly."},
				{"new_string", "string", "Literal replacement text. Use an empty string to delete the match."},
				{"replace_all", "boolean", "Replace all matches. Defaults to false; when false, old_string must appear exactly once."},
			}, "file_path", "old_string", "new_string"),
			Guidance: "Use the edit tool for targeted changes to existing UTF-8 text files. It replaces literal old_string with new_string; by default old_string must appear exactly once. If old_string appears multiple times, provide a more specific old_string or set replace_all to true. Read the file first (the default fs-policy requires it), unless you just created or edited it in this session.",
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
				{"pattern", "string", `Glob pattern to match file paths against (e.g. "**/*.ts", "src/**/*.test.js"). A pattern with no "/" matches the basename at any depth, so "*" and "*.ts" both search the whole tree; include a separator to anchor the depth.`},
				{"path", "string", "Directory to search in. Defaults to the session workspace; a relative path resolves against it."},
			}, "pattern"),
			Guidance: "Use the glob tool \u2014 not shell find or ls \u2014 to find files by name pattern. Use grep to search file contents.",
		},
		Tool{
			Name:        "grep",
			Description: "Search file contents with a ripgrep regular expression. Returns matching lines with line numbers, grouped by file. Returns the first 250 matches inline and says when there were more. Use read on a matched file for surrounding context.",
			Parameters: schema([]param{
				{"pattern", "string", "Regular expression to search for (ripgrep syntax)."},
				{"path", "string", "File or directory to search. Defaults to the session workspace; a relative path resolves against it."},
				{"include", "string", `One glob filter for which files to search (e.g. "*.ts", "*.{js,jsx}"). Not a list; negation is not supported.`},
			}, "pattern"),
			Guidance: "Use the grep tool \u2014 not shell grep or rg \u2014 to search file contents. Use read on a matched file when you need surrounding context.",
		},
	)
}

// param is one property of a tool's input schema.
type param struct{ name, typ, description string }

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
