package fs

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// TestLocateLevels: each level of the tolerant edit (docs/edits.md,
// "Tolerant edits") with the exact bytes it writes, the level that found
// the place and the place's lines.
func TestLocateLevels(t *testing.T) {
	tests := []struct {
		name, text, old, new string
		all                  bool
		want                 string
		level                int
		places               [][2]int
	}{
		// 0: literal; new_string follows a one-kind file's endings.
		{"literal", "a\nb\nc\n", "b", "B", false, "a\nB\nc\n", LevelLiteral, [][2]int{{2, 2}}},
		{"literal, LF new in a CRLF file", "a\r\nb\r\nc\r\n", "b", "x\ny", false, "a\r\nx\r\ny\r\nc\r\n", LevelLiteral, [][2]int{{2, 2}}},
		{"literal, CRLF new in an LF file", "a\nb\nc\n", "b", "x\r\ny", false, "a\nx\ny\nc\n", LevelLiteral, [][2]int{{2, 2}}},
		{"literal, needle after the file's CR keeps new's first LF bare", "a\r\nb\r\n", "\nb", "\nx\ny", false, "a\r\nx\r\ny\r\n", LevelLiteral, [][2]int{{1, 2}}},
		{"literal, mixed file keeps new as sent", "a\r\nb\nc\n", "b", "x\r\ny", false, "a\r\nx\r\ny\nc\n", LevelLiteral, [][2]int{{2, 2}}},
		// 1: line endings both ways.
		{"LF old in a CRLF file", "a\r\nb\r\nc\r\n", "a\nb", "x\ny", false, "x\r\ny\r\nc\r\n", LevelEndings, [][2]int{{1, 2}}},
		{"CRLF old in an LF file", "a\nb\nc\n", "a\r\nb", "x\r\ny", false, "x\ny\nc\n", LevelEndings, [][2]int{{1, 2}}},
		{"mixed old in an LF file", "alpha\nbeta\ngamma\n", "alpha\nbeta\r\ngamma", "alpha\r\nbeta\nomega", false, "alpha\nbeta\nomega\n", LevelEndings, [][2]int{{1, 3}}},
		{"mixed old in a CRLF file", "alpha\r\nbeta\r\ngamma\r\n", "alpha\r\nbeta\ngamma", "alpha\nbeta\r\nomega", false, "alpha\r\nbeta\r\nomega\r\n", LevelEndings, [][2]int{{1, 3}}},
		// 2: line-number prefixes.
		{"our read's prefixes", "x\n  one\n  two\ny\n", "2:   one\n3:   two", "2:   ONE\n3:   two", false, "x\n  ONE\n  two\ny\n", LevelPrefixes, [][2]int{{2, 3}}},
		{"prefixes on old only", "x\n  one\n  two\ny\n", "2:   one\n3:   two\n", "  uno\n", false, "x\n  uno\ny\n", LevelPrefixes, [][2]int{{2, 3}}},
		{"pipe prefixes, padded", "a\nb\nc\n", "  9 | b\n 10 | c", "B\nC", false, "a\nB\nC\n", LevelPrefixes, [][2]int{{2, 3}}},
		{"tab prefixes (cat -n)", "a\nb\n", "     1\ta\n     2\tb\n", "     1\tA\n     2\tB\n", false, "A\nB\n", LevelPrefixes, [][2]int{{1, 2}}},
		{"anchored read's prefixes", "x\n  one\n  two\ny\n", "2#KT:   one\n3#AB:   two", "2#KT:   ONE\n3#AB:   two", false, "x\n  ONE\n  two\ny\n", LevelPrefixes, [][2]int{{2, 3}}},
		{"arrow prefixes", "a\n\nb\n", "1→a\n2→\n3→b", "1→A\n2→\n3→B", false, "A\n\nB\n", LevelPrefixes, [][2]int{{1, 3}}},
		{"empty line without the trailing space", "a\n\nb\n", "1: a\n2:\n3: b", "1: a\n2:\n3: c", false, "a\n\nc\n", LevelPrefixes, [][2]int{{1, 3}}},
		{"prefixed old in a CRLF file", "a\r\nb\r\n", "1: a\n2: b", "1: A\n2: B", false, "A\r\nB\r\n", LevelPrefixes, [][2]int{{1, 2}}},
		// 3: trailing whitespace.
		{"trailing whitespace in the file", "f() {  \n  x\t\n}\n", "f() {\n  x\n}", "f() {\n  y\n}", false, "f() {\n  y\n}\n", LevelTrailing, [][2]int{{1, 3}}},
		{"trailing whitespace in old", "a\nb\nc\n", "a \nb  \n", "A\nB\n", false, "A\nB\nc\n", LevelTrailing, [][2]int{{1, 2}}},
		{"trailing whitespace, CRLF file", "a  \r\nb\r\nc\r\n", "a\nb\n", "A\nB\n", false, "A\r\nB\r\nc\r\n", LevelTrailing, [][2]int{{1, 2}}},
		// 4: indentation.
		{"indentation added", "class A {\n    f() {\n        x\n    }\n}\n", "f() {\n    x\n}", "f() {\n    y\n    z\n}", false,
			"class A {\n    f() {\n        y\n        z\n    }\n}\n", LevelIndent, [][2]int{{2, 4}}},
		{"indentation removed", "if a:\n  b\n", "    if a:\n      b\n", "    if a:\n      c\n", false, "if a:\n  c\n", LevelIndent, [][2]int{{1, 2}}},
		{"indentation partly missing", "    line1\n    line2\n    line3\n", " line1\n line2\n", " new_line1\n     new_line2\n", false,
			"    new_line1\n        new_line2\n    line3\n", LevelIndent, [][2]int{{1, 2}}},
		{"tabs added", "\tfunction test() {\n\t\treturn true;\n\t}", "function test() {\n\treturn true;\n}", "function test() {\n\t// c\n\treturn false;\n}", false,
			"\tfunction test() {\n\t\t// c\n\t\treturn false;\n\t}", LevelIndent, [][2]int{{1, 3}}},
		{"new already in the file's indentation", "  // c\n\n  function old() {}", "\nfunction old() {}", "\n  function neu() {}", false,
			"  // c\n\n  function neu() {}", LevelIndent, [][2]int{{2, 3}}},
		{"spurious leading blank line", "    line1\n    line2\n    line3\n", "\n  line1\n  line2\n", "  new_line1\n  new_line2\n", false,
			"    new_line1\n    new_line2\n    line3\n", LevelIndent, [][2]int{{1, 2}}},
		{"spaces to a tab, one level", "\tfoo()\n\tbar()\n", "    foo()\n    bar()", "    baz()", false, "\tbaz()\n", LevelIndent, [][2]int{{1, 2}}},
		{"spaces to a tab where the file mixes them", "\ta\n\t    b\n", "    a\n        b", "    a\n        c", false, "\ta\n\t    c\n", LevelIndent, [][2]int{{1, 2}}},
		{"anchored on old's second line, after a BOM", "\ufeff  ab\n  longer line\n", "ab\nlonger line", "X", false, "\ufeff  X\n", LevelIndent, [][2]int{{1, 2}}},
		{"blank lines inside keep theirs", "  a\n\n  b\n", "a\n  \nb", "a\n\nc", false, "  a\n\n  c\n", LevelIndent, [][2]int{{1, 3}}},
		// 5: escapes written literally.
		{"escaped newline", "const a = 1;\nconst b = 2;\n", `const a = 1;\nconst b = 2;`, `const a = 1;\nconst c = 3;`, false,
			"const a = 1;\nconst c = 3;\n", LevelEscapes, [][2]int{{1, 2}}},
		{"escaped quotes", `x = find "me".`, `find \"me\"`, `keep \"this\"`, false, `x = keep "this".`, LevelEscapes, [][2]int{{1, 1}}},
		{"escaped backslash", `find \me.`, `find \\me`, `found \\it`, false, `found \it.`, LevelEscapes, [][2]int{{1, 1}}},
		{"escaped tab and newline in a CRLF file", "a\tb\r\nc\r\n", `a\tb\nc`, `A\nC`, false, "A\r\nC\r\n", LevelEscapes, [][2]int{{1, 2}}},
		// 6: typographic punctuation.
		{"curly quotes in the file", "say “hi” — now\n", `say "hi" - now`, `say "bye"`, false, "say \"bye\"\n", LevelPunct, [][2]int{{1, 1}}},
		{"curly quotes in old", "we can't wait\n", "we can’t wait", "we can wait", false, "we can wait\n", LevelPunct, [][2]int{{1, 1}}},
		{"non-breaking space", "a\u00a0=\u00a01\nb\n", "a = 1\nb", "a = 2\nb", false, "a = 2\nb\n", LevelPunct, [][2]int{{1, 2}}},
		{"punctuation, several places", "‘x’ ‘x’", "'x'", "y", true, "y y", LevelPunct, [][2]int{{1, 1}, {1, 1}}},
		// replace_all at a tolerant level.
		{"replace all at the indentation level", "  a\n  b\nx\n    a\n    b\n", "a\nb\n", "c\n", true, "  c\nx\n    c\n", LevelIndent, [][2]int{{1, 2}, {4, 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := locate([]byte(tc.text), Edit{OldString: tc.old, NewString: tc.new, ReplaceAll: tc.all}, true, LevelLiteral, nil)
			require.Equal(t, len(tc.places), got.count, "places")
			assert.Equal(t, tc.level, got.level)
			assert.Equal(t, tc.places, got.places)
			assert.Equal(t, tc.want, string(got.out))
		})
	}
}

// TestLocateRefuses: ambiguity at every level is two places, never a
// guess; and what no level accepts.
func TestLocateRefuses(t *testing.T) {
	tests := []struct {
		name, text, old string
		level, count    int // count 0: not found
		starts          []int
	}{
		{"literal twice", "x\nx\n", "x", LevelLiteral, 2, []int{1, 2}},
		{"endings twice", "a\r\nb\r\na\r\nb\r\n", "a\nb", LevelEndings, 2, []int{1, 3}},
		{"prefixes twice", "a\nb\na\nb\n", "1: a\n2: b", LevelPrefixes, 2, []int{1, 3}},
		{"trailing whitespace twice", "a \nb\na\t\nb\n", "a\nb", LevelTrailing, 2, []int{1, 3}},
		{"indentation twice", "  a\n  b\n    a\n    b\n", "a\nb", LevelIndent, 2, []int{1, 3}},
		{"escapes twice", "a\nb a\nb", `a\nb`, LevelEscapes, 2, []int{1, 2}},
		{"punctuation twice", "“a” and “a”", `"a"`, LevelPunct, 2, []int{1, 1}},
		{"non-uniform indentation", "  hello\n    world\n", "hello\nworld", 0, 0, nil},
		{"new cannot be re-indented", "a\n  b\n", "  a\n    b", 0, 0, nil},
		{"spaces to a tab, deeper new lines", "\tfoo()\n\tbar()\n", "    foo()\n    bar()", 0, 0, nil},
		{"tabs to spaces, deeper", "  a\n    b\n", "\ta\n\t\tb", 0, 0, nil},
		{"escapes written out in the file", `x\ny` + "\nx\ny\n", `x\ny\nq`, 0, 0, nil},
		{"prefixes not consecutive", "a\nb\n", "1: a\n3: b", 0, 0, nil},
		{"prefixes on some lines only", "1: a\nb\n", "1: a\nb\nc", 0, 0, nil},
		{"a line with other text", "x = 1\n", "x = 1 + 0", 0, 0, nil},
		{"intra-line whitespace", "f(a,  b)\n", "f(a, b)", 0, 0, nil},
		{"old ends with a newline the file lacks", "  a\n  b", "a\nb\n", 0, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			new := "Z"
			switch tc.name {
			case "new cannot be re-indented":
				new = "  a\nb" // the change removes two spaces new's second line lacks
			case "spaces to a tab, deeper new lines":
				new = "    if x {\n        foo()\n    }" // "\t    foo()": refused
			}
			got := locate([]byte(tc.text), Edit{OldString: tc.old, NewString: new}, true, LevelLiteral, nil)
			assert.Equal(t, tc.count, got.count)
			assert.Nil(t, got.out)
			if tc.count > 0 {
				assert.Equal(t, tc.level, got.level)
				var starts []int
				for _, p := range got.places {
					starts = append(starts, p[0])
				}
				assert.Equal(t, tc.starts, starts)
			}
		})
	}
}

// TestLocateOriginalRules: without tolerance only the literal match and
// §4's one-way CRLF retry exist, and new_string is written as sent.
func TestLocateOriginalRules(t *testing.T) {
	for _, tc := range []struct{ text, old, new, want string }{
		{"a\r\nb\r\n", "b", "x\ny", "a\r\nx\ny\r\n"},
		{"a\r\nb\r\n", "a\nb", "x\ny", "x\r\ny\r\n"},
		{"a\nb\n", "a\r\nb", "x", ""},
		{"  a\n", "a ", "b", ""},
		{"“a”", `"a"`, "b", ""},
	} {
		got := locate([]byte(tc.text), Edit{OldString: tc.old, NewString: tc.new}, false, LevelLiteral, nil)
		assert.Equal(t, tc.want, string(got.out), "%q", tc.old)
	}
}

// TestLocateBounded: a file built so that every line is a candidate the
// indentation check refuses stays linear (the budget), and a large file's
// levels finish in bounded time.
func TestLocateBounded(t *testing.T) {
	// Every window of old's 200 lines matches once trimmed; the
	// indentation changes differ, so each is checked and refused.
	var old strings.Builder
	for i := range 200 {
		old.WriteString(strings.Repeat(" ", i%7) + "x\n")
	}
	text := []byte(strings.Repeat("x\n", 200_000))
	start := time.Now()
	got := locate(text, Edit{OldString: old.String(), NewString: "y\n"}, true, LevelLiteral, nil)
	assert.Equal(t, 0, got.count)
	assert.Less(t, time.Since(start), 5*time.Second)

	big := bytes.Repeat([]byte("    some code here;\n"), 1<<20/20*8) // 8 MiB
	start = time.Now()
	got = locate(big, Edit{OldString: "nothing like it\nanywhere", NewString: "y"}, true, LevelLiteral, nil)
	assert.Equal(t, 0, got.count)
	t.Logf("8 MiB, no level matches: %v", time.Since(start))
}

// FuzzLocate is the oracle of the tolerant edit: whenever a level applies,
// every byte before the first place and after the last is unchanged, and
// the result is exactly the text with the reported lines replaced by what
// replaced them; a one-kind file keeps its kind of line ending.
func FuzzLocate(f *testing.F) {
	for _, s := range [][4]string{
		{"a\r\nb\r\nc\r\n", "a\nb", "x\ny", ""},
		{"  a\n  b\nc\n", "a\nb", "x\ny", ""},
		{"x\n  one\n  two\n", "2:   one\n3:   two", "2:   ONE", ""},
		{"a \nb\t\n", "a\nb", "c", ""},
		{"say “hi”\n", `say "hi"`, "bye", "all"},
		{"a\nb\n", `a\nb`, `c\nd`, ""},
		{"\ufeffx\r\n\ty\r\n", "x\ny", "z\n", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3] != "")
	}
	f.Fuzz(func(t *testing.T, text, old, new string, all bool) {
		if old == "" || old == new || !utf8.ValidString(text) || len(text) > 1<<16 {
			return
		}
		got := locate([]byte(text), Edit{OldString: old, NewString: new, ReplaceAll: all}, true, LevelLiteral, nil)
		// The line levels check a few anchored places, or hash every line:
		// the same places either way.
		full := locateWith([]byte(text), Edit{OldString: old, NewString: new, ReplaceAll: all}, true, LevelLiteral, nil, 0)
		require.Equal(t, full, got, "anchored and full passes differ")
		if got.out == nil {
			return
		}
		out := got.out
		// The lines of the first and last place bound what changed: before
		// the first place's line and after the last place's line, nothing.
		first, last := got.places[0][0], got.places[len(got.places)-1][1]
		if got.count > len(got.places) {
			last = -1
		}
		lines := strings.SplitAfter(text, "\n")
		prefix := strings.Join(lines[:first-1], "")
		require.True(t, bytes.HasPrefix(out, []byte(prefix)), "bytes before line %d changed", first)
		if last > 0 {
			suffix := strings.Join(lines[last:], "")
			require.True(t, bytes.HasSuffix(out, []byte(suffix)), "bytes after line %d changed", last)
		}
		k := endingsOf([]byte(text))
		if k.crlf && !k.lf && !strings.HasSuffix(old, "\r") && !strings.HasSuffix(new, "\r") {
			require.False(t, endingsOf(out).lf, "a CRLF file gained a bare LF: %q", out)
		}
		if k.lf && !k.crlf && !strings.HasSuffix(new, "\r") && !strings.HasSuffix(old, "\r") {
			require.False(t, endingsOf(out).crlf, "an LF file gained a CRLF: %q", out)
		}
	})
}

// TestEditTextTolerant: the provider's edit with Tolerant (the extended
// profile) through real files: the streamed single edit for levels 0 and
// 1, the loaded one for the levels after, batches per item, and the
// refusals with their hints.
func TestEditTextTolerant(t *testing.T) {
	tests := []struct {
		name, content string
		edit          EditRequest
		want          string
		tols          []Tolerance
		wantCode      fault.Code
		wantMsg       string
		wantStarts    []int
	}{
		{name: "LF new_string in a CRLF file stays CRLF", content: "a\r\nb\r\nc\r\n", edit: EditRequest{OldString: "b", NewString: "x\ny"},
			want: "a\r\nx\r\ny\r\nc\r\n"},
		{name: "CRLF old_string in an LF file", content: "a\nb\nc\n", edit: EditRequest{OldString: "a\r\nb", NewString: "A\r\nB"},
			want: "A\nB\nc\n"},
		{name: "trailing whitespace", content: "\ufefff() {  \r\n  x\r\n}\r\n", edit: EditRequest{OldString: "f() {\n  x\n}", NewString: "f() {\n  y\n}"},
			want: "\ufefff() {\r\n  y\r\n}\r\n", tols: []Tolerance{{Level: LevelTrailing, Count: 1, Places: [][2]int{{1, 3}}}}},
		{name: "indentation, replace all", content: "  a\nx\n    a\n", edit: EditRequest{OldString: "a ", NewString: "b", ReplaceAll: true},
			want: "  b\nx\n    b\n", tols: []Tolerance{{Level: LevelIndent, Count: 2, Places: [][2]int{{1, 1}, {3, 3}}}}},
		{name: "batch discloses per item", content: "one\n  two\nthree\n", edit: EditRequest{Batch: []Edit{
			{OldString: "one", NewString: "1"}, {OldString: "2:   two", NewString: "2:   2"}, {OldString: "three  ", NewString: "3"}}},
			want: "1\n  2\n3\n", tols: []Tolerance{{Item: 2, Level: LevelPrefixes, Count: 1, Places: [][2]int{{2, 2}}}, {Item: 3, Level: LevelTrailing, Count: 1, Places: [][2]int{{3, 3}}}}},
		{name: "ambiguous at a tolerant level", content: "  a\n  b\nc\n    a\n    b\n", edit: EditRequest{OldString: "a\nb", NewString: "x"},
			wantCode: fault.CodeAmbiguousEdit, wantMsg: `old_string matched 2 times in "$P"; provide a more specific old_string or set replace_all to true`, wantStarts: []int{1, 4}},
		{name: "ambiguous at the LF retry", content: "a\nb\na\nb\n", edit: EditRequest{OldString: "a\r\nb", NewString: "x"},
			wantCode: fault.CodeAmbiguousEdit, wantMsg: `old_string matched 2 times in "$P"; provide a more specific old_string or set replace_all to true`, wantStarts: []int{1, 3}},
		{name: "ambiguous in a batch", content: "“a” “a”\n", edit: EditRequest{Batch: []Edit{{OldString: `"a"`, NewString: "b"}}},
			wantCode: fault.CodeAmbiguousEdit, wantMsg: `edit 1 of 1: old_string matched 2 times in "$P"; provide a more specific old_string or set replace_all to true`, wantStarts: []int{1, 1}},
		{name: "no level finds it", content: "alpha\n", edit: EditRequest{OldString: "beta", NewString: "x"},
			wantCode: fault.CodeEditNotFound, wantMsg: `old_string was not found in "$P"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "f.txt = "+tt.content)
			tg := f.resolve(t, "edit", "f.txt")
			tt.edit.Tolerant, tt.edit.Hints = true, true
			out, err := f.l.EditText(context.Background(), tg, tt.edit, ptrV(f.version(t, tg)))
			if tt.wantCode != "" {
				requireCode(t, err, tt.wantCode, strings.ReplaceAll(tt.wantMsg, "$P", tg.Display))
				if tt.wantStarts != nil {
					var fe *fault.Error
					require.ErrorAs(t, err, &fe)
					require.NotNil(t, fe.Hint)
					assert.Equal(t, tt.wantStarts, fe.Hint.MatchLines)
				}
				assert.Equal(t, tt.content, f.read(t, "f.txt"), "file touched by a failed edit")
				f.assertClean(t)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, f.read(t, "f.txt"))
			assert.Equal(t, tt.tols, out.Tolerances)
			assert.Equal(t, f.version(t, tg), out.Version)
			f.assertClean(t)
		})
	}
}
