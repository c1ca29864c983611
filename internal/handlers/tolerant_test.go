package handlers_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
)

// TestTolerantEdit: the tolerant edit of the extended profile through the
// real server (docs/edits.md, "Tolerant edits"): each disclosed level's
// exact answer, file bytes and metadata; level 1 silent; new_string
// following a CRLF file's endings.
func TestTolerantEdit(t *testing.T) {
	h := start(t, options{})
	for _, tc := range []struct {
		name, file, old, new, want, note, match string
		all                                     bool
	}{
		{name: "prefixes", file: "a\n  b\nc\n", old: "2:   b", new: "2:   B", want: "a\n  B\nc\n",
			note: "\nMatched after removing line-number prefixes at lines 2-2.", match: `{"level":2,"startLine":2,"endLine":2}`},
		{name: "trailing whitespace", file: "if x {  \n\ty()\t\n}\n", old: "if x {\n\ty()\n}", new: "if x {\n\tz()\n}", want: "if x {\n\tz()\n}\n",
			note: "\nMatched after ignoring trailing whitespace at lines 1-3.", match: `{"level":3,"startLine":1,"endLine":3}`},
		{name: "indentation", file: "class A:\n    def f(self):\n        return 1\n", old: "def f(self):\n    return 1\n", new: "def f(self):\n    return 2\n",
			want: "class A:\n    def f(self):\n        return 2\n", note: "\nMatched after ignoring indentation at lines 2-3.", match: `{"level":4,"startLine":2,"endLine":3}`},
		{name: "escapes", file: "say(\"hi\")\nnext()\n", old: `say(\"hi\")\nnext()`, new: `say(\"bye\")\nnext()`, want: "say(\"bye\")\nnext()\n",
			note: "\nMatched after reading escaped characters at lines 1-2.", match: `{"level":5,"startLine":1,"endLine":2}`},
		{name: "punctuation", file: "title = “Hello” — world\n", old: `title = "Hello" - world`, new: `title = "Hi"`, want: "title = \"Hi\"\n",
			note: "\nMatched after normalizing punctuation at lines 1-1.", match: `{"level":6,"startLine":1,"endLine":1}`},
		{name: "several places", file: "  x = 1\ny\n    x = 1\n", old: "x = 1 ", new: "x = 2", all: true, want: "  x = 2\ny\n    x = 2\n",
			note: "\nMatched after ignoring indentation at lines 1-1, 3-3.", match: `{"level":4,"startLine":1,"endLine":1,"places":[{"startLine":1,"endLine":1},{"startLine":3,"endLine":3}]}`},
		{name: "line endings, silent", file: "a\r\nb\r\n", old: "a\nb", new: "x\ny", want: "x\r\ny\r\n"},
		{name: "CRLF old in an LF file, silent", file: "a\nb\n", old: "a\r\nb", new: "x\r\ny", want: "x\ny\n"},
		{name: "literal, new_string takes the file's CRLF", file: "one\r\ntwo\r\n", old: "two", new: "2\n3", want: "one\r\n2\r\n3\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := h.file("f.txt", tc.file)
			require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "f.txt"}).Status)
			r := h.tool("edit", "s1", obj{"file_path": "f.txt", "old_string": tc.old, "new_string": tc.new, "replace_all": tc.all})
			require.Equal(t, 200, r.Status, r.Raw)
			sentence := render.EditOutput(p, tc.all)
			assert.Equal(t, sentence+tc.note, r.Output)
			assert.Equal(t, tc.want, h.contents("f.txt"))
			if tc.match == "" {
				assert.NotContains(t, string(r.Metadata), `"match"`)
			} else {
				assert.Contains(t, string(r.Metadata), `"match":`+tc.match)
			}
		})
	}
}

// TestTolerantEditTexts: the exact answers around the disclosure: a batch
// (one line per tolerant item), a dry run, an ambiguous place at a
// tolerant level, and the original profile, which keeps the literal rules.
func TestTolerantEditTexts(t *testing.T) {
	h := start(t, options{})
	p := h.file("f.txt", "one\n  two\nthree  \nfour\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "f.txt"}).Status)

	r := h.tool("edit", "s1", obj{"file_path": "f.txt", "edits": []obj{
		{"old_string": "one", "new_string": "1"},
		{"old_string": "2:   two", "new_string": "2:   2"},
		{"old_string": "three", "new_string": "3"},
		{"old_string": "  four", "new_string": "4"},
	}, "dry_run": true})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "Dry run: no changes were written to \""+p+"\".\nedit 2 of 4: Matched after removing line-number prefixes at lines 2-2.\nedit 4 of 4: Matched after ignoring indentation at lines 4-4.\n"+
		"--- "+p+"\n+++ "+p+"\n@@ -1,4 +1,4 @@\n-one\n-  two\n-three  \n-four\n+1\n+  2\n+3  \n+4", r.Output)
	assert.JSONEq(t, `{"diffs":[{"path":"f.txt","oldText":"one\n  two\nthree  \nfour","newText":"1\n  2\n3  \n4"}],`+
		`"matches":[{"edit":2,"level":2,"startLine":2,"endLine":2},{"edit":4,"level":4,"startLine":4,"endLine":4}]}`, string(r.Metadata))
	assert.Equal(t, "one\n  two\nthree  \nfour\n", h.contents("f.txt"), "a dry run writes nothing")

	r = h.tool("edit", "s1", obj{"file_path": "f.txt", "edits": []obj{{"old_string": "one", "new_string": "1"}, {"old_string": "  four", "new_string": "4"}}})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully. Applied 2 edits.\nedit 2 of 2: Matched after ignoring indentation at lines 4-4.", r.Output)

	q := h.file("g.txt", "  a\n  b\nc\n    a\n    b\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "g.txt"}).Status)
	r = h.tool("edit", "s1", obj{"file_path": "g.txt", "old_string": "a\nb", "new_string": "x"})
	require.Equal(t, 422, r.Status)
	assert.Equal(t, "FS_AMBIGUOUS_EDIT", r.Code)
	assert.Equal(t, "Error: old_string matched 2 times in \""+q+"\"; provide a more specific old_string or set replace_all to true\nMatches start at lines 1, 4.", r.Output)
	assert.Equal(t, "  a\n  b\nc\n    a\n    b\n", h.contents("g.txt"))

	o := start(t, options{profile: render.ProfileOriginal})
	op := o.file("f.txt", "one\r\n  two\r\n")
	require.Equal(t, 200, o.tool("read", "s1", obj{"file_path": "f.txt"}).Status)
	r = o.tool("edit", "s1", obj{"file_path": "f.txt", "old_string": "two ", "new_string": "2"})
	assert.Equal(t, "Error: old_string was not found in \""+op+"\"", r.Output)
	r = o.tool("edit", "s1", obj{"file_path": "f.txt", "old_string": "one", "new_string": "1\n1"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+op+" has been updated successfully.", r.Output)
	assert.Equal(t, "1\n1\r\n  two\r\n", o.contents("f.txt"), "the original profile writes new_string as sent")
	assert.NotContains(t, string(r.Metadata), `"match"`)
}
