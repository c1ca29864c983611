package handlers_test

import (
	"encoding/json"
	"github.com/toolfs/toolfs-api/internal/render"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCatalogProfiles: the default (extended) catalog adds dry_run and
// edits after the original's properties; every other byte is the
// original profile's.
func TestCatalogProfiles(t *testing.T) {
	tools := func(h *harness) []map[string]json.RawMessage {
		r := h.do(http.MethodGet, "/tools", "")
		require.Equal(t, 200, r.Status)
		var cat struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Raw), &cat))
		return cat.Tools
	}
	ext, orig := tools(start(t, options{})), tools(start(t, options{profile: "original"}))
	require.Equal(t, len(orig)+3, len(ext), "move, delete and mkdir")
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},"content":{"type":"string","description":"Full UTF-8 text content to write."},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path","content"]}`, string(ext[1]["parameters"]))
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."},"edits":{"type":"array","description":"Several edits applied in order, each to the result of the ones before, all or nothing (1-100 items). Send instead of old_string, new_string and replace_all.","minItems":1,"maxItems":100,"items":{"type":"object","properties":{"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."}},"required":["old_string","new_string"]}},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path"]}`, string(ext[2]["parameters"]))
	for i := range orig {
		for k, v := range orig[i] {
			if k == "parameters" && (i == 1 || i == 2) {
				continue
			}
			assert.Equal(t, string(v), string(ext[i][k]), "tool %d %s", i, k)
		}
	}
}

// TestDryRun: a dry run of write and edit checks everything, writes and
// records nothing, and answers the unified diff and the real call's diffs.
func TestDryRun(t *testing.T) {
	h := start(t, options{})
	p := h.file("a.txt", "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)
	before, err := os.Stat(p)
	require.NoError(t, err)

	r := h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "five\n", "new_string": "FIVE\n5\n", "dry_run": true})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "Dry run: no changes were written to \""+p+"\".\n--- "+p+"\n+++ "+p+"\n@@ -2,7 +2,8 @@\n two\n three\n four\n-five\n+FIVE\n+5\n six\n seven\n eight", r.Output)
	assert.JSONEq(t, `{"diffs":[{"path":"a.txt","oldText":"two\nthree\nfour\nfive\nsix\nseven\neight","newText":"two\nthree\nfour\nFIVE\n5\nsix\nseven\neight"}]}`, string(r.Metadata))
	assert.Equal(t, "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n", h.contents("a.txt"))
	after, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, before.ModTime(), after.ModTime())

	// The real call gives the same diffs.
	real := h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "five\n", "new_string": "FIVE\n5\n"})
	require.Equal(t, 200, real.Status, real.Raw)
	assert.JSONEq(t, string(r.Metadata), string(real.Metadata))

	// A failure is the real call's error.
	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "nine", "new_string": "9", "dry_run": true})
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "FS_EDIT_NOT_FOUND", r.Code)
	r = h.tool("edit", "s2", obj{"file_path": "a.txt", "old_string": "one", "new_string": "1", "dry_run": true})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "Error: edit requires reading \""+p+"\" first \u2014 read the file, then retry", r.Output)

	// Write: an update's dry run shows the diff and changes nothing.
	r = h.tool("write", "s1", obj{"file_path": "a.txt", "content": "one\n", "dry_run": true})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "Dry run: no changes were written to \""+p+"\".\n--- "+p+"\n+++ "+p+"\n@@ -1,9 +1,1 @@\n one\n-two\n-three\n-four\n-FIVE\n-5\n-six\n-seven\n-eight", r.Output)
	assert.JSONEq(t, `{"operation":"update","diffs":[{"path":"a.txt","oldText":"one\ntwo\nthree\nfour\nFIVE\n5\nsix\nseven\neight","newText":"one"}]}`, string(r.Metadata))
	assert.Equal(t, "one\ntwo\nthree\nfour\nFIVE\n5\nsix\nseven\neight\n", h.contents("a.txt"))

	// A create's dry run makes nothing, not even the parent folders, and
	// records nothing: a dry run does not authorize a later write.
	np := h.path("new/dir/b.txt")
	r = h.tool("write", "s1", obj{"file_path": "new/dir/b.txt", "content": "x\ny\n", "dry_run": true})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "Dry run: no changes were written to \""+np+"\".\n--- "+np+"\n+++ "+np+"\n@@ -0,0 +1,2 @@\n+x\n+y", r.Output)
	assert.JSONEq(t, `{"operation":"create","diffs":[]}`, string(r.Metadata))
	assert.NoDirExists(t, h.path("new"))

	h.file("unread.txt", "u\n")
	r = h.tool("write", "s3", obj{"file_path": "unread.txt", "content": "v\n", "dry_run": true})
	assert.Equal(t, 409, r.Status, "a dry run over an unread file is refused as the real call is")
	assert.Equal(t, "FS_NOT_OBSERVED", r.Code)
	r = h.tool("write", "s3", obj{"file_path": "c.txt", "content": "v\n", "dry_run": true})
	require.Equal(t, 200, r.Status)
	h.file("c.txt", "someone else\n")
	r = h.tool("write", "s3", obj{"file_path": "c.txt", "content": "v\n"})
	assert.Equal(t, 409, r.Status, "the dry run recorded nothing")
	assert.Equal(t, "FS_NOT_OBSERVED", r.Code)

	// Argument check.
	r = h.tool("write", "s1", obj{"file_path": "a.txt", "content": "x", "dry_run": "yes"})
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "Error: dry_run must be a boolean", r.Output)
	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "x", "new_string": "y", "dry_run": 1})
	assert.Equal(t, "Error: dry_run must be a boolean", r.Output)
	// null counts as absent: a real write.
	r = h.tool("write", "s1", obj{"file_path": "a.txt", "content": "z\n", "dry_run": nil})
	require.Equal(t, 200, r.Status)
	assert.Equal(t, "z\n", h.contents("a.txt"))
}

// TestDryRunDoesNotObserve: after a dry run of an edit, the session's
// observation is what its read recorded, so an outside change is still
// caught.
func TestDryRunDoesNotObserve(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "alpha\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)
	require.Equal(t, 200, h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "alpha", "new_string": "beta", "dry_run": true}).Status)
	h.file("a.txt", "gamma\n")
	r := h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "gamma", "new_string": "delta"})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "FS_STALE_VERSION", r.Code)
}

// TestEditBatch: edits apply in order, each on the result of the ones
// before, all or nothing.
func TestEditBatch(t *testing.T) {
	h := start(t, options{})
	p := h.file("a.txt", "alpha\nbeta\ngamma\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)

	r := h.tool("edit", "s1", obj{"file_path": "a.txt", "edits": []obj{
		{"old_string": "alpha", "new_string": "ALPHA"},
		{"old_string": "gamma", "new_string": "delta"},
		{"old_string": "nope", "new_string": "x"},
	}})
	require.Equal(t, 422, r.Status, r.Raw)
	assert.Equal(t, "FS_EDIT_NOT_FOUND", r.Code)
	assert.Equal(t, "Error: edit 3 of 3: old_string was not found in \""+p+"\"", r.Output)
	assert.Equal(t, "alpha\nbeta\ngamma\n", h.contents("a.txt"), "nothing written")

	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "edits": []obj{
		{"old_string": "alpha", "new_string": "ALPHA"},
		{"old_string": "zeta", "new_string": "x"},
		{"old_string": "gamma", "new_string": "delta"},
	}})
	assert.Equal(t, "Error: edit 2 of 3: old_string was not found in \""+p+"\"", r.Output)
	assert.Equal(t, "alpha\nbeta\ngamma\n", h.contents("a.txt"))

	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "edits": []obj{
		{"old_string": "alpha", "new_string": "ALPHA"},
		{"old_string": "gamma", "new_string": "delta"},
		{"old_string": "ALPHA\nbeta", "new_string": "first\nsecond"}, // text edit 1 made
	}})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully. Applied 3 edits.", r.Output)
	assert.Equal(t, "first\nsecond\ndelta\n", h.contents("a.txt"))
	assert.JSONEq(t, `{"diffs":[{"path":"a.txt","oldText":"alpha\nbeta\ngamma","newText":"first\nsecond\ndelta"}]}`, string(r.Metadata))

	// The session may edit again without a read; one item answers as a
	// single edit, by its replace_all.
	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "edits": []obj{{"old_string": "e", "new_string": "E", "replace_all": true}}})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated. All occurrences were successfully replaced.", r.Output)
	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "edits": []obj{{"old_string": "first", "new_string": "1st"}}})
	assert.Equal(t, "The file "+p+" has been updated successfully.", r.Output)
	assert.Equal(t, "1st\nsEcond\ndElta\n", h.contents("a.txt"))

	// Ambiguous, in a batch.
	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "edits": []obj{{"old_string": "1st", "new_string": "x"}, {"old_string": "E", "new_string": "e"}}})
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "Error: edit 2 of 2: old_string matched 2 times in \""+p+"\"; provide a more specific old_string or set replace_all to true\nMatches start at lines 2, 3.", r.Output)
	assert.Equal(t, "1st\nsEcond\ndElta\n", h.contents("a.txt"))
}

// TestEditBatchCRLF: each edit of a batch has the CRLF-adapted retry, and
// every other byte (a lone CR, LF-only lines) is kept.
func TestEditBatchCRLF(t *testing.T) {
	h := start(t, options{})
	h.file("w.txt", "one\r\ntwo\r\nthree\rx\nfour\r\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "w.txt"}).Status)
	r := h.tool("edit", "s1", obj{"file_path": "w.txt", "edits": []obj{
		{"old_string": "one\ntwo\n", "new_string": "ONE\nTWO\n"},
		{"old_string": "x\nfour", "new_string": "y\nfive"}, // the literal bytes match: kept as sent
	}})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "ONE\r\nTWO\r\nthree\ry\nfive\r\n", h.contents("w.txt"))
}

func TestEditBatchArguments(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "alpha\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)
	many := make([]obj, 101)
	for i := range many {
		many[i] = obj{"old_string": "a", "new_string": "b"}
	}
	for _, tc := range []struct {
		name string
		body obj
		want string
	}{
		{"both forms", obj{"file_path": "a.txt", "old_string": "a", "new_string": "b", "edits": []obj{{"old_string": "a", "new_string": "b"}}}, "provide either old_string and new_string, or edits, not both"},
		{"new_string beside edits", obj{"file_path": "a.txt", "new_string": "b", "edits": []obj{{"old_string": "a", "new_string": "b"}}}, "provide either old_string and new_string, or edits, not both"},
		{"empty", obj{"file_path": "a.txt", "edits": []obj{}}, "edits must contain between 1 and 100 edits"},
		{"too many", obj{"file_path": "a.txt", "edits": many}, "edits must contain between 1 and 100 edits"},
		{"not an array", obj{"file_path": "a.txt", "edits": "x"}, "edits must be an array of {old_string, new_string, replace_all} objects"},
		{"item empty old", obj{"file_path": "a.txt", "edits": []obj{{"old_string": "a", "new_string": "b"}, {"old_string": "", "new_string": "b"}}}, "edits[1].old_string must be a non-empty string"},
		{"item missing old", obj{"file_path": "a.txt", "edits": []obj{{"new_string": "b"}}}, "edits[0].old_string must be a non-empty string"},
		{"item equal", obj{"file_path": "a.txt", "edits": []obj{{"old_string": "a", "new_string": "a"}}}, "edits[0].old_string and new_string must differ"},
		{"item missing new", obj{"file_path": "a.txt", "edits": []obj{{"old_string": "a"}}}, "edits[0].new_string must be a string"},
		{"item not object", obj{"file_path": "a.txt", "edits": []any{"a"}}, "edits[0] must be an object with old_string and new_string"},
		{"neither form", obj{"file_path": "a.txt"}, "old_string must be a non-empty string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.tool("edit", "s1", tc.body)
			assert.Equal(t, 400, r.Status, r.Raw)
			assert.Equal(t, "INVALID_ARGUMENT", r.Code)
			assert.Equal(t, "Error: "+tc.want, r.Output)
		})
	}
	// null counts as absent: edits beside a null old_string is fine.
	r := h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": nil, "new_string": nil, "replace_all": nil, "edits": []obj{{"old_string": "alpha", "new_string": "beta", "replace_all": nil}}})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "beta\n", h.contents("a.txt"))
}

// TestEditBatchTooLarge: a batch holds the file in memory, so a file above
// the budget is refused before anything is read.
func TestEditBatchTooLarge(t *testing.T) {
	h := start(t, options{})
	p := h.file("big.txt", strings.Repeat("x\n", 32<<20)+"y")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "big.txt", "limit": 1}).Status)
	r := h.tool("edit", "s1", obj{"file_path": "big.txt", "edits": []obj{{"old_string": "x", "new_string": "y"}}})
	assert.Equal(t, 422, r.Status, r.Raw)
	assert.Equal(t, "FS_TOO_LARGE", r.Code)
	assert.Equal(t, "Error: cannot edit \""+p+"\": the file is larger than 64 MiB, the most a batch of edits holds in memory; send the edits one at a time", r.Output)
}

// TestEditHints: a miss shows the most similar region with its line
// numbers, in the text and in the problem's hint; the first line stays the
// original's message.
func TestEditHints(t *testing.T) {
	h := start(t, options{})
	body := "package main\n\nimport \"fmt\"\n\nfunc total(xs []int) int {\n\tsum := 0\n\tfor _, x := range xs {\n\t\tsum += x\n\t}\n\treturn sum\n}\n\nfunc main() {\n\tfmt.Println(total([]int{1, 2}))\n}\n"
	p := h.file("m.go", body)
	lf := h.file("lf.txt", "first\nsecond\nthird\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "m.go"}).Status)
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "lf.txt"}).Status)
	for _, tc := range []struct {
		name, file, old, hint string
		start, end            int
		lines                 []string
	}{
		{"whitespace only", "m.go", "func main() {\n    fmt.Println(total([]int{1, 2}))\n}", "\nMost similar text (lines 13-15):\n13: func main() {\n14: \tfmt.Println(total([]int{1, 2}))\n15: }", 13, 15, []string{"func main() {", "\tfmt.Println(total([]int{1, 2}))", "}"}},
		{"tab vs spaces", "m.go", "    for _, x := range xs {\n        sum += x\n    }\n", "\nMost similar text (lines 7-9):\n7: \tfor _, x := range xs {\n8: \t\tsum += x\n9: \t}", 7, 9, []string{"\tfor _, x := range xs {", "\t\tsum += x", "\t}"}},
		{"one word", "m.go", "\tsum := 0\n\tfor _, y := range xs {\n\t\tsum += x\n", "\nMost similar text (lines 6-8):\n6: \tsum := 0\n7: \tfor _, x := range xs {\n8: \t\tsum += x", 6, 8, []string{"\tsum := 0", "\tfor _, x := range xs {", "\t\tsum += x"}},
		// Trailing whitespace alone, or line endings alone, now apply (the
		// tolerant edit, TestTolerantEdit): each case differs in one more
		// way here.
		{"one line, spaces", "m.go", "\treturn  sum \n", "\nMost similar text (line 10):\n10: \treturn sum", 10, 10, []string{"\treturn sum"}},
		{"CRLF vs LF, one character", "lf.txt", "second\r\nthird!\r\n", "\nMost similar text (lines 2-3):\n2: second\n3: third", 2, 3, []string{"second", "third"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.tool("edit", "s1", obj{"file_path": tc.file, "old_string": tc.old, "new_string": "X"})
			require.Equal(t, 422, r.Status, r.Raw)
			display := p
			if tc.file == "lf.txt" {
				display = lf
			}
			assert.Equal(t, "Error: old_string was not found in \""+display+"\""+tc.hint, r.Output)
			var pb struct {
				Hint *struct {
					StartLine int      `json:"startLine"`
					EndLine   int      `json:"endLine"`
					Lines     []string `json:"lines"`
				} `json:"hint"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Raw), &pb))
			require.NotNil(t, pb.Hint)
			assert.Equal(t, tc.start, pb.Hint.StartLine)
			assert.Equal(t, tc.end, pb.Hint.EndLine)
			assert.Equal(t, tc.lines, pb.Hint.Lines)
		})
	}

	// Nothing close: no hint, no hint member.
	r := h.tool("edit", "s1", obj{"file_path": "m.go", "old_string": "completely unrelated\ntext here\n", "new_string": "X"})
	assert.Equal(t, "Error: old_string was not found in \""+p+"\"", r.Output)
	assert.NotContains(t, r.Raw, `"hint"`)

	// The same in a batch: the hint follows the prefixed first line.
	r = h.tool("edit", "s1", obj{"file_path": "m.go", "edits": []obj{{"old_string": "package main", "new_string": "package x"}, {"old_string": "\treturn  sum", "new_string": "X"}}})
	assert.Equal(t, "Error: edit 2 of 2: old_string was not found in \""+p+"\"\nMost similar text (line 10):\n10: \treturn sum", r.Output)
}

// TestEditHintTruncated: a hint's line is truncated as read truncates.
func TestEditHintTruncated(t *testing.T) {
	h := start(t, options{caps: &render.Caps{Limit: 2000, MaxLineLength: 5, MaxBytes: 51200}})
	p := h.file("a.txt", "x\nabcdefghij\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)
	r := h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "abcde fghij", "new_string": "X"})
	assert.Equal(t, "Error: old_string was not found in \""+p+"\"\nMost similar text (line 2):\n2: abcde... (line truncated to 5 chars)", r.Output)
	assert.Contains(t, r.Raw, `"hint":{"startLine":2,"endLine":2,"lines":["abcde... (line truncated to 5 chars)"]}`)
}

// TestAmbiguousHint lists every match's first line, capped at 20.
func TestAmbiguousHint(t *testing.T) {
	h := start(t, options{})
	p := h.file("a.txt", strings.Repeat("x = 1\ny\n", 25))
	q := h.file("b.txt", "k\nz\nk\nz\nk\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "b.txt"}).Status)
	r := h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"})
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "Error: old_string matched 25 times in \""+p+"\"; provide a more specific old_string or set replace_all to true\nMatches start at lines 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37, 39, ....", r.Output)
	r = h.tool("edit", "s1", obj{"file_path": "b.txt", "old_string": "k\nz", "new_string": "q"})
	assert.Equal(t, "Error: old_string matched 2 times in \""+q+"\"; provide a more specific old_string or set replace_all to true\nMatches start at lines 1, 3.", r.Output)
}

// TestOriginalProfileNoHints: with --profile original both miss texts are
// exactly the original's.
func TestOriginalProfileNoHints(t *testing.T) {
	h := start(t, options{profile: render.ProfileOriginal})
	p := h.file("a.txt", "alpha\nbeta\nbeta\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)
	r := h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "alpha ", "new_string": "X"})
	assert.Equal(t, "Error: old_string was not found in \""+p+"\"", r.Output)
	assert.NotContains(t, r.Raw, `"hint"`)
	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "old_string": "beta", "new_string": "X"})
	assert.Equal(t, "Error: old_string matched 2 times in \""+p+"\"; provide a more specific old_string or set replace_all to true", r.Output)
	// Both profiles accept the extended arguments.
	r = h.tool("edit", "s1", obj{"file_path": "a.txt", "edits": []obj{{"old_string": "alpha", "new_string": "A"}}, "dry_run": true})
	assert.Equal(t, 200, r.Status, r.Raw)
}

// TestNoFalseStaleness: a file whose version changed but whose bytes are
// what the session read is not stale (touch, chmod, a same-content
// rewrite); one changed byte is.
func TestNoFalseStaleness(t *testing.T) {
	h := start(t, options{})
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name   string
		change func(p string)
	}{
		{"touch", func(p string) { require.NoError(t, os.Chtimes(p, later, later)) }},
		{"chmod", func(p string) { require.NoError(t, os.Chmod(p, 0o600)) }},
		{"same-content rewrite", func(p string) { // a new inode, as a checkout makes
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-") + ".txt"
			p := h.file(name, "alpha\nbeta\n")
			require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": name}).Status)
			tc.change(p)
			r := h.tool("edit", "s1", obj{"file_path": name, "old_string": "alpha", "new_string": "gamma"})
			require.Equal(t, 200, r.Status, r.Raw)
			assert.Equal(t, "gamma\nbeta\n", h.contents(name))

			// The edit recorded the new version; a write after another
			// metadata-only change is not stale either.
			tc.change(p)
			r = h.tool("write", "s1", obj{"file_path": name, "content": "delta\n"})
			require.Equal(t, 200, r.Status, r.Raw)
			assert.Equal(t, "delta\n", h.contents(name))
		})
	}

	t.Run("one changed byte", func(t *testing.T) {
		p := h.file("byte.txt", "alpha\nbeta\n")
		require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "byte.txt"}).Status)
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, []byte("alpha\nbetA\n"), 0o644))
		require.NoError(t, os.Chtimes(p, st.ModTime(), st.ModTime())) // mtime restored
		r := h.tool("edit", "s1", obj{"file_path": "byte.txt", "old_string": "alpha", "new_string": "gamma"})
		assert.Equal(t, 409, r.Status)
		assert.Equal(t, "Error: cannot edit \""+p+"\": file changed since it was read \u2014 re-read the file, then retry", r.Output)
		r = h.tool("write", "s1", obj{"file_path": "byte.txt", "content": "x"})
		assert.Equal(t, 409, r.Status)
		assert.Equal(t, "Error: cannot write \""+p+"\": file changed since it was read \u2014 re-read the file, then retry", r.Output)
		assert.Equal(t, "alpha\nbetA\n", h.contents("byte.txt"))
	})

	t.Run("batch after touch", func(t *testing.T) {
		p := h.file("batch.txt", "a\nb\n")
		require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "batch.txt"}).Status)
		require.NoError(t, os.Chtimes(p, later, later))
		r := h.tool("edit", "s1", obj{"file_path": "batch.txt", "edits": []obj{{"old_string": "a", "new_string": "c"}, {"old_string": "b", "new_string": "d"}}})
		require.Equal(t, 200, r.Status, r.Raw)
		assert.Equal(t, "c\nd\n", h.contents("batch.txt"))
	})
}

// TestEditBatchItemDuplicateKey: an item is decoded as strictly as a body.
func TestEditBatchItemDuplicateKey(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "alpha\n")
	require.Equal(t, 200, h.tool("read", "s1", obj{"file_path": "a.txt"}).Status)
	r := h.do(http.MethodPost, "/tools/edit", `{"file_path":"a.txt","edits":[{"old_string":"alpha","old_string":"x","new_string":"b"}]}`, "X-Session-ID", "s1")
	assert.Equal(t, 400, r.Status, r.Raw)
	assert.Equal(t, `Error: edits[0]: request body has a duplicate key "old_string"`, r.Output)
	assert.Equal(t, "alpha\n", h.contents("a.txt"))
}
