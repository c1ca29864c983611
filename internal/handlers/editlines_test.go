package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
)

// tenLinesFile is "line 1" to "line 10"; "line 3" and "line 8" share the
// tag SR.
var tenLinesFile = func() string {
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	return b.String()
}()

// anchor is "<n>#<tag>" of a line whose text is text.
func anchor(n int, text string) string { return render.Anchor(n, render.TagString(text)) }

// TestAnchoredReadGolden: in the anchors dialect read shows <n>#<tag>:
// <text>, over POST /tools/read?dialect=anchors (JSON and streamed) and
// /model/read?dialect=anchors; the metadata's lines carry their tags; the
// window, footer and byte cap are the plain read's, which is unchanged.
func TestAnchoredReadGolden(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "hello\r\nworld\n\nlast")
	p := h.path("a.txt")
	want := "<path>" + p + "</path>\n<type>file</type>\n<content>\n1#SW: hello\n2#TP: world\n3#CR: \n4#" + render.TagString("last") + ": last\n\n(End of file - total 4 lines)\n</content>"

	r := h.tool("read", "s", obj{"file_path": "a.txt"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\n1: hello\n2: world\n3: \n4: last\n\n(End of file - total 4 lines)\n</content>", r.Output)
	assert.NotContains(t, string(r.Metadata), `"tag"`)

	r = h.do(http.MethodPost, "/tools/read?dialect=anchors", `{"file_path":"a.txt"}`, "X-Session-ID", "s")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, want, r.Output)
	assert.Equal(t, `{"path":`+jsonQuote(p)+`,"offset":1,"lines":[{"number":1,"text":"hello","tag":"SW"},{"number":2,"text":"world","tag":"TP"},{"number":3,"text":"","tag":"CR"},{"number":4,"text":"last","tag":"`+render.TagString("last")+`"}],"totalLines":4}`, string(r.Metadata))

	for _, d := range []string{"anchors", "all"} {
		r = h.do(http.MethodPost, "/tools/read?dialect="+d, `{"file_path":"a.txt"}`, "Accept", "text/plain")
		require.Equal(t, 200, r.Status, r.Raw)
		assert.Equal(t, want, r.Raw, "streamed, %s", d)
		r = h.do(http.MethodPost, "/model/read?dialect="+d, `{"file_path":"a.txt"}`)
		require.Equal(t, 200, r.Status, r.Raw)
		assert.Equal(t, want, r.Raw, "model text, %s", d)
	}
	// A window capped by bytes is the same window: the anchor is a prefix.
	capped := start(t, options{caps: &render.Caps{Limit: 2000, MaxLineLength: 2000, MaxBytes: 11}})
	capped.file("a.txt", "hello\nworld\nagain\n")
	r = capped.do(http.MethodPost, "/tools/read?dialect=anchors", `{"file_path":"a.txt"}`)
	assert.Equal(t, "<path>"+capped.path("a.txt")+"</path>\n<type>file</type>\n<content>\n1#SW: hello\n2#TP: world\n\n(Output capped. Showing lines 1-2. Use offset=3 to continue.)\n</content>", r.Output)

	r = h.do(http.MethodPost, "/tools/read?dialect=hashline", `{"file_path":"a.txt"}`)
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "INVALID_ARGUMENT", r.Code)
	assert.Equal(t, `Error: unknown edit dialect "hashline": use dialect=str_replace, dialect=apply_patch, dialect=anchors or dialect=all, or no dialect for the server's own (--edit-dialect)`, r.Output)
	r = h.do(http.MethodPost, "/tools/read?dialect=anchors&dialect=all", `{"file_path":"a.txt"}`)
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "Error: give dialect at most once: dialect=str_replace, dialect=apply_patch, dialect=anchors or dialect=all", r.Output)
	r = h.do(http.MethodPost, "/tools/read?dialect=", `{"file_path":"a.txt"}`)
	assert.Equal(t, 200, r.Status, "an empty dialect is the server's")
	assert.True(t, strings.Contains(r.Output, "\n1: hello\n"), r.Output)
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// editLines posts an edit_lines call in session s.
func (h *harness) editLines(edits ...obj) reply {
	h.t.Helper()
	return h.tool("edit_lines", "s", obj{"file_path": "a.txt", "edits": edits})
}

// TestEditLinesThroughTheServer: replace, insert and delete by anchor, the
// exact answers with the new anchors, the file's bytes; the policy is the
// edit's (read first, unchanged since).
func TestEditLinesThroughTheServer(t *testing.T) {
	h := start(t, options{checkpoints: true})
	h.file("a.txt", "one\ntwo\nthree\n")
	p := h.path("a.txt")

	r := h.editLines(obj{"op": "replace", "start": "2#PM", "text": "TWO"})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, `Error: edit_lines requires reading "`+p+`" first — read the file, then retry`, r.Output)

	require.Equal(t, 200, h.tool("read", "s", obj{"file_path": "a.txt"}).Status)
	r = h.editLines(obj{"op": "replace", "start": "2#PM", "text": "TWO"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully.\nLines 2-2 now:\n"+anchor(2, "TWO")+": TWO", r.Output)
	assert.Equal(t, "one\nTWO\nthree\n", h.contents("a.txt"))
	var meta struct {
		Diffs  []render.Diff `json:"diffs"`
		Shift  int           `json:"shift"`
		Region struct {
			StartLine, EndLine int
			Lines              []render.Line
		} `json:"region"`
	}
	require.NoError(t, json.Unmarshal(r.Metadata, &meta))
	require.Len(t, meta.Diffs, 1)
	assert.Equal(t, "a.txt", meta.Diffs[0].Path)
	assert.Equal(t, 2, meta.Region.StartLine)
	assert.Equal(t, []render.Line{{Number: 2, Text: "TWO", Tag: render.TagString("TWO")}}, meta.Region.Lines)

	// Its own edit moved the session's observation: it goes on without
	// reading again, with the anchors the answer showed.
	r = h.editLines(
		obj{"op": "insert_before", "at": "1#AO", "text": "zero"},
		obj{"op": "insert_after", "at": "3#HM", "text": "four\nfive\n"},
		obj{"op": "replace", "start": anchor(2, "TWO"), "text": ""},
	)
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully.\nLines 1-5 now:\n"+
		anchor(1, "zero")+": zero\n2#AO: one\n3#HM: three\n"+anchor(4, "four")+": four\n"+anchor(5, "five")+": five", r.Output)
	assert.Equal(t, "zero\none\nthree\nfour\nfive\n", h.contents("a.txt"))

	// The change is the session's, as an edit's is: listed, and revertible.
	ch := h.do(http.MethodGet, "/sessions/s/changes", "")
	require.Equal(t, 200, ch.Status, ch.Raw)
	assert.Contains(t, ch.Raw, `"tool":"edit_lines"`)

	// A dry run shows the change and writes nothing.
	r = h.tool("edit_lines", "s", obj{"file_path": "a.txt", "dry_run": true, "edits": []obj{{"op": "replace", "start": anchor(1, "zero"), "text": ""}}})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, `Dry run: no changes were written to "`+p+`".`+"\n--- "+p+"\n+++ "+p+"\n@@ -1,4 +1,3 @@\n-zero\n one\n three\n four", r.Output)
	assert.Equal(t, "zero\none\nthree\nfour\nfive\n", h.contents("a.txt"))

	// Someone else's change is stale, as for edit.
	h.file("a.txt", "changed\n")
	r = h.editLines(obj{"op": "replace", "start": anchor(1, "zero"), "text": "x"})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, `Error: cannot edit "`+p+`": file changed since it was read — re-read the file, then retry`, r.Output)
}

// TestEditLinesStaleAndRelocated: an anchor whose line changed is refused
// with the anchored lines around it; anchors that all fit one other offset
// within 20 lines apply there and say so; two such offsets are refused.
func TestEditLinesStaleAndRelocated(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", tenLinesFile)
	p := h.path("a.txt")
	require.Equal(t, 200, h.tool("read", "s", obj{"file_path": "a.txt"}).Status)
	around := "\n2#MH: line 2\n3#SR: line 3\n4#HK: line 4\n5#FN: line 5\n6#MI: line 6\n7#PS: line 7\n8#SR: line 8"

	r := h.editLines(obj{"op": "replace", "start": "5#KT", "text": "x"})
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, "FS_EDIT_NOT_FOUND", r.Code)
	assert.Equal(t, `Error: line 5 of "`+p+`" is no longer 5#KT`+around, r.Output)

	r = h.editLines(obj{"op": "insert_after", "at": "5#SR", "text": "x"})
	assert.Equal(t, 422, r.Status)
	assert.Equal(t, `Error: line 5 of "`+p+`" is no longer 5#SR`+around+"\nThe anchors fit 2 places within 20 lines (2 line(s) higher, 3 line(s) lower), so none was chosen.", r.Output)
	assert.Equal(t, tenLinesFile, h.contents("a.txt"), "nothing written")

	// Two lines go in at the top (the session's own edit, so its anchors
	// from the read are now two lines off).
	require.Equal(t, 200, h.editLines(obj{"op": "insert_before", "at": "1#NR", "text": "a\nb"}).Status)
	r = h.editLines(obj{"op": "replace", "start": "6#MI", "end": "7#PS", "text": "six and seven"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully.\nAnchors found 2 line(s) lower.\nLines 8-8 now:\n"+anchor(8, "six and seven")+": six and seven", r.Output)
	assert.Contains(t, string(r.Metadata), `"shift":2`)

	// Now three lines leave the top: line 9 of the first read is line 7.
	r = h.editLines(obj{"op": "replace", "start": anchor(1, "a"), "end": anchor(3, "line 1"), "text": ""})
	require.Equal(t, 200, r.Status, r.Raw)
	r = h.editLines(obj{"op": "replace", "start": "9#CB", "text": "nine"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully.\nAnchors found 2 line(s) higher.\nLines 7-7 now:\n"+anchor(7, "nine")+": nine", r.Output)
	assert.Equal(t, "line 2\nline 3\nline 4\nline 5\nsix and seven\nline 8\nnine\nline 10\n", h.contents("a.txt"))
}

// TestEditLinesArguments: the argument messages, in order, before anything
// is read or written.
func TestEditLinesArguments(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "one\n")
	tests := []struct {
		body, want string
	}{
		{`{"file_path":"a.txt"}`, "edits must be an array of {op, start, end, at, text} objects"},
		{`{"file_path":"a.txt","edits":{}}`, "edits must be an array of {op, start, end, at, text} objects"},
		{`{"file_path":"a.txt","edits":[]}`, "edits must contain between 1 and 100 edits"},
		{`{"file_path":"","edits":[]}`, "file_path must be a non-empty string"},
		{`{"file_path":"a.txt","edits":[1]}`, "edits[0] must be an object with op and text"},
		{`{"file_path":"a.txt","edits":[{"text":"x"}]}`, `edits[0].op must be "replace", "insert_after" or "insert_before"`},
		{`{"file_path":"a.txt","edits":[{"op":"swap","start":"1#AO","text":"x"}]}`, `edits[0].op must be "replace", "insert_after" or "insert_before"`},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":"1#AO"}]}`, "edits[0].text must be a string"},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":1,"text":""}]}`, `edits[0].start must be a line anchor "<n>#<tag>" as read shows it, e.g. "12#KT"`},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":"1","text":""}]}`, `edits[0].start must be a line anchor "<n>#<tag>" as read shows it, e.g. "12#KT"`},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":"1#AO","end":"1#ao","text":""}]}`, `edits[0].end must be a line anchor "<n>#<tag>" as read shows it, e.g. "12#KT"`},
		{`{"file_path":"a.txt","edits":[{"op":"insert_after","at":"x#AO","text":"a"}]}`, `edits[0].at must be a line anchor "<n>#<tag>" as read shows it, e.g. "12#KT"`},
		{`{"file_path":"a.txt","edits":[{"op":"replace","text":""}]}`, "edits[0]: replace needs start, the anchor of the first line to replace"},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":"1#AO","at":"1#AO","text":""}]}`, "edits[0]: replace takes start and end, not at"},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":"2#AO","end":"1#AO","text":""}]}`, "edits[0].end must not be before start"},
		{`{"file_path":"a.txt","edits":[{"op":"insert_before","text":"a"}]}`, "edits[0]: insert_before needs at, the anchor of the line to insert next to"},
		{`{"file_path":"a.txt","edits":[{"op":"insert_after","at":"1#AO","start":"1#AO","text":"a"}]}`, "edits[0]: insert_after takes at, not start or end"},
		{`{"file_path":"a.txt","edits":[{"op":"insert_after","at":"1#AO","text":""}]}`, `edits[0].text must hold at least one line for insert_after (send "\n" for one empty line)`},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":"1#AO","text":"","text":"x"}]}`, `edits[0]: request body has a duplicate key "text"`},
		{`{"file_path":"a.txt","edits":[{"op":"replace","start":"1#AO","end":"3#AO","text":""},{"op":"insert_after","at":"5#AO","text":"x"},{"op":"insert_before","at":"3#AO","text":"y"}]}`, "edits[0] and edits[2] overlap"},
		{`{"file_path":"a.txt","edits":[{"op":"insert_after","at":"4#AO","text":"x"},{"op":"insert_before","at":"5#AO","text":"y"}]}`, "edits[0] and edits[1] overlap"},
	}
	for _, tt := range tests {
		r := h.do(http.MethodPost, "/tools/edit_lines", tt.body, "X-Session-ID", "s")
		assert.Equal(t, 400, r.Status, tt.body)
		assert.Equal(t, "INVALID_ARGUMENT", r.Code, tt.body)
		assert.Equal(t, "Error: "+tt.want, r.Output, tt.body)
	}
	assert.Equal(t, "one\n", h.contents("a.txt"))
}

// TestEditLinesKeepsTheFile: a CRLF file stays CRLF, a BOM stays, a file
// without a final newline stays without one.
func TestEditLinesKeepsTheFile(t *testing.T) {
	h := start(t, options{policyOff: true})
	for _, tt := range []struct {
		name, file string
		edit       obj
		want       string
	}{
		{"CRLF", "a\r\nb\r\nc\r\n", obj{"op": "replace", "start": anchor(2, "b"), "text": "x\ny\n"}, "a\r\nx\r\ny\r\nc\r\n"},
		{"CRLF insert at the end", "a\r\nb\r\n", obj{"op": "insert_after", "at": anchor(2, "b"), "text": "c\r\nd"}, "a\r\nb\r\nc\r\nd\r\n"},
		{"BOM", "\uFEFFa\nb\n", obj{"op": "insert_before", "at": anchor(1, "a"), "text": "z"}, "\uFEFFz\na\nb\n"},
		{"no final newline", "a\nb", obj{"op": "insert_after", "at": anchor(2, "b"), "text": "c"}, "a\nb\nc"},
	} {
		h.file("a.txt", tt.file)
		r := h.tool("edit_lines", "", obj{"file_path": "a.txt", "edits": []obj{tt.edit}})
		require.Equal(t, 200, r.Status, "%s: %s", tt.name, r.Raw)
		assert.Equal(t, tt.want, h.contents("a.txt"), tt.name)
	}
}

// TestDialectCatalogs: which edit tool the catalog, each format and the
// tool view list per ?dialect= and --edit-dialect; the default's bytes are
// today's; every tool stays callable whatever the dialect; the original
// profile is the original's whatever is asked.
func TestDialectCatalogs(t *testing.T) {
	h := start(t, options{})
	names := func(path string) []string {
		resp, err := http.Get(h.srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, string(b))
		r := reply{Raw: string(b)}
		var out []string
		switch {
		case strings.Contains(path, "format=openai"):
			var tools []struct{ Function struct{ Name string } }
			require.NoError(t, json.Unmarshal([]byte(r.Raw), &tools))
			for _, tl := range tools {
				out = append(out, tl.Function.Name)
			}
		case strings.Contains(path, "format=anthropic"):
			var tools []struct{ Name string }
			require.NoError(t, json.Unmarshal([]byte(r.Raw), &tools))
			for _, tl := range tools {
				out = append(out, tl.Name)
			}
		case strings.HasPrefix(path, "/openapi.json"):
			var doc struct {
				Paths map[string]map[string]struct{ OperationID string }
			}
			require.NoError(t, json.Unmarshal([]byte(r.Raw), &doc))
			for path, ops := range doc.Paths {
				out = append(out, ops["post"].OperationID+" "+path)
			}
		default:
			var cat struct{ Tools []struct{ Name string } }
			require.NoError(t, json.Unmarshal([]byte(r.Raw), &cat))
			for _, tl := range cat.Tools {
				out = append(out, tl.Name)
			}
		}
		return out
	}
	def := h.do(http.MethodGet, "/tools", "").Raw
	assert.Equal(t, def, h.do(http.MethodGet, "/tools?dialect=str_replace", "").Raw)
	assert.Equal(t, def, h.do(http.MethodGet, "/tools?dialect=", "").Raw)
	for _, f := range []string{"", "&format=openai", "&format=anthropic", "&format=mcp"} {
		assert.Equal(t, []string{"read", "write", "edit_lines", "glob", "grep", "move", "delete", "mkdir"}, names("/tools?dialect=anchors"+f), f)
		assert.Equal(t, []string{"read", "write", "edit", "apply_patch", "edit_lines", "glob", "grep", "move", "delete", "mkdir"}, names("/tools?dialect=all"+f), f)
		assert.Equal(t, []string{"read", "write", "apply_patch", "glob", "grep", "move", "delete", "mkdir"}, names("/tools?dialect=apply_patch"+f), f)
		assert.Equal(t, []string{"read", "write", "edit", "glob", "grep", "move", "delete", "mkdir"}, names("/tools?dialect=str_replace"+f), f)
	}
	assert.ElementsMatch(t, []string{"read /model/read?dialect=anchors", "write /model/write", "edit_lines /model/edit_lines", "glob /model/glob", "grep /model/grep", "move /model/move", "delete /model/delete", "mkdir /model/mkdir"}, names("/openapi.json?dialect=anchors"))
	assert.ElementsMatch(t, []string{"read /model/read", "write /model/write", "edit /model/edit", "glob /model/glob", "grep /model/grep", "move /model/move", "delete /model/delete", "mkdir /model/mkdir"}, names("/openapi.json"))
	for _, path := range []string{"/tools?dialect=x", "/openapi.json?dialect=x", "/tools?format=mcp&dialect=x"} {
		r := h.do(http.MethodGet, path, "")
		assert.Equal(t, 400, r.Status, path)
		assert.Equal(t, `unknown edit dialect "x": use dialect=str_replace, dialect=apply_patch, dialect=anchors or dialect=all, or no dialect for the server's own (--edit-dialect)`, r.Detail, path)
	}

	// The server's own dialect, and a client asking for another.
	a := start(t, options{dialect: "anchors"})
	a.file("a.txt", "hello\n")
	var cat struct {
		Tools []struct{ Name, Guidance string }
	}
	require.NoError(t, json.Unmarshal([]byte(a.do(http.MethodGet, "/tools", "").Raw), &cat))
	require.Len(t, cat.Tools, 8)
	assert.Equal(t, "edit_lines", cat.Tools[2].Name)
	assert.Contains(t, cat.Tools[1].Guidance, "prefer edit_lines for targeted changes")
	assert.Contains(t, a.tool("read", "s", obj{"file_path": "a.txt"}).Output, "\n1#SW: hello\n")
	assert.Contains(t, a.do(http.MethodPost, "/tools/read?dialect=str_replace", `{"file_path":"a.txt"}`).Output, "\n1: hello\n")
	// edit is not listed, but callable.
	r := a.tool("edit", "s", obj{"file_path": "a.txt", "old_string": "hello", "new_string": "hi"})
	assert.Equal(t, 200, r.Status, r.Raw)

	// The original profile: the original's catalog and read, whatever the URL asks.
	o := start(t, options{profile: render.ProfileOriginal})
	o.file("a.txt", "hello\n")
	assert.Equal(t, o.do(http.MethodGet, "/tools", "").Raw, o.do(http.MethodGet, "/tools?dialect=anchors", "").Raw)
	assert.Contains(t, o.do(http.MethodPost, "/tools/read?dialect=anchors", `{"file_path":"a.txt"}`).Output, "\n1: hello\n")
	// edit_lines belongs to the extended profile, as apply_patch does.
	r = o.tool("edit_lines", "s", obj{"file_path": "a.txt", "edits": []obj{{"op": "replace", "start": "1#SW", "text": "x"}}})
	assert.Equal(t, 404, r.Status, r.Raw)
	assert.Equal(t, "NOT_FOUND", r.Code)
	assert.Equal(t, "hello\n", o.contents("a.txt"))
}

// TestAllDialectEditTakesAnchoredPrefixes: in the all dialect read shows
// anchors, and edit's old_string copied from it with them still finds its
// place (the tolerant edit's line-number prefixes, docs/edits.md).
func TestAllDialectEditTakesAnchoredPrefixes(t *testing.T) {
	h := start(t, options{dialect: "all"})
	h.file("a.txt", "one\ntwo\nthree\n")
	p := h.path("a.txt")
	r := h.tool("read", "s", obj{"file_path": "a.txt"})
	require.Contains(t, r.Output, "\n2#PM: two\n3#HM: three\n")
	r = h.tool("edit", "s", obj{"file_path": "a.txt", "old_string": "2#PM: two\n3#HM: three", "new_string": "2#PM: TWO\n3#HM: three"})
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+p+" has been updated successfully.\nMatched after removing line-number prefixes at lines 2-3.", r.Output)
	assert.Equal(t, "one\nTWO\nthree\n", h.contents("a.txt"))
}
