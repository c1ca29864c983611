package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// diagnosticsConfig is a --diagnostics file with the real checkers of
// docs/diagnostics.md (gofmt, shellcheck, py_compile), checkers that hang
// or crash, and one that tries to write into the root.
func diagnosticsConfig(t *testing.T) string {
	t.Helper()
	if p := sandbox.Problem(); p != "" {
		t.Skip("checkers cannot be confined here: " + p)
	}
	for _, name := range []string{"gofmt", "shellcheck", "sleep"} {
		if _, err := exec.LookPath(name); err != nil {
			t.Skip(name + " is not installed (.ci/run installs it)")
		}
	}
	py := "/usr/bin/python3" // the system interpreter, not a version manager's shim
	stdlib, err := exec.Command(py, "-S", "-c", "import os; print(os.path.dirname(os.__file__))").Output()
	if err != nil {
		t.Skip("/usr/bin/python3 is not installed (.ci/run installs it)")
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cfg := `{"checkers": [
  {"name": "gofmt", "glob": "*.go", "command": ["gofmt", "-e", "{file}"]},
  {"name": "shellcheck", "glob": "*.sh", "command": ["shellcheck", "-f", "json1", "{file}"], "format": "shellcheck-json1"},
  {"name": "python", "glob": "*.py", "command": [` + q(py) + `, "-S", "-m", "py_compile", "{file}"], "format": "python", "read": [` + q(strings.TrimSpace(string(stdlib))) + `]},
  {"name": "hang", "glob": "*.hang", "command": ["sleep", "60"]},
  {"name": "crash", "glob": "*.crash", "command": ["sh", "-c", "kill -SEGV $$"]},
  {"name": "intruder", "glob": "*.txt", "command": ["sh", "-c", "echo x > {root}/pwned.txt && echo {file}:1:1: wrote in the root"]}
]}`
	file := filepath.Join(t.TempDir(), "diagnostics.json")
	require.NoError(t, os.WriteFile(file, []byte(cfg), 0o644))
	return file
}

// toolAnswer is a REST tool answer: the text and the metadata's
// diagnostics member as JSON ("" when absent).
type toolAnswer struct {
	output, diagnostics string
}

func restTool(t *testing.T, base, tool, body string) toolAnswer {
	t.Helper()
	got := call(t, "POST", base+"/tools/"+tool, "s", body)
	require.Equal(t, 200, got.status, got.body)
	var res struct {
		Output   string                     `json:"output"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(got.body), &res))
	return toolAnswer{res.Output, string(res.Metadata["diagnostics"])}
}

func editBody(path, from, to string) string {
	b, _ := json.Marshal(map[string]string{"file_path": path, "old_string": from, "new_string": to})
	return string(b)
}

func writeBody(path, content string) string {
	b, _ := json.Marshal(map[string]string{"file_path": path, "content": content})
	return string(b)
}

// TestDiagnosticsThroughTheServer pins docs/diagnostics.md, "What the
// model sees", through the binary's flags, REST and /mcp, with real
// checkers: a change that introduces a problem lists only it; a problem
// there before is not listed; a fix reports resolved and adds nothing; a
// CRLF file is checked as its bytes are on disk; a crashed checker says
// so; a checker cannot write into the root; MCP's text is REST's output.
func TestDiagnosticsThroughTheServer(t *testing.T) {
	cfg := diagnosticsConfig(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	base, _ := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--diagnostics", cfg, "--policy=false"})
	p := func(rel string) string { return filepath.Join(root, rel) }
	const header = "\nNew problems after this change (the change was applied):\n"

	t.Run("gofmt: the syntax error an edit introduces, exactly", func(t *testing.T) {
		good := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println() }\n"
		require.NoError(t, os.WriteFile(p("a.go"), []byte(good), 0o644))
		a := restTool(t, base, "edit", editBody("a.go", `import "fmt"`, `import "fmt" "os"`))
		assert.Equal(t, "The file "+p("a.go")+" has been updated successfully."+header+"3:14: expected ';', found \"os\"", a.output)
		assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[{"line":3,"col":14,"message":"expected ';', found \"os\""}],"resolved":0}`, a.diagnostics)

		// The old problem stays, moved two lines down: nothing new.
		a = restTool(t, base, "edit", editBody("a.go", "package main\n", "package main\n\n// one\n// two\n"))
		assert.Equal(t, "The file "+p("a.go")+" has been updated successfully.", a.output)
		assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[],"resolved":0}`, a.diagnostics)

		a = restTool(t, base, "edit", editBody("a.go", `import "fmt" "os"`, `import "fmt"`))
		assert.Equal(t, "The file "+p("a.go")+" has been updated successfully.", a.output)
		assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[],"resolved":1}`, a.diagnostics)
	})

	t.Run("shellcheck: a problem there before is not reported", func(t *testing.T) {
		require.NoError(t, os.WriteFile(p("s.sh"), []byte("#!/bin/sh\necho $1\n"), 0o644))
		a := restTool(t, base, "edit", editBody("s.sh", "echo $1\n", "echo $1\nrm -rf $2/\n"))
		assert.Equal(t, "The file "+p("s.sh")+" has been updated successfully."+header+
			"3:8: warning: Use \"${var:?}\" to ensure this never expands to / . [SC2115]\n"+
			"3:8: info: Double quote to prevent globbing and word splitting. [SC2086]", a.output)
	})

	t.Run("shellcheck: a CRLF file is checked as it is on disk", func(t *testing.T) {
		// Every line of a CRLF script has a carriage-return problem, before
		// and after: an edit within a line introduces none. Were the version
		// before LF-normalized, every line's would look new.
		require.NoError(t, os.WriteFile(p("crlf.sh"), []byte("#!/bin/sh\r\necho a\r\necho b\r\n"), 0o644))
		a := restTool(t, base, "edit", editBody("crlf.sh", "echo b", "echo c"))
		assert.Equal(t, "The file "+p("crlf.sh")+" has been updated successfully.", a.output)
		assert.Contains(t, a.diagnostics, `"introduced":[],`)
		// A write replacing it with the same kind of bytes plus a line.
		a = restTool(t, base, "write", writeBody("crlf.sh", "#!/bin/sh\r\necho a\r\necho c\r\necho d\r\n"))
		assert.Equal(t, "<path>"+p("crlf.sh")+"</path>\n<type>file</type>\n<content>\nUpdated file\n</content>"+header+
			"4:7: error: Literal carriage return. Run script through tr -d '\\r' . [SC1017]", a.output)
	})

	t.Run("python: a write that introduces a syntax error", func(t *testing.T) {
		a := restTool(t, base, "write", writeBody("m.py", "def f(x):\n    return x\n"))
		assert.Equal(t, "<path>"+p("m.py")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>", a.output)
		assert.Equal(t, `{"checker":"python","fresh":true,"introduced":[],"resolved":0}`, a.diagnostics)
		a = restTool(t, base, "edit", editBody("m.py", "return x", "return (x"))
		assert.Equal(t, "The file "+p("m.py")+" has been updated successfully."+header+"2:12: SyntaxError: '(' was never closed", a.output)
		_, err := os.Stat(p("__pycache__"))
		assert.ErrorIs(t, err, os.ErrNotExist, "py_compile wrote nothing beside the file")
	})

	t.Run("a checker killed by a signal is unavailable", func(t *testing.T) {
		a := restTool(t, base, "write", writeBody("x.crash", "x\n"))
		assert.Equal(t, "<path>"+p("x.crash")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>"+
			"\nDiagnostics unavailable: crash was killed by signal SIGSEGV and printed nothing it could parse.", a.output)
		assert.Equal(t, `{"checker":"crash","fresh":false,"introduced":[],"resolved":0,"unavailable":"was killed by signal SIGSEGV and printed nothing it could parse"}`, a.diagnostics)
	})

	t.Run("a checker cannot write into the root", func(t *testing.T) {
		a := restTool(t, base, "write", writeBody("notes.txt", "hello\n"))
		assert.Equal(t, "<path>"+p("notes.txt")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>", a.output,
			"unconfined, the checker would write pwned.txt and say so")
		_, err := os.Stat(p("pwned.txt"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})

	t.Run("a file of 10 MiB or more is not checked", func(t *testing.T) {
		big := "package big\n//" + strings.Repeat("x", 10<<20) + "\n"
		a := restTool(t, base, "write", writeBody("big.go", big))
		assert.Equal(t, "<path>"+p("big.go")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>"+
			"\nDiagnostics unavailable: gofmt was not run: the file is 10 MiB or larger.", a.output)
		assert.Equal(t, `{"checker":"gofmt","fresh":false,"introduced":[],"resolved":0,"unavailable":"was not run: the file is 10 MiB or larger"}`, a.diagnostics)
		a = restTool(t, base, "write", writeBody("big.go", "package big\n"))
		assert.Equal(t, "<path>"+p("big.go")+"</path>\n<type>file</type>\n<content>\nUpdated file\n</content>"+
			"\nDiagnostics unavailable: gofmt was not run: the file is 10 MiB or larger.", a.output, "the version before is too large")
	})

	t.Run("no checker matches: no block, no member", func(t *testing.T) {
		a := restTool(t, base, "write", writeBody("README", "x\n"))
		assert.Equal(t, "", a.diagnostics)
	})

	t.Run("MCP and /model carry the same text", func(t *testing.T) {
		good := "package b\n\nfunc F() {}\n"
		for _, f := range []string{"b.go", "c.go", "d.go"} {
			require.NoError(t, os.WriteFile(p(f), []byte(good), 0o644))
		}
		rest := restTool(t, base, "edit", editBody("b.go", "func F() {}", "func F() {"))
		text, isErr := mcpText(t, base, "", "edit", map[string]any{"file_path": "c.go", "old_string": "func F() {}", "new_string": "func F() {"})
		require.False(t, isErr, text)
		assert.Contains(t, rest.output, header)
		assert.Equal(t, strings.ReplaceAll(rest.output, p("b.go"), p("c.go")), text)
		model := call(t, "POST", base+"/model/edit", "s", editBody("d.go", "func F() {}", "func F() {"))
		require.Equal(t, 200, model.status, model.body)
		assert.Equal(t, strings.ReplaceAll(rest.output, p("b.go"), p("d.go")), model.body)
	})
}

// TestDiagnosticsTimeout: a checker that hangs is cut at
// --diagnostics-timeout, and the edit's answer comes within the limit plus
// the time to reap, saying so, on REST and on /mcp.
func TestDiagnosticsTimeout(t *testing.T) {
	cfg := diagnosticsConfig(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	base, _ := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--diagnostics", cfg, "--diagnostics-timeout", "700ms", "--policy=false"})
	require.NoError(t, os.WriteFile(filepath.Join(root, "x.hang"), []byte("a\n"), 0o644))
	start := time.Now()
	a := restTool(t, base, "edit", editBody("x.hang", "a", "b"))
	took := time.Since(start)
	assert.Equal(t, "The file "+filepath.Join(root, "x.hang")+" has been updated successfully."+
		"\nDiagnostics unavailable: hang timed out after 700ms.", a.output)
	assert.Equal(t, `{"checker":"hang","fresh":false,"introduced":[],"resolved":0,"unavailable":"timed out after 700ms"}`, a.diagnostics)
	t.Logf("the edit answered in %v with a 700ms limit", took)
	assert.GreaterOrEqual(t, took, 700*time.Millisecond)
	assert.Less(t, took, 700*time.Millisecond+500*time.Millisecond, "within the limit and the time to reap (slack for a loaded machine)")

	text, isErr := mcpText(t, base, "", "edit", map[string]any{"file_path": "x.hang", "old_string": "b", "new_string": "c"})
	require.False(t, isErr, text)
	assert.Equal(t, "The file "+filepath.Join(root, "x.hang")+" has been updated successfully."+
		"\nDiagnostics unavailable: hang timed out after 700ms.", text)
}

// TestDiagnosticsOriginalProfile: the original profile's texts never
// change, and its metadata has no diagnostics member.
func TestDiagnosticsOriginalProfile(t *testing.T) {
	cfg := diagnosticsConfig(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	base, _ := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--diagnostics", cfg, "--profile", "original", "--policy=false"})
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.go"), []byte("package a\n"), 0o644))
	a := restTool(t, base, "edit", editBody("a.go", "package a", "package a b"))
	assert.Equal(t, "The file "+filepath.Join(root, "a.go")+" has been updated successfully.", a.output)
	assert.Equal(t, "", a.diagnostics)
	text, isErr := mcpText(t, base, "", "write", map[string]any{"file_path": "b.go", "content": "package (\n"})
	require.False(t, isErr, text)
	assert.Equal(t, "<path>"+filepath.Join(root, "b.go")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>", text)
}

// TestDiagnosticsBadConfig: a bad --diagnostics file stops start-up with
// the package's message, naming the flag and the field.
func TestDiagnosticsBadConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"checkers": [{"name": "x", "glob": "*.go", "command": ["gofmt"], "format": "json"}]}`), 0o644))
	err := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--root", dir, "--diagnostics", bad}, env(nil), io.Discard, io.Discard)
	require.Error(t, err)
	assert.Equal(t, "--diagnostics "+bad+`: checkers[0].format: unknown format "json" (known: line, shellcheck-json1, eslint-json, python)`, err.Error())

	err = run(context.Background(), []string{"--addr", "127.0.0.1:0", "--root", dir, "--diagnostics", filepath.Join(dir, "none.json")}, env(nil), io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--diagnostics "+filepath.Join(dir, "none.json")+": open ")

	err = run(context.Background(), []string{"--addr", "127.0.0.1:0", "--root", dir, "--diagnostics-timeout", "0s"}, env(nil), io.Discard, io.Discard)
	require.Error(t, err)
	assert.Equal(t, "--diagnostics-timeout must be positive", err.Error())
}
