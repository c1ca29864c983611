package diagnostics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConfig(t *testing.T) {
	got, err := ParseConfig([]byte(`{"checkers": [
		{"name": "gofmt", "glob": "*.go", "command": ["gofmt", "-e", "{file}"], "format": "line"},
		{"name": "shellcheck", "glob": "**/*.{sh,bash}", "command": ["shellcheck", "-f", "json1", "{file}"], "format": "shellcheck-json1", "ok_exit": [0, 1], "read": ["/usr/lib/locale/"], "env": {"SHELLCHECK_OPTS": "-x"}},
		{"name": "py", "glob": "*.py", "command": ["python3", "-m", "py_compile", "{file}"]}
	]}`))
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, CheckerConfig{Name: "gofmt", Glob: "*.go", Command: []string{"gofmt", "-e", "{file}"}, Format: "line", OKExit: []int{0, 1, 2}}, got[0])
	assert.Equal(t, []int{0, 1}, got[1].OKExit)
	assert.Equal(t, []string{"/usr/lib/locale"}, got[1].Read)
	assert.Equal(t, map[string]string{"SHELLCHECK_OPTS": "-x"}, got[1].Env)
	assert.Equal(t, "line", got[2].Format, "the default format")

	empty, err := ParseConfig([]byte(`{"checkers": []}`))
	require.NoError(t, err)
	assert.Empty(t, empty)
}

// Every refusal names the field at fault.
func TestParseConfigErrors(t *testing.T) {
	ok := `"name": "a", "glob": "*.go", "command": ["gofmt"]`
	for _, tc := range []struct{ doc, want string }{
		{``, "empty document"},
		{`{`, "not valid JSON: unexpected end of the document"},
		{`[]`, "the document: got a list, want an object"},
		{`{}`, `checkers: missing (the document is {"checkers": [...]})`},
		{`{"checkers": {}}`, "checkers: got an object, want a list of objects"},
		{`{"checkers": [], "extra": 1}`, `unknown field "extra"`},
		{`{"checkers": []} {}`, "trailing data after the JSON document"},
		{`{"checkers": [], "checkers": []}`, "checkers: duplicate key"},
		{`{"checkers": [{` + ok + `, "name": "b"}]}`, "checkers[0].name: duplicate key"},
		{`{"checkers": [null]}`, "checkers[0]: want an object"},
		{`{"checkers": [7]}`, "checkers[0]: got a number, want an object"},
		{`{"checkers": [{` + ok + `, "globs": "x"}]}`, `checkers[0]: unknown field "globs"`},
		{`{"checkers": [{"glob": "*.go", "command": ["gofmt"]}]}`, "checkers[0].name: missing"},
		{`{"checkers": [{"name": "a b", "glob": "*.go", "command": ["gofmt"]}]}`, `checkers[0].name: "a b" is not 1-64 characters of A-Za-z0-9._- starting with a letter or digit`},
		{`{"checkers": [{"name": 3, "glob": "*.go", "command": ["gofmt"]}]}`, "checkers[0].name: got a number, want a string"},
		{`{"checkers": [{"name": "a", "command": ["gofmt"]}]}`, "checkers[0].glob: missing"},
		{`{"checkers": [{"name": "a", "glob": "[", "command": ["gofmt"]}]}`, `checkers[0].glob: "[": malformed pattern`},
		{`{"checkers": [{"name": "a", "glob": "*.{go", "command": ["gofmt"]}]}`, `checkers[0].glob: "*.{go": a "{" without "}"`},
		{`{"checkers": [{"name": "a", "glob": "/abs/*.go", "command": ["gofmt"]}]}`, `checkers[0].glob: "/abs/*.go": a glob is relative to the root; it cannot start with /`},
		{`{"checkers": [{"name": "a", "glob": "*.go"}]}`, "checkers[0].command: missing (a list of strings, the program first)"},
		{`{"checkers": [{"name": "a", "glob": "*.go", "command": "gofmt"}]}`, "checkers[0].command: got a string, want a list of strings"},
		{`{"checkers": [{"name": "a", "glob": "*.go", "command": [""]}]}`, "checkers[0].command[0]: empty"},
		{`{"checkers": [{"name": "a", "glob": "*.go", "command": ["gofmt", "a\u0000b"]}]}`, "checkers[0].command[1]: contains a NUL byte"},
		{`{"checkers": [{` + ok + `, "format": "json"}]}`, `checkers[0].format: unknown format "json" (known: line, shellcheck-json1, eslint-json, python)`},
		{`{"checkers": [{` + ok + `, "ok_exit": [0, 256]}]}`, "checkers[0].ok_exit[1]: 256 is not an exit status (0-255)"},
		{`{"checkers": [{` + ok + `, "ok_exit": [1.5]}]}`, "checkers[0].ok_exit: got a number that is not an integer, want an integer"},
		{`{"checkers": [{` + ok + `, "ok_exit": 0}]}`, "checkers[0].ok_exit: got a number, want a list of integers"},
		{`{"checkers": [{` + ok + `, "read": ["usr"]}]}`, `checkers[0].read[0]: "usr" is not an absolute path`},
		{`{"checkers": [{` + ok + `, "env": {"A=B": "x"}}]}`, `checkers[0].env: "A=B" is not an environment variable name`},
		{`{"checkers": [{` + ok + `, "env": {"A": 1}}]}`, "checkers[0].env: got a number, want a string"},
		{`{"checkers": [{` + ok + `}, {` + ok + `}]}`, `checkers[1].name: "a" is already the name of checkers[0]`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadConfig(filepath.Join(dir, "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat(" ", maxConfigBytes+1)), 0o644))
	_, err = LoadConfig(big)
	assert.EqualError(t, err, "larger than 1048576 bytes")
}

func TestGlobs(t *testing.T) {
	for _, tc := range []struct {
		glob string
		yes  []string
		no   []string
	}{
		{"*.go", []string{"a.go", "x/y/a.go"}, []string{"a.gox", "go", "a.go/b"}},
		{"*.{js,ts}", []string{"a.js", "d/a.ts"}, []string{"a.jsx"}},
		{"cmd/*.go", []string{"cmd/a.go"}, []string{"a.go", "cmd/x/a.go", "x/cmd/a.go"}},
		{"**/*.sh", []string{"a.sh", "x/a.sh", "x/y/a.sh"}, []string{"a.bash"}},
		{"scripts/**", []string{"scripts/a", "scripts/x/y"}, []string{"a", "x/scripts/a"}},
		{"Makefile", []string{"Makefile", "sub/Makefile"}, []string{"makefile"}},
	} {
		m := newGlobMatcher(tc.glob)
		for _, p := range tc.yes {
			assert.True(t, m.match(p), "%s should match %s", tc.glob, p)
		}
		for _, p := range tc.no {
			assert.False(t, m.match(p), "%s should not match %s", tc.glob, p)
		}
	}
}
