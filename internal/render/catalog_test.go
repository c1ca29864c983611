package render

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// catalog2000 is GET /tools for limit 2000 with search on, byte for byte.
const catalog2000 = `{"tools":[{"name":"read","description":"Read a UTF-8 text file and return line-numbered content.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"Path to read, resolved by the filesystem backend."},"offset":{"type":"number","description":"1-based first line to return. Defaults to 1."},"limit":{"type":"number","description":"Maximum number of lines to return. Defaults to 2000."}},"required":["file_path"]},"guidance":"Use the read tool — not shell commands like cat — to inspect text files. Results include line numbers. Use offset and limit to continue reading large files."},{"name":"write","description":"Create or fully replace a UTF-8 text file.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},"content":{"type":"string","description":"Full UTF-8 text content to write."}},"required":["file_path","content"]},"guidance":"Use the write tool to create files or completely replace file contents. Existing files are overwritten, so read an existing file first (the default fs-policy requires it) and prefer edit for targeted changes."},{"name":"edit","description":"Edit an existing UTF-8 text file by replacing literal text.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."}},"required":["file_path","old_string","new_string"]},"guidance":"Use the edit tool for targeted changes to existing UTF-8 text files. It replaces literal old_string with new_string; by default old_string must appear exactly once. If old_string appears multiple times, provide a more specific old_string or set replace_all to true. Read the file first (the default fs-policy requires it), unless you just created or edited it in this session."},{"name":"glob","description":"Find files whose paths match a glob pattern. Returns matching file paths — never directories — including hidden and ignored files (VCS metadata directories are excluded). Up to 100 paths come back in modification-time order; a larger result instead returns 100 paths sampled across top-level entries and says so. This tool does not enumerate directory entries.","parameters":{"type":"object","properties":{"pattern":{"type":"string","description":"Glob pattern to match file paths against (e.g. \"**/*.ts\", \"src/**/*.test.js\"). A pattern with no \"/\" matches the basename at any depth, so \"*\" and \"*.ts\" both search the whole tree; include a separator to anchor the depth."},"path":{"type":"string","description":"Directory to search in. Defaults to the session workspace; a relative path resolves against it."}},"required":["pattern"]},"guidance":"Use the glob tool — not shell find or ls — to find files by name pattern. Use grep to search file contents."},{"name":"grep","description":"Search file contents with a ripgrep regular expression. Returns matching lines with line numbers, grouped by file. Returns the first 250 matches inline and says when there were more. Use read on a matched file for surrounding context.","parameters":{"type":"object","properties":{"pattern":{"type":"string","description":"Regular expression to search for (ripgrep syntax)."},"path":{"type":"string","description":"File or directory to search. Defaults to the session workspace; a relative path resolves against it."},"include":{"type":"string","description":"One glob filter for which files to search (e.g. \"*.ts\", \"*.{js,jsx}\"). Not a list; negation is not supported."}},"required":["pattern"]},"guidance":"Use the grep tool — not shell grep or rg — to search file contents. Use read on a matched file when you need surrounding context."}]}`

func TestCatalogPinned(t *testing.T) {
	got, err := json.Marshal(map[string]any{"tools": Catalog(2000, true, ProfileOriginal, false)})
	require.NoError(t, err)
	assert.Equal(t, catalog2000, string(got))
}

func TestCatalogVariants(t *testing.T) {
	tools := Catalog(500, false, ProfileOriginal, false)
	names := make([]string, 0, len(tools))
	for _, tool := range tools {
		names = append(names, tool.Name)
		assert.True(t, json.Valid(tool.Parameters), tool.Name)
	}
	assert.Equal(t, []string{"read", "write", "edit"}, names)
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to read, resolved by the filesystem backend."},"offset":{"type":"number","description":"1-based first line to return. Defaults to 1."},"limit":{"type":"number","description":"Maximum number of lines to return. Defaults to 500."}},"required":["file_path"]}`, string(tools[0].Parameters))
	assert.Len(t, Catalog(2000, true, ProfileOriginal, false), 5)
}

// TestCatalogExtended pins what the extended profile adds: dry_run on write
// and edit and edits on edit, after the original's properties; every other
// byte of the catalog is the original's.
func TestCatalogExtended(t *testing.T) {
	ext, orig := Catalog(2000, true, ProfileExtended, false), Catalog(2000, true, ProfileOriginal, false)
	require.Len(t, ext, 5)
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},"content":{"type":"string","description":"Full UTF-8 text content to write."},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path","content"]}`, string(ext[1].Parameters))
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."},"edits":{"type":"array","description":"Several edits applied in order, each to the result of the ones before, all or nothing (1-100 items). Send instead of old_string, new_string and replace_all.","minItems":1,"maxItems":100,"items":{"type":"object","properties":{"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."}},"required":["old_string","new_string"]}},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path"]}`, string(ext[2].Parameters))
	for i := range ext {
		if i == 1 || i == 2 {
			continue
		}
		assert.Equal(t, orig[i], ext[i], ext[i].Name)
	}
	for i := range ext {
		assert.Equal(t, orig[i].Description, ext[i].Description)
		assert.Equal(t, orig[i].Guidance, ext[i].Guidance)
	}
	_, ok := ParseProfile("fancy")
	assert.False(t, ok)
}
