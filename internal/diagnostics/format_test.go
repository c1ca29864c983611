package diagnostics

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The samples are the real output of each tool (captured with the
// commands in the comments), so the parsers read what the tools print.
func TestFormats(t *testing.T) {
	readSample := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name           string
		format         string
		stdout, stderr string
		subject        subject
		want           []Problem
		parsable       bool
	}{
		{
			// gofmt -e /w/a.go (the file ends inside a function): on stderr,
			// one error twice.
			name: "gofmt", format: FormatLine,
			stderr: "/w/a.go:5:1: expected operand, found '}'\n" +
				"/w/a.go:5:3: expected ';', found 'EOF'\n" +
				"/w/a.go:5:3: expected ';', found 'EOF'\n" +
				"/w/a.go:5:3: expected '}', found 'EOF'\n",
			subject: subject{file: "/w/a.go", real: "/w/a.go", dir: "/w"},
			want: []Problem{
				{5, 1, "expected operand, found '}'"},
				{5, 3, "expected ';', found 'EOF'"},
				{5, 3, "expected ';', found 'EOF'"},
				{5, 3, "expected '}', found 'EOF'"},
			},
			parsable: true,
		},
		{
			// gofmt -e on a copy of the version before: its own path.
			name: "a copy's path", format: FormatLine,
			stderr:   "/tmp/priv/.toolfs-versions/3/a.go:2:1: expected 'package', found x\n",
			subject:  subject{file: "/tmp/priv/.toolfs-versions/3/a.go", real: "/w/a.go", dir: "/w"},
			want:     []Problem{{2, 1, "expected 'package', found x"}},
			parsable: true,
		},
		{
			// gofmt -e on a well-formed file prints the file: no problem,
			// nothing parsable.
			name: "gofmt's formatted source", format: FormatLine,
			stdout:  "package main\n\nfunc main() {\n\tprintln(\"a:1: b\")\n\tx := y // a:1: b\n}\n",
			subject: subject{file: "/w/a.go", real: "/w/a.go", dir: "/w"},
		},
		{
			// go vet . in /w/pkg: an analyzer's finding relative to the
			// folder, a type error after "vet: ", findings in other files
			// of the package left out (still parsable).
			name: "go vet", format: FormatLine,
			stderr: "# example.com/m/pkg\n" +
				"vet: ./b.go:3:23: undefined: helper\n" +
				"a.go:5:24: fmt.Printf format %d has arg \"x\" of wrong type string\n" +
				"./c.go:4:2: declared and not used: x\n",
			subject:  subject{file: "/w/pkg/b.go", real: "/w/pkg/b.go", dir: "/w/pkg"},
			want:     []Problem{{3, 23, "undefined: helper"}},
			parsable: true,
		},
		{
			name: "a line without a column", format: FormatLine,
			stdout:   "a.go:7: something odd\r\nnot a problem\n",
			subject:  subject{file: "/w/a.go", real: "/w/a.go", dir: "/w"},
			want:     []Problem{{7, 0, "something odd"}},
			parsable: true,
		},
		{
			// shellcheck -f json1 /tmp/sample/w/a.sh
			name: "shellcheck json1", format: FormatShellcheckJSON1,
			stdout:  string(readSample("shellcheck.json1")),
			subject: subject{file: "/tmp/sample/w/a.sh", real: "/tmp/sample/w/a.sh", dir: "/tmp/sample/w"},
			want: []Problem{
				{2, 6, "info: Double quote to prevent globbing and word splitting. [SC2086]"},
				{3, 6, "warning: x is referenced but not assigned. [SC2154]"},
				{3, 6, "info: Double quote to prevent globbing and word splitting. [SC2086]"},
				{4, 1, "warning: Use 'cd ... || exit' or 'cd ... || return' in case cd fails. [SC2164]"},
				{5, 10, "error: Iterating over ls output is fragile. Use globs. [SC2045]"},
				{5, 15, "info: Use ./*glob* or -- *glob* so names with dashes won't become options. [SC2035]"},
			},
			parsable: true,
		},
		{
			name: "shellcheck json1 with nothing to say", format: FormatShellcheckJSON1,
			stdout:   `{"comments":[]}`,
			subject:  subject{file: "/w/a.sh", real: "/w/a.sh", dir: "/w"},
			parsable: true,
		},
		{
			name: "shellcheck json1 that is not its JSON", format: FormatShellcheckJSON1,
			stdout:  "a.sh:1:1: note: not JSON\n",
			subject: subject{file: "/w/a.sh", real: "/w/a.sh", dir: "/w"},
		},
		{
			// eslint -f json /tmp/sample/w/a.js /tmp/sample/w/bad.js (ESLint
			// 9.39), only a.js asked for.
			name: "eslint json", format: FormatESLintJSON,
			stdout:  string(readSample("eslint.json")),
			subject: subject{file: "/tmp/sample/w/a.js", real: "/tmp/sample/w/a.js", dir: "/tmp/sample/w"},
			want: []Problem{
				{1, 7, "warning: 'a' is assigned a value but never used. [no-unused-vars]"},
				{1, 12, "error: Missing semicolon. [semi]"},
				{3, 15, "error: Missing semicolon. [semi]"},
			},
			parsable: true,
		},
		{
			name: "eslint json's parsing error", format: FormatESLintJSON,
			stdout:   string(readSample("eslint.json")),
			subject:  subject{file: "/tmp/sample/w/bad.js", real: "/tmp/sample/w/bad.js", dir: "/tmp/sample/w"},
			want:     []Problem{{1, 12, "error: Parsing error: Unexpected token ;"}},
			parsable: true,
		},
		{
			// python3 -m py_compile /tmp/sample/w/a.py (Python 3.11)
			name: "py_compile", format: FormatPython,
			stderr: "  File \"/tmp/sample/w/a.py\", line 1\n" +
				"    def f(:\n" +
				"          ^\n" +
				"SyntaxError: invalid syntax\n",
			subject:  subject{file: "/tmp/sample/w/a.py", real: "/tmp/sample/w/a.py", dir: "/tmp/sample/w", content: []byte("def f(:\n  pass\n")},
			want:     []Problem{{1, 7, "SyntaxError: invalid syntax"}},
			parsable: true,
		},
		{
			// The shown line lost its 8 leading spaces.
			name: "py_compile on an indented line", format: FormatPython,
			stderr: "  File \"/tmp/sample/w/b.py\", line 3\n" +
				"    x = (1,\n" +
				"        ^\n" +
				"SyntaxError: '(' was never closed\n",
			subject:  subject{file: "/tmp/sample/w/b.py", real: "/tmp/sample/w/b.py", dir: "/tmp/sample/w", content: []byte("def f():\n    if True:\n        x = (1,\n    return 2\n")},
			want:     []Problem{{3, 13, "SyntaxError: '(' was never closed"}},
			parsable: true,
		},
		{
			// Tabs stay on the shown line and under it.
			name: "py_compile on a tab-indented line", format: FormatPython,
			stderr: "  File \"/tmp/sample/w/g.py\", line 3\n" +
				"    \t\ty = (1 +\n" +
				"    \t\t    ^\n" +
				"SyntaxError: '(' was never closed\n",
			subject:  subject{file: "/tmp/sample/w/g.py", real: "/tmp/sample/w/g.py", dir: "/tmp/sample/w", content: []byte("def f():\n\tif x:\n\t\ty = (1 +\n")},
			want:     []Problem{{3, 7, "SyntaxError: '(' was never closed"}},
			parsable: true,
		},
		{
			// An IndentationError or TabError is one line, without a
			// newline, naming the base name.
			name: "py_compile's Sorry line", format: FormatPython,
			stderr:   "Sorry: TabError: inconsistent use of tabs and spaces in indentation (c.py, line 3)",
			subject:  subject{file: "/tmp/priv/.toolfs-versions/9/c.py", real: "/tmp/sample/w/c.py", dir: "/tmp/sample/w"},
			want:     []Problem{{3, 0, "TabError: inconsistent use of tabs and spaces in indentation"}},
			parsable: true,
		},
		{
			name: "a message is one clean line", format: FormatLine,
			stdout:   "a.go:1:2: two\tparts \x1b[31mred\x1b[0m \xff\n",
			subject:  subject{file: "/w/a.go", real: "/w/a.go", dir: "/w"},
			want:     []Problem{{1, 2, "two parts [31mred [0m \uFFFD"}},
			parsable: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parse(tc.format, []byte(tc.stdout), []byte(tc.stderr), tc.subject)
			assert.Equal(t, tc.want, p.problems)
			assert.Equal(t, tc.parsable, p.parsable)
		})
	}
}

func TestCleanMessageCuts(t *testing.T) {
	long := ""
	for len(long) < 600 {
		long += "é"
	}
	got := cleanMessage(long)
	assert.Equal(t, long[:500]+"…", got)
	assert.Equal(t, "a b", cleanMessage("  a \n\n b  "))
}

// A missing column is null in the metadata.
func TestProblemJSON(t *testing.T) {
	b, err := json.Marshal([]Problem{{3, 0, "x"}, {4, 2, "y"}})
	require.NoError(t, err)
	assert.Equal(t, `[{"line":3,"col":null,"message":"x"},{"line":4,"col":2,"message":"y"}]`, string(b))
}
