package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// TestParse reads the grammar and what Codex's own parser also accepts.
func TestParse(t *testing.T) {
	ctx := func(s string) Line { return Line{Kind: ' ', Text: s} }
	del := func(s string) Line { return Line{Kind: '-', Text: s} }
	add := func(s string) Line { return Line{Kind: '+', Text: s} }
	bare := Line{Kind: ' ', Bare: true}
	tests := []struct {
		name, in string
		want     []File
	}{
		{"every operation",
			"*** Begin Patch\n*** Add File: a/new.txt\n+one\n+\n+two\n*** Delete File: old.txt\n*** Update File: src/x.go\n*** Move to: src/y.go\n@@ func f() {\n a\n-b\n+c\n@@\n-d\n+e\n*** End of File\n*** End Patch\n",
			[]File{
				{Op: OpAdd, Path: "a/new.txt", Line: 2, Content: "one\n\ntwo\n"},
				{Op: OpDelete, Path: "old.txt", Line: 6},
				{Op: OpUpdate, Path: "src/x.go", MoveTo: "src/y.go", Line: 7, Hunks: []Hunk{
					{Headers: []string{"func f() {"}, Line: 9, Lines: []Line{ctx("a"), del("b"), add("c")}},
					{Line: 13, Lines: []Line{del("d"), add("e")}, EOF: true},
				}},
			}},
		{"markers padded, CRLF, blank lines around",
			"\n  *** Begin Patch \r\n\r\n  *** Add File:  x.txt  \r\n+a\r\n\r\n *** End Patch\r\n\n",
			[]File{{Op: OpAdd, Path: "x.txt", Line: 4, Content: "a\n"}}},
		{"heredoc",
			"<<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF\n",
			[]File{{Op: OpDelete, Path: "x", Line: 3}}},
		{"heredoc after cat (opencode's \"parses heredoc-wrapped patch\")",
			"cat <<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF",
			[]File{{Op: OpDelete, Path: "x", Line: 3}}},
		{"heredoc after apply_patch",
			"apply_patch  <<\"EOF\"\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF",
			[]File{{Op: OpDelete, Path: "x", Line: 3}}},
		{"first hunk without @@, empty line as context",
			"*** Begin Patch\n*** Update File: f\n a\n\n-b\n*** End Patch",
			[]File{{Op: OpUpdate, Path: "f", Line: 2, Hunks: []Hunk{{Line: 3, Lines: []Line{ctx("a"), bare, del("b")}}}}}},
		{"blank lines between hunks and before the next operation",
			"*** Begin Patch\n*** Update File: f\n\n@@\n-a\n\n*** Delete File: g\n*** End Patch",
			[]File{{Op: OpUpdate, Path: "f", Line: 2, Hunks: []Hunk{{Line: 4, Lines: []Line{del("a"), bare}}}}, {Op: OpDelete, Path: "g", Line: 7}}},
		{"a unified range header counts as its text",
			"*** Begin Patch\n*** Update File: f\n@@ -1,3 +1,4 @@ def g():\n-a\n@@ -9 +9 @@\n-b\n*** End Patch",
			[]File{{Op: OpUpdate, Path: "f", Line: 2, Hunks: []Hunk{{Headers: []string{"def g():"}, Line: 3, Lines: []Line{del("a")}}, {Line: 5, Lines: []Line{del("b")}}}}}},
		{"stacked headers narrow in turn",
			"*** Begin Patch\n*** Update File: f\n@@ class B:\n@@\n@@   def f():\n-x\n*** End Patch",
			[]File{{Op: OpUpdate, Path: "f", Line: 2, Hunks: []Hunk{{Headers: []string{"class B:", "def f():"}, Line: 3, Lines: []Line{del("x")}}}}}},
		{"move only",
			"*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
			[]File{{Op: OpUpdate, Path: "a", MoveTo: "b", Line: 2}}},
		{"a move onto itself is an update",
			"*** Begin Patch\n*** Update File: a\n*** Move to: ./a\n@@\n-x\n*** End Patch",
			[]File{{Op: OpUpdate, Path: "a", Line: 2, Hunks: []Hunk{{Line: 4, Lines: []Line{del("x")}}}}}},
		{"an empty add",
			"*** Begin Patch\n*** Add File: e\n*** End Patch",
			[]File{{Op: OpAdd, Path: "e", Line: 2}}},
		{"context lines that look like markers once unpadded are lines",
			"*** Begin Patch\n*** Update File: f\n@@\n **bold**\n-x\n*** End Patch",
			[]File{{Op: OpUpdate, Path: "f", Line: 2, Hunks: []Hunk{{Line: 3, Lines: []Line{ctx("**bold**"), del("x")}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Files, tt.want) {
				t.Errorf("got  %+v\nwant %+v", p.Files, tt.want)
			}
		})
	}
}

// TestParseErrors pins every parse error's text: 400 INVALID_ARGUMENT
// "invalid patch: line <n>: <reason>" (SPEC §25, docs/edits.md).
func TestParseErrors(t *testing.T) {
	many := func(n int, op string) string {
		var b strings.Builder
		b.WriteString("*** Begin Patch\n")
		for i := range n {
			b.WriteString(strings.ReplaceAll(op, "#", strings.Repeat("x", i%50)+string(rune('a'+i%26))+strings.Repeat("y", i/26)))
		}
		b.WriteString("*** End Patch\n")
		return b.String()
	}
	tests := []struct{ name, in, want string }{
		{"empty", "", `invalid patch: line 1: the patch must start with "*** Begin Patch"`},
		{"blank", "\n  \n", `invalid patch: line 1: the patch must start with "*** Begin Patch"`},
		{"no begin", "\n*** Add File: a\n+x\n*** End Patch", `invalid patch: line 2: the patch must start with "*** Begin Patch"`},
		{"no end", "*** Begin Patch\n*** Add File: a\n+x\n", `invalid patch: line 4: the patch must end with "*** End Patch"`},
		{"text after end", "*** Begin Patch\n*** Delete File: a\n*** End Patch\n\nbye\n", `invalid patch: line 5: text after "*** End Patch"`},
		{"no file", "*** Begin Patch\n\n*** End Patch", `invalid patch: line 3: the patch changes no file`},
		{"another command before the heredoc", "echo <<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF", `invalid patch: line 1: the patch must start with "*** Begin Patch"`},
		{"cat glued to the heredoc", "cat<<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF", `invalid patch: line 1: the patch must start with "*** Begin Patch"`},
		{"not an operation", "*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch", `invalid patch: line 2: expected "*** Add File: <path>", "*** Delete File: <path>" or "*** Update File: <path>", found "*** Frobnicate File: foo"`},
		{"hunk line outside an update", "*** Begin Patch\n-x\n*** End Patch", `invalid patch: line 2: expected "*** Add File: <path>", "*** Delete File: <path>" or "*** Update File: <path>", found "-x"`},
		{"long line quoted short", "*** Begin Patch\n" + strings.Repeat("é", 70) + "\n*** End Patch", `invalid patch: line 2: expected "*** Add File: <path>", "*** Delete File: <path>" or "*** Update File: <path>", found "` + strings.Repeat("é", 60) + `..."`},
		{"empty add path", "*** Begin Patch\n*** Add File:   \n*** End Patch", `invalid patch: line 2: the path is empty`},
		{"empty delete path", "*** Begin Patch\n*** Delete File:\n*** End Patch", `invalid patch: line 2: the path is empty`},
		{"empty update path", "*** Begin Patch\n*** Update File: \n@@\n-a\n*** End Patch", `invalid patch: line 2: the path is empty`},
		{"empty move path", "*** Begin Patch\n*** Update File: a\n*** Move to:\n*** End Patch", `invalid patch: line 3: the path is empty`},
		{"add line without plus", "*** Begin Patch\n*** Add File: a\n+x\ny\n*** End Patch", `invalid patch: line 4: a line of an added file must start with "+"`},
		{"blank line inside an add", "*** Begin Patch\n*** Add File: a\n+x\n\n+y\n*** End Patch", `invalid patch: line 4: a line of an added file must start with "+"`},
		{"update without hunk or move", "*** Begin Patch\n*** Update File: foo.txt\n*** End Patch", `invalid patch: line 2: the update of "foo.txt" has neither a hunk nor "*** Move to:"`},
		{"bad hunk line", "*** Begin Patch\n*** Update File: f\n@@\n-a\nb\n*** End Patch", `invalid patch: line 5: a hunk line must start with " ", "-" or "+", found "b"`},
		{"hunk without lines", "*** Begin Patch\n*** Update File: f\n@@ one\n@@ two\n*** End Patch", `invalid patch: line 3: the hunk has no lines`},
		{"last hunk without lines", "*** Begin Patch\n*** Update File: f\n@@\n-a\n@@\n*** End Patch", `invalid patch: line 5: the hunk has no lines`},
		{"end of file without a hunk", "*** Begin Patch\n*** Update File: f\n*** End of File\n*** End Patch", `invalid patch: line 3: "*** End of File" must end a hunk`},
		{"end of file twice", "*** Begin Patch\n*** Update File: f\n@@\n-a\n*** End of File\n*** End of File\n*** End Patch", `invalid patch: line 6: "*** End of File" must end a hunk`},
		{"move after a hunk", "*** Begin Patch\n*** Update File: f\n@@\n-a\n*** Move to: g\n*** End Patch", `invalid patch: line 5: "*** Move to:" must directly follow "*** Update File:"`},
		{"move alone", "*** Begin Patch\n*** Move to: g\n*** End Patch", `invalid patch: line 2: "*** Move to:" must directly follow "*** Update File:"`},
		{"a path twice", "*** Begin Patch\n*** Add File: a/b\n+x\n*** Delete File: a/./b\n*** End Patch", `invalid patch: line 4: "a/./b" is named by more than one file operation`},
		{"a move onto another operation's path", "*** Begin Patch\n*** Delete File: b\n*** Update File: a\n*** Move to: b\n*** End Patch", `invalid patch: line 4: "b" is named by more than one file operation`},
		{"a NUL in a path", "*** Begin Patch\n*** Delete File: a\x00b\n*** End Patch", `invalid patch: line 2: the path contains a NUL byte`},
		{"a NUL in a move's path", "*** Begin Patch\n*** Update File: a\n*** Move to: b\x00\n*** End Patch", `invalid patch: line 3: the path contains a NUL byte`},
		{"too many files", many(MaxFiles+1, "*** Delete File: #\n"), `invalid patch: line 1002: more than 1000 file operations`},
		{"too many hunks", "*** Begin Patch\n*** Update File: f\n" + strings.Repeat("@@\n-a\n", MaxHunks+1) + "*** End Patch", `invalid patch: line 20003: more than 10000 hunks`},
		{"too large", "*** Begin Patch\n*** Add File: a\n" + strings.Repeat("+"+strings.Repeat("x", 1022)+"\n", MaxBytes/1024) + "*** End Patch", `invalid patch: line 16386: the patch is larger than 16777216 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.in)
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *fault.Error", err)
			}
			if fe.Code != fault.CodeInvalidArgument || fe.Message != tt.want {
				t.Errorf("got  %s %q\nwant INVALID_ARGUMENT %q", fe.Code, fe.Message, tt.want)
			}
		})
	}
}

// TestFromOperations turns the Responses API's operations into the patch
// model: a create_file's lines joined as OpenAI's Agents SDK joins them,
// an update_file's diff read as an Update's hunks.
func TestFromOperations(t *testing.T) {
	p, err := FromOperations([]Operation{
		{Type: TypeCreate, Path: "a.txt", Diff: "+hello\n+world\n"},
		{Type: TypeCreate, Path: "b.txt", Diff: "+hello\r\n+world\r\n+"},
		{Type: TypeUpdate, Path: "c.txt", Diff: "@@ def f():\n-    pass\n+    return 1\n"},
		{Type: TypeDelete, Path: "d.txt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Op: OpAdd, Path: "a.txt", Content: "hello\nworld"},
		{Op: OpAdd, Path: "b.txt", Line: 1, Content: "hello\r\nworld\r\n"},
		{Op: OpUpdate, Path: "c.txt", Line: 2, Hunks: []Hunk{{Headers: []string{"def f():"}, Line: 1, Lines: []Line{{Kind: '-', Text: "    pass"}, {Kind: '+', Text: "    return 1"}}}}},
		{Op: OpDelete, Path: "d.txt", Line: 3},
	}
	if !reflect.DeepEqual(p.Files, want) {
		t.Errorf("got  %+v\nwant %+v", p.Files, want)
	}

	errs := []struct {
		name string
		ops  []Operation
		want string
	}{
		{"none", nil, "operations must contain between 1 and 1000 operations"},
		{"type", []Operation{{Type: "patch_file", Path: "a"}}, "operations[0].type must be one of create_file, update_file, delete_file"},
		{"path", []Operation{{Type: TypeDelete, Path: "a"}, {Type: TypeDelete}}, "operations[1].path must be a non-empty string"},
		{"create line", []Operation{{Type: TypeCreate, Path: "a", Diff: "+x\ny\n"}}, `invalid patch: operations[0].diff line 2: a line of an added file must start with "+"`},
		{"update line", []Operation{{Type: TypeUpdate, Path: "a", Diff: "@@\n-x\n*** End Patch\n"}}, `invalid patch: operations[0].diff line 3: a hunk line must start with " ", "-" or "+", found "*** End Patch"`},
		{"update empty", []Operation{{Type: TypeUpdate, Path: "a", Diff: "\n"}}, `invalid patch: operations[0].diff: the update of "a" has no hunk`},
		{"NUL", []Operation{{Type: TypeDelete, Path: "a\x00"}}, "operations[0].path must not contain a NUL byte"},
		{"twice", []Operation{{Type: TypeDelete, Path: "a"}, {Type: TypeCreate, Path: "./a", Diff: "+x"}}, `invalid patch: operations[1].path: "./a" is named by more than one file operation`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromOperations(tt.ops)
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Code != fault.CodeInvalidArgument || fe.Message != tt.want {
				t.Errorf("err = %v, want INVALID_ARGUMENT %q", err, tt.want)
			}
		})
	}
}
