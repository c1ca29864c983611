package patch

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// hunksOf parses body as the hunks of an Update of "f".
func hunksOf(t testing.TB, body string) []Hunk {
	t.Helper()
	p, err := Parse("*** Begin Patch\n*** Update File: f\n" + body + "\n*** End Patch\n")
	if err != nil {
		t.Fatal(err)
	}
	return p.Files[0].Hunks
}

// TestApply applies one file's hunks: each byte outside them kept, the
// levels in order, the places reported.
func TestApply(t *testing.T) {
	tests := []struct {
		name, in, hunks, want string
		places                []Place
	}{
		{"exact", "a\nb\nc\n", "@@\n a\n-b\n+B\n c", "a\nB\nc\n",
			[]Place{{Level: LevelExact, Start: 0, End: 3, OutStart: 0, OutEnd: 3}}},
		{"CRLF file: added lines take CRLF, the rest kept", "a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n+B2\n c", "a\r\nB\r\nB2\r\nc\r\n", nil},
		{"a patch sent with CRLF", "a\nb\n", "@@\r\n-b\r\n+B\r", "a\nB\n", nil},
		{"mixed endings: each line keeps its own, added ones the most common", "a\r\nb\nc\r\nd\r\n", "@@\n-b\n+B", "a\r\nB\r\nc\r\nd\r\n", nil},
		{"BOM kept and not part of the first line", "\ufeffa\nb\n", "@@\n-a\n+A", "\ufeffA\nb\n", nil},
		{"no final newline: the last line replaced", "a\nb", "@@\n a\n-b\n+B", "a\nB", nil},
		{"no final newline: lines added at the end", "a\nb", "@@\n+c\n+d", "a\nb\nc\nd",
			[]Place{{Level: LevelExact, Start: 2, End: 2, OutStart: 2, OutEnd: 4}}},
		{"no final newline: the last line removed", "a\nb", "@@\n a\n-b", "a", nil},
		{"no final newline, CRLF: the last line removed", "a\r\nb", "@@\n-b", "a", nil},
		{"final newline: lines added at the end", "a\n", "@@\n+b", "a\nb\n", nil},
		{"an empty file gets lines with a final newline", "", "@@\n+a\n+b", "a\nb\n", nil},
		{"every line removed", "a\nb\n", "@@\n-a\n-b", "", nil},
		{"a lone CR inside a line is text", "a\rx\nb\n", "@@\n-a\rx\n+A", "A\nb\n", nil},
		{"trailing whitespace ignored, context keeps the file's bytes", "a  \nb\t\nc\n", "@@\n a\n-b\n+B", "a  \nB\nc\n",
			[]Place{{Level: LevelTrailing, Start: 0, End: 2, OutStart: 0, OutEnd: 2}}},
		{"indentation ignored, added lines re-indented", "def f():\n    if x:\n        a()\n    b()\n", "@@\n if x:\n-    a()\n+    c()\n+    d()", "def f():\n    if x:\n        c()\n        d()\n    b()\n",
			[]Place{{Level: LevelIndent, Start: 1, End: 3, OutStart: 1, OutEnd: 4}}},
		{"indentation ignored, one tab fewer in the patch", "\tif x {\n\t\ta()\n\t}\n", "@@\n if x {\n-\ta()\n+\tb()", "\tif x {\n\t\tb()\n\t}\n", nil},
		{"indentation ignored, spaces for tabs: added lines as written", "\tif x {\n\t\ta()\n\t}\n", "@@\n     if x {\n-        a()\n+        b()", "\tif x {\n        b()\n\t}\n", nil},
		{"indentation ignored, added lines already indented as the file: as written", "    x\n    y\n", "@@\n-x\n+    z", "    z\n    y\n", nil},
		{"indentation ignored, added lines indented deeper than the file: re-indented", "    x\n    y\n", "@@\n-x\n+  z", "      z\n    y\n", nil},
		{"indentation changed on one line only: added lines as written", "  a\n      b\n  c\n", "@@\n   a\n-    b\n+  B\n   c", "  a\n  B\n  c\n", nil},
		{"indentation changed unevenly, nothing added: removed", "  a\n      b\nc\n", "@@\n-a\n-b", "c\n", nil},
		{"punctuation normalized", "say “hi” — now\n", "@@\n-say \"hi\" - now\n+say hello", "say hello\n",
			[]Place{{Level: LevelPunct, Start: 0, End: 1, OutStart: 0, OutEnd: 1}}},
		{"an exact place wins over tolerant ones", "a \nx\na\n", "@@\n-a\n+b", "a \nx\nb\n", nil},
		{"after the header", "f()\nx\ng()\nx\n", "@@ g()\n-x\n+y", "f()\nx\ng()\ny\n", nil},
		{"a padded header", "f()\nx\n  g()  \nx\n", "@@   g()\n-x\n+y", "f()\nx\n  g()  \ny\n", nil},
		{"the header is the hunk's first line", "f()\n  x\ng()\n  x\n", "@@ g()\n g()\n-  x\n+  y", "f()\n  x\ng()\n  y\n", nil},
		{"headers narrow in turn", "class A:\n  def f():\n    x\nclass B:\n  def f():\n    x\n", "@@ class B:\n@@ def f():\n-    x\n+    y", "class A:\n  def f():\n    x\nclass B:\n  def f():\n    y\n", nil},
		{"only added lines go after the header", "a\nb\nc\n", "@@ a\n+x", "a\nx\nb\nc\n", nil},
		{"end of file anchors at the end", "x\ny\nx\n", "@@\n-x\n+z\n*** End of File", "x\ny\nz\n",
			[]Place{{Level: LevelExact, Start: 2, End: 3, OutStart: 2, OutEnd: 3}}},
		{"hunks in order", "a\nb\na\nb\n", "@@\n a\n-b\n+1\n a\n@@\n-b\n+2", "a\n1\na\n2\n", nil},
		{"the patch's blank line at a hunk's end is spacing", "a\nb\n", "@@\n-a\n+A\n\n@@\n-b\n+B", "A\nB\n", nil},
		{"an empty context line that is there is kept", "a\n\nb\n", "@@\n a\n\n-b\n+B", "a\n\nB\n", nil},
		{"an insertion at the end and a change before it", "a\nb\n", "@@\n+z\n@@\n-b\n+B", "a\nB\nz\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := hunksOf(t, tt.hunks)
			r, err := Apply([]byte(tt.in), hs, "f")
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Content) != tt.want {
				t.Errorf("content %q, want %q", r.Content, tt.want)
			}
			if tt.places != nil && !reflect.DeepEqual(r.Places, tt.places) {
				t.Errorf("places %+v, want %+v", r.Places, tt.places)
			}
			checkOracle(t, []byte(tt.in), hs, r)
		})
	}
}

// TestApplyRefused pins the refusals: a hunk not found (422
// FS_EDIT_NOT_FOUND), two places at the level that found any (422
// FS_AMBIGUOUS_EDIT with the places' first lines), the bounds.
func TestApplyRefused(t *testing.T) {
	tests := []struct {
		name, in, hunks string
		code            fault.Code
		msg             string
		matches         []int
		hunk            int
	}{
		{"not found", "a\nb\n", "@@\n-c", fault.CodeEditNotFound, `cannot apply hunk 1 to "f": its lines were not found`, nil, 0},
		{"indentation changed unevenly, a line added: where would it go", "  a\n      b\n", "@@\n-a\n-b\n+c", fault.CodeEditNotFound, `cannot apply hunk 1 to "f": its lines were not found`, nil, 0},
		{"the second hunk not found", "a\nb\n", "@@\n-a\n+A\n@@\n-c", fault.CodeEditNotFound, `cannot apply hunk 2 to "f": its lines were not found`, nil, 1},
		{"a later hunk only before the earlier one", "a\nb\n", "@@\n-b\n@@\n-a", fault.CodeEditNotFound, `cannot apply hunk 2 to "f": its lines were not found`, nil, 1},
		{"the header not found", "a\nb\n", "@@ nothing\n-a", fault.CodeEditNotFound, `cannot apply hunk 1 to "f": its lines were not found`, nil, 0},
		{"end of file, but the lines are earlier", "x\ny\n", "@@\n-x\n*** End of File", fault.CodeEditNotFound, `cannot apply hunk 1 to "f": its lines were not found`, nil, 0},
		{"two exact places", "a\nx\na\n", "@@\n-a\n+b", fault.CodeAmbiguousEdit, `cannot apply hunk 1 to "f": its lines match more than one place; add context lines to tell them apart`, []int{1, 3}, 0},
		{"overlapping places", "a\na\na\n", "@@\n-a\n-a", fault.CodeAmbiguousEdit, `cannot apply hunk 1 to "f": its lines match more than one place; add context lines to tell them apart`, []int{1, 2}, 0},
		{"two places ignoring trailing whitespace", "a \nx\na\t\n", "@@\n-a\n+b", fault.CodeAmbiguousEdit, `cannot apply hunk 1 to "f": its lines match more than one place; add context lines to tell them apart`, []int{1, 3}, 0},
		{"two places ignoring indentation", "  a\n\ta\n", "@@\n-a\n+b", fault.CodeAmbiguousEdit, `cannot apply hunk 1 to "f": its lines match more than one place; add context lines to tell them apart`, []int{1, 2}, 0},
		{"two places after the header", "h\na\na\n", "@@ h\n-a", fault.CodeAmbiguousEdit, `cannot apply hunk 1 to "f": its lines match more than one place; add context lines to tell them apart`, []int{2, 3}, 0},
		{"the header that is also the first line, twice", "g()\n  x\ng()\n  x\n", "@@ g()\n g()\n-  x", fault.CodeAmbiguousEdit, `cannot apply hunk 1 to "f": its lines match more than one place; add context lines to tell them apart`, []int{1, 3}, 0},
		{"at most 21 places listed", strings.Repeat("a\n", 30), "@@\n-a", fault.CodeAmbiguousEdit, `cannot apply hunk 1 to "f": its lines match more than one place; add context lines to tell them apart`, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Apply([]byte(tt.in), hunksOf(t, tt.hunks), "f")
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v", err)
			}
			if fe.Code != tt.code || fe.Message != tt.msg {
				t.Errorf("got %s %q\nwant %s %q", fe.Code, fe.Message, tt.code, tt.msg)
			}
			var got []int
			if fe.Hint != nil {
				got = fe.Hint.MatchLines
			}
			if !reflect.DeepEqual(got, tt.matches) {
				t.Errorf("match lines %v, want %v", got, tt.matches)
			}
			var he *HunkError
			if !errors.As(err, &he) || he.Hunk != tt.hunk {
				t.Errorf("cause %v, want hunk %d", err, tt.hunk)
			}
		})
	}

	big := make([]byte, MaxFileBytes+1)
	if _, err := Apply(big, hunksOf(t, "@@\n-a"), "big"); fault.CodeOf(err) != fault.CodeTooLarge ||
		err.Error() != `cannot apply the patch to "big": the file is larger than 67108864 bytes` {
		t.Errorf("a file past MaxFileBytes: %v", err)
	}
}

// TestApplyBudget: every hunk scans the rest of the file for a second
// place, so 200 hunks found near the start of a long file read it 200
// times; the search stops at its budget (searchBudget: 32 times the size
// and 64 MiB; here a smaller one) with FS_TOO_LARGE instead.
func TestApplyBudget(t *testing.T) {
	var b strings.Builder
	var body strings.Builder
	for i := range 200 {
		b.WriteString("a" + strconv.Itoa(i) + "\n")
		body.WriteString("@@\n-a" + strconv.Itoa(i) + "\n+b\n")
	}
	head := b.String()
	b.WriteString(strings.Repeat("x\n", 20000))
	hs := hunksOf(t, body.String())
	_, err := apply([]byte(b.String()), hs, "f", 32*b.Len())
	if fault.CodeOf(err) != fault.CodeTooLarge || err.Error() != `cannot apply the patch to "f": the file is too large to search for this many hunks` {
		t.Fatalf("err = %v", err)
	}
	// The same hunks on the file without its tail apply within it.
	if _, err := apply([]byte(head), hs, "f", 32*b.Len()); err != nil {
		t.Fatal(err)
	}
	if searchBudget(1<<20) != 32<<20+64<<20 {
		t.Errorf("searchBudget(1 MiB) = %d", searchBudget(1<<20))
	}
}
