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
	got, err := json.Marshal(map[string]any{"tools": Catalog(2000, true, ProfileOriginal, false, "")})
	require.NoError(t, err)
	assert.Equal(t, catalog2000, string(got))
}

func TestCatalogVariants(t *testing.T) {
	tools := Catalog(500, false, ProfileOriginal, false, "")
	names := make([]string, 0, len(tools))
	for _, tool := range tools {
		names = append(names, tool.Name)
		assert.True(t, json.Valid(tool.Parameters), tool.Name)
	}
	assert.Equal(t, []string{"read", "write", "edit"}, names)
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to read, resolved by the filesystem backend."},"offset":{"type":"number","description":"1-based first line to return. Defaults to 1."},"limit":{"type":"number","description":"Maximum number of lines to return. Defaults to 500."}},"required":["file_path"]}`, string(tools[0].Parameters))
	assert.Len(t, Catalog(2000, true, ProfileOriginal, false, ""), 5)
}

// TestCatalogExtended pins what the extended profile adds: dry_run on write
// and edit and edits on edit, after the original's properties; every other
// byte of the catalog is the original's.
func TestCatalogExtended(t *testing.T) {
	ext, orig := Catalog(2000, true, ProfileExtended, false, ""), Catalog(2000, true, ProfileOriginal, false, "")
	require.Len(t, ext, 8)
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},"content":{"type":"string","description":"Full UTF-8 text content to write."},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path","content"]}`, string(ext[1].Parameters))
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."},"edits":{"type":"array","description":"Several edits applied in order, each to the result of the ones before, all or nothing (1-100 items). Send instead of old_string, new_string and replace_all.","minItems":1,"maxItems":100,"items":{"type":"object","properties":{"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."}},"required":["old_string","new_string"]}},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path"]}`, string(ext[2].Parameters))
	for i := range orig {
		if i == 1 || i == 2 {
			continue
		}
		assert.Equal(t, orig[i], ext[i], ext[i].Name)
	}
	for i := range orig {
		assert.Equal(t, orig[i].Description, ext[i].Description)
		assert.Equal(t, orig[i].Guidance, ext[i].Guidance)
	}
	_, ok := ParseProfile("fancy")
	assert.False(t, ok)
}

func names(tools []Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

// TestCatalogDialects pins which edit tool each dialect lists (one, or
// every one with all), and that the default dialect's catalog is today's,
// byte for byte; the original profile lists edit whatever the dialect.
func TestCatalogDialects(t *testing.T) {
	for d, want := range map[Dialect][]string{
		"":                {"read", "write", "edit", "glob", "grep", "move", "delete", "mkdir"},
		DialectStrReplace: {"read", "write", "edit", "glob", "grep", "move", "delete", "mkdir"},
		DialectApplyPatch: {"read", "write", "apply_patch", "glob", "grep", "move", "delete", "mkdir"},
		DialectAnchors:    {"read", "write", "edit_lines", "glob", "grep", "move", "delete", "mkdir"},
		DialectAll:        {"read", "write", "edit", "apply_patch", "edit_lines", "glob", "grep", "move", "delete", "mkdir"},
	} {
		assert.Equal(t, want, names(Catalog(2000, true, ProfileExtended, false, d)), d)
		assert.Equal(t, []string{"read", "write", "edit", "glob", "grep"}, names(Catalog(2000, true, ProfileOriginal, false, d)), d)
	}
	assert.Equal(t, Catalog(2000, true, ProfileExtended, true, ""), Catalog(2000, true, ProfileExtended, true, DialectStrReplace))
	got, err := json.Marshal(map[string]any{"tools": Catalog(2000, true, ProfileOriginal, false, DialectAnchors)})
	require.NoError(t, err)
	assert.Equal(t, catalog2000, string(got))

	// write recommends the dialect's own edit tool.
	for d, want := range map[Dialect]string{"": "prefer edit for", DialectApplyPatch: "prefer apply_patch for", DialectAnchors: "prefer edit_lines for", DialectAll: "prefer edit for"} {
		assert.Contains(t, Catalog(2000, true, ProfileExtended, false, d)[1].Guidance, want, d)
	}

	anchors := Catalog(2000, true, ProfileExtended, false, DialectAnchors)
	assert.Equal(t, Catalog(2000, true, ProfileExtended, false, "")[0], anchors[0], "read's entry is the same in every dialect")
	lines := anchors[2]
	assert.Equal(t, "Edit an existing UTF-8 text file by line anchors: replace, delete or insert whole lines, each named by the <n>#<tag> anchor read shows before it.", lines.Description)
	assert.Equal(t, `Use the edit_lines tool for targeted changes to existing UTF-8 text files. The read tool shows each line as <n>#<tag>: <text>; name lines by those anchors (e.g. "12#KT"), never by their text. replace puts text in place of the lines start through end (an empty text deletes them); insert_after and insert_before add text next to the line at. Every edit of one call refers to the file as you read it; they apply together or not at all. Read the file first (the default fs-policy requires it); each answer shows the changed lines with their new anchors, so you can go on without reading again.`, lines.Guidance)
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"edits":{"type":"array","description":"The edits, all referring to the file as read, applied together or not at all (1-100 items). They must not overlap.","minItems":1,"maxItems":100,"items":{"type":"object","properties":{"op":{"type":"string","enum":["replace","insert_after","insert_before"],"description":"replace: the lines start through end become text. insert_after, insert_before: text is added after or before the line at."},"start":{"type":"string","description":"replace: the anchor of the first line to replace, as read shows it (e.g. \"12#KT\")."},"end":{"type":"string","description":"replace: the anchor of the last line to replace. Defaults to start (one line)."},"at":{"type":"string","description":"insert_after, insert_before: the anchor of the line to insert next to."},"text":{"type":"string","description":"The new lines, without anchors, separated by newlines. For replace, an empty string deletes the lines."}},"required":["op","text"]}},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path","edits"]}`, string(lines.Parameters))
	fenced := Catalog(2000, true, ProfileExtended, true, DialectAnchors)[2]
	assert.Contains(t, string(fenced.Parameters), `"sandbox_permissions"`)

	for _, s := range []string{"str_replace", "apply_patch", "anchors", "all"} {
		d, ok := ParseDialect(s)
		assert.True(t, ok)
		assert.Equal(t, Dialect(s), d)
	}
	for _, s := range []string{"", "Anchors", "hashline", "edit"} {
		_, ok := ParseDialect(s)
		assert.False(t, ok, s)
	}
	assert.Equal(t, `unknown edit dialect "x": use dialect=str_replace, dialect=apply_patch, dialect=anchors or dialect=all, or no dialect for the server's own (--edit-dialect)`, MsgDialect("x"))
	assert.True(t, DialectAnchors.Anchored())
	assert.True(t, DialectAll.Anchored())
	assert.False(t, DialectStrReplace.Anchored())
	assert.False(t, Dialect("").Anchored())
}

// TestCatalogFileOps pins move, delete and mkdir as the extended profile
// lists them (SPEC §26), byte for byte, without and with the fence's
// escalation arguments; the original profile lists none of them.
func TestCatalogFileOps(t *testing.T) {
	ext := Catalog(2000, true, ProfileExtended, false, "")
	got, err := json.Marshal(ext[5:])
	require.NoError(t, err)
	assert.Equal(t, `[{"name":"move","description":"Move or rename a file or folder inside the workspace. Refuses an existing destination unless overwrite is true and that destination file was read first.","parameters":{"type":"object","properties":{"from":{"type":"string","description":"Path of the file or folder to move, resolved by the filesystem backend."},"to":{"type":"string","description":"Its new path, resolved by the filesystem backend."},"overwrite":{"type":"boolean","description":"Replace an existing destination file (read it first). Defaults to false."}},"required":["from","to"]},"guidance":"Use the move tool — not shell mv — to rename or move a file or folder. Read a file before moving it (the default fs-policy requires it). An existing destination is replaced only with overwrite set to true, after reading it; missing parent folders of the destination are created."},{"name":"delete","description":"Delete a file, or an empty folder. The file must have been read in this session and be unchanged since; a folder that holds anything is never deleted.","parameters":{"type":"object","properties":{"file_path":{"type":"string","description":"Path of the file or empty folder to delete, resolved by the filesystem backend."}},"required":["file_path"]},"guidance":"Use the delete tool — not shell rm — to remove a file you read, or an empty folder. A folder that holds anything is refused: delete its files first."},{"name":"mkdir","description":"Create a folder, with any missing parent folders. An existing folder is fine.","parameters":{"type":"object","properties":{"path":{"type":"string","description":"Path of the folder to create, resolved by the filesystem backend."}},"required":["path"]},"guidance":"Use the mkdir tool — not shell mkdir — to create a folder. write creates a file's missing parent folders by itself."}]`, string(got))
	fenced := Catalog(2000, true, ProfileExtended, true, "")
	for _, tool := range fenced[5:] {
		assert.Contains(t, string(tool.Parameters), `"sandbox_permissions":{"type":"string","enum":["workspace-write","danger-full-access"]`, tool.Name)
		assert.Contains(t, string(tool.Parameters), `"justification":{"type":"string"`, tool.Name)
	}
	for _, tool := range Catalog(2000, true, ProfileOriginal, true, DialectAll) {
		assert.NotContains(t, []string{"move", "delete", "mkdir"}, tool.Name)
	}
}
