package diagnostics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// requireLandlock skips a test of confined checkers on a kernel without
// Landlock, saying so: it must never pass there without running.
func requireLandlock(t testing.TB) {
	t.Helper()
	if sandbox.Problem() != "" {
		t.Skip("the kernel offers no Landlock: checkers cannot be confined here, so this test cannot run")
	}
}

// tool is the absolute path of a program the test needs.
func tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (.ci/run installs it); this test cannot run", name)
	}
	return p
}

// workspace is a real root with a Runner over it.
type workspace struct {
	t    *testing.T
	root string
	r    *Runner
}

func newWorkspace(t *testing.T, checkers string, tweak ...func(*Config)) *workspace {
	t.Helper()
	requireLandlock(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	cfgs, err := ParseConfig([]byte(checkers))
	require.NoError(t, err)
	cfg := Config{Root: root, Checkers: cfgs}
	for _, f := range tweak {
		f(&cfg)
	}
	r, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	require.True(t, r.Confined(), r.Unavailable())
	return &workspace{t: t, root: root, r: r}
}

func (w *workspace) path(rel string) string { return filepath.Join(w.root, rel) }

// change writes after at rel (as a successful write or edit leaves it) and
// checks the change from before (nil: the file was created).
func (w *workspace) change(rel string, before, after string) Report {
	w.t.Helper()
	p := w.path(rel)
	require.NoError(w.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(w.t, os.WriteFile(p, []byte(after), 0o644))
	ch := Change{Path: p, Before: []byte(before), After: []byte(after), Created: before == ""}
	return w.r.Check(context.Background(), ch)
}

func metadataJSON(t *testing.T, r Report) string {
	b, err := json.Marshal(r.Metadata())
	require.NoError(t, err)
	return string(b)
}

// jsonString quotes s as JSON, for building a config.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const gofmtChecker = `{"checkers": [{"name": "gofmt", "glob": "*.go", "command": ["gofmt", "-e", "{file}"], "format": "line"}]}`

func TestGofmt(t *testing.T) {
	tool(t, "gofmt")
	w := newWorkspace(t, gofmtChecker)
	good := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println() }\n"
	bad := "package main\n\nimport \"fmt\" \"os\"\n\nfunc main() { fmt.Println() }\n"

	t.Run("an edit that introduces a syntax error lists exactly it", func(t *testing.T) {
		rep := w.change("a.go", good, bad)
		assert.Equal(t, "\nNew problems after this change (the change was applied):\n3:14: expected ';', found \"os\"", rep.Text())
		assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[{"line":3,"col":14,"message":"expected ';', found \"os\""}],"resolved":0}`, metadataJSON(t, rep))
	})
	t.Run("an old problem moved by the edit is not new", func(t *testing.T) {
		moved := "package main\n\n// one\n// two\nimport \"fmt\" \"os\"\n\nfunc main() { fmt.Println() }\n"
		rep := w.change("a.go", bad, moved)
		assert.Equal(t, "", rep.Text())
		assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[],"resolved":0}`, metadataJSON(t, rep))
	})
	t.Run("a fix reports resolved and adds nothing to the text", func(t *testing.T) {
		rep := w.change("a.go", bad, good)
		assert.Equal(t, "", rep.Text())
		assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[],"resolved":1}`, metadataJSON(t, rep))
	})
	t.Run("a created file's problems are all new", func(t *testing.T) {
		rep := w.change("new/b.go", "", "package b\n\nfunc (\n")
		assert.Equal(t, "\nNew problems after this change (the change was applied):\n"+
			"3:8: expected '(', found 'EOF'\n3:8: expected ')', found 'EOF'\n3:8: expected ';', found 'EOF'\n3:8: expected 'IDENT', found 'EOF'", rep.Text())
	})
	t.Run("a file no checker matches adds nothing", func(t *testing.T) {
		rep := w.change("a.txt", "x", "y")
		assert.Equal(t, "", rep.Text())
		assert.Nil(t, rep.Metadata())
	})
}

// go vet on the whole package of the file: the version before is the
// package with that one file replaced through the go command's -overlay,
// the working folder is the file's folder.
func TestGoVetPackage(t *testing.T) {
	goBin := tool(t, "go")
	goroot, err := exec.Command(goBin, "env", "GOROOT").Output()
	require.NoError(t, err)
	w := newWorkspace(t, `{"checkers": [{"name": "vet", "glob": "*.go", "command": ["go", "vet", "-overlay", "{overlay}", "."],
		"format": "line", "read": [`+jsonString(strings.TrimSpace(string(goroot)))+`]}]}`)
	require.NoError(t, os.WriteFile(w.path("go.mod"), []byte("module example.com/m\n\ngo 1.22\n"), 0o644))
	require.NoError(t, os.MkdirAll(w.path("pkg"), 0o755))
	require.NoError(t, os.WriteFile(w.path("pkg/helper.go"), []byte("package pkg\n\nfunc helper() int { return 1 }\n"), 0o644))
	before := "package pkg\n\nfunc B() int { return helper() }\n"
	after := "package pkg\n\nfunc B() int { return helper() + helper2() }\n"
	rep := w.change("pkg/b.go", before, after)
	// helper is defined in a sibling file: only the package knows it.
	assert.Equal(t, "\nNew problems after this change (the change was applied):\n3:34: undefined: helper2", rep.Text())
	rep = w.change("pkg/b.go", after, before)
	assert.Equal(t, "", rep.Text())
	assert.Equal(t, `{"checker":"vet","fresh":true,"introduced":[],"resolved":1}`, metadataJSON(t, rep))
}

func TestShellcheck(t *testing.T) {
	tool(t, "shellcheck")
	w := newWorkspace(t, `{"checkers": [{"name": "shellcheck", "glob": "*.sh", "command": ["shellcheck", "-f", "json1", "{file}"], "format": "shellcheck-json1"}]}`)
	before := "#!/bin/sh\necho $1\n"
	after := "#!/bin/sh\n# greet — café\necho $1\nrm -rf $2/\n"
	rep := w.change("s.sh", before, after)
	// echo $1 had its problem before, on line 2; rm -rf $2/ is new.
	assert.Equal(t, "\nNew problems after this change (the change was applied):\n"+
		"4:8: warning: Use \"${var:?}\" to ensure this never expands to / . [SC2115]\n"+
		"4:8: info: Double quote to prevent globbing and word splitting. [SC2086]", rep.Text())
	assert.Equal(t, 0, rep.Results()[0].Resolved)
	rep = w.change("s.sh", after, "#!/bin/sh\n# greet — café\necho \"$1\"\nrm -rf \"${2:?}/\"\n")
	assert.Equal(t, "", rep.Text())
	assert.Equal(t, `{"checker":"shellcheck","fresh":true,"introduced":[],"resolved":3}`, metadataJSON(t, rep))
}

func TestPyCompile(t *testing.T) {
	py := tool(t, "python3")
	if p, err := exec.LookPath("/usr/bin/python3"); err == nil {
		py = p // not a version manager's shim
	}
	stdlib, err := exec.Command(py, "-S", "-c", "import os; print(os.path.dirname(os.__file__))").Output()
	require.NoError(t, err)
	w := newWorkspace(t, `{"checkers": [{"name": "python", "glob": "*.py", "command": [`+jsonString(py)+`, "-S", "-m", "py_compile", "{file}"],
		"format": "python", "read": [`+jsonString(strings.TrimSpace(string(stdlib)))+`]}]}`)
	good := "def f(x):\n    return x\n"
	bad := "def f(x):\n    return (x\n"
	rep := w.change("m.py", good, bad)
	assert.Equal(t, "\nNew problems after this change (the change was applied):\n2:12: SyntaxError: '(' was never closed", rep.Text())
	rep = w.change("m.py", bad, good)
	assert.Equal(t, "", rep.Text())
	assert.Equal(t, `{"checker":"python","fresh":true,"introduced":[],"resolved":1}`, metadataJSON(t, rep))
	_, err = os.Stat(w.path("__pycache__"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing is written in the root")
}

// script writes an executable shell script outside any root and returns
// a checker config running it with the given extra read paths.
func script(t *testing.T, name, body string, extra string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return `{"name": ` + jsonString(name) + `, "glob": "*.txt", "command": [` + jsonString(p) + `, "{file}"]` + extra + `}`
}

// A checker reads the root and its own files, writes only its private
// folder, and sees none of the server's environment.
func TestCheckerIsConfined(t *testing.T) {
	cat := tool(t, "cat")
	outside, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("TOPSECRET\n"), 0o644))
	t.Setenv("TOOLFS_TOKEN", "server-secret")
	body := `f=$1
cat "$SECRET" >/dev/null 2>&1 && echo "$f:1:1: read outside the root"
cat /etc/hostname >/dev/null 2>&1 && echo "$f:1:2: read /etc/hostname"
echo x 2>/dev/null > "$ROOT/evil.txt" && echo "$f:1:3: wrote in the root"
echo x 2>/dev/null > "$SIBLING" && echo "$f:1:4: wrote outside"
echo x > "$HOME/ok" && echo "$f:2:1: wrote its private folder"
cat "$f" >/dev/null && echo "$f:3:1: read the file"
cat "$ROOT/other.txt" >/dev/null && echo "$f:3:2: read beside it"
[ -z "$TOOLFS_TOKEN" ] && echo "$f:4:1: no server environment"
echo "$f:5:1: in $(pwd)"
`
	w := newWorkspace(t, `{"checkers": [`+script(t, "probe", body, `, "read": [`+jsonString(cat)+`], "env": {"SECRET": `+jsonString(secret)+`, "ROOT": "{root}", "SIBLING": `+jsonString(filepath.Join(outside, "x"))+`}`)+`]}`)
	require.NoError(t, os.WriteFile(w.path("other.txt"), []byte("x\n"), 0o644))
	rep := w.change("sub/a.txt", "", "hello\n")
	assert.Equal(t, "\nNew problems after this change (the change was applied):\n"+
		"2:1: wrote its private folder\n3:1: read the file\n3:2: read beside it\n4:1: no server environment\n"+
		"5:1: in "+w.path("sub"), rep.Text())
	for _, p := range []string{w.path("evil.txt"), filepath.Join(outside, "x")} {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, p)
	}
}

// The version before is a copy of its bytes in the checker's private
// folder, with the file's base name, checked from the file's folder.
func TestVersionBeforeIsACopy(t *testing.T) {
	cat := tool(t, "cat")
	body := `echo "$1:1:1: $(cat "$1") at $1 in $(pwd)"` + "\n"
	w := newWorkspace(t, `{"checkers": [`+script(t, "where", body, `, "read": [`+jsonString(cat)+`]`)+`]}`)
	rep := w.change("d/a.txt", "old", "new")
	require.Len(t, rep.Results(), 1)
	res := rep.Results()[0]
	assert.Equal(t, 1, res.Resolved)
	require.Len(t, res.Introduced, 1)
	assert.Equal(t, "new at "+w.path("d/a.txt")+" in "+w.path("d"), res.Introduced[0].Message)
	// The copy is gone after the run.
	entries, err := os.ReadDir(filepath.Join(w.r.checkers[0].home, versionsDir))
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// Every way a checker can fail to answer, as the model reads it.
func TestUnavailable(t *testing.T) {
	sleep := tool(t, "sleep")
	yes := tool(t, "yes")
	grep := tool(t, "grep")
	for _, tc := range []struct {
		name, body, extra, before, want string
	}{
		{"a status not in ok_exit with nothing to parse", "echo oops; exit 3\n", "", "x",
			"\nDiagnostics unavailable: c exited with status 3 and printed nothing it could parse."},
		{"a status in ok_exit", "echo oops; exit 3\n", `, "ok_exit": [3]`, "x", ""},
		{"a status not in ok_exit with something to parse is an answer", `echo "$1:1:1: odd"; exit 3` + "\n", "", "",
			"\nNew problems after this change (the change was applied):\n1:1: odd"},
		{"killed by a signal", "kill -SEGV $$\n", "", "x",
			"\nDiagnostics unavailable: c was killed by signal SIGSEGV and printed nothing it could parse."},
		{"too much output", "exec yes\n", `, "read": [` + jsonString(yes) + `]`, "x",
			"\nDiagnostics unavailable: c printed more than 4096 bytes."},
		{"a hang", "exec sleep 60\n", `, "read": [` + jsonString(sleep) + `]`, "x",
			"\nDiagnostics unavailable: c timed out after 2s."},
		{"a hang on the version before only", `grep -q SLOW "$1" && exec sleep 60; exit 0` + "\n", `, "read": [` + jsonString(sleep) + `, ` + jsonString(grep) + `]`, "SLOW",
			"\nDiagnostics unavailable: c timed out after 2s on the version before."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkspace(t, `{"checkers": [`+strings.Replace(script(t, "c", tc.body, tc.extra), `"name": "c"`, `"name": "c"`, 1)+`]}`, func(c *Config) {
				// Long enough that a loaded machine (a race build's re-exec
				// on two shared CPUs) starts every checker within it.
				c.Timeout = 2 * time.Second
				c.MaxOutputBytes = 4096
			})
			start := time.Now()
			rep := w.change("a.txt", tc.before, "y")
			assert.Less(t, time.Since(start), 2*time.Second+500*time.Millisecond, "within the limit and the time to reap")
			assert.Equal(t, tc.want, rep.Text())
			if strings.Contains(tc.want, "unavailable") {
				res := rep.Results()[0]
				assert.False(t, res.Fresh)
				assert.NotEmpty(t, res.Unavailable)
			}
		})
	}
	t.Run("a program gone since start-up did not start", func(t *testing.T) {
		dir := t.TempDir()
		prog := filepath.Join(dir, "gone")
		require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755))
		w := newWorkspace(t, `{"checkers": [{"name": "gone", "glob": "*.txt", "command": [`+jsonString(prog)+`, "{file}"]}]}`)
		require.NoError(t, os.Remove(prog))
		rep := w.change("a.txt", "x", "y")
		assert.Equal(t, "\nDiagnostics unavailable: gone did not start.", rep.Text())
		assert.Equal(t, `{"checker":"gone","fresh":false,"introduced":[],"resolved":0,"unavailable":"did not start"}`, metadataJSON(t, rep))
	})
	t.Run("new problems and a checker that could not answer", func(t *testing.T) {
		w := newWorkspace(t, `{"checkers": [`+script(t, "ok", `echo "$1:2:1: new"`+"\n", "")+`, `+script(t, "bad", "exit 9\n", "")+`]}`)
		rep := w.change("a.txt", "", "y\nz\n")
		assert.Equal(t, "\nNew problems after this change (the change was applied):\n2:1: new\nDiagnostics unavailable: bad exited with status 9 and printed nothing it could parse.", rep.Text())
		assert.Equal(t, `[{"checker":"ok","fresh":true,"introduced":[{"line":2,"col":1,"message":"new"}],"resolved":0},`+
			`{"checker":"bad","fresh":false,"introduced":[],"resolved":0,"unavailable":"exited with status 9 and printed nothing it could parse"}]`, metadataJSON(t, rep))
	})
}

// A checker that hangs, even one whose child tries to leave its process
// group, is cut at the limit: Check returns within the limit plus 100 ms,
// and nothing of it keeps running.
func TestHangIsCutAtTheLimit(t *testing.T) {
	sleep := tool(t, "sleep")
	setsid := tool(t, "setsid")
	// A mark of this run's processes: sleep takes "61.<digits>".
	mark := fmt.Sprintf("61.%d", time.Now().UnixNano()%1e9)
	for _, tc := range []struct{ name, body string }{
		{"sleep", "exec sleep MARK1\n"},
		{"a child in the background", "sleep MARK2 &\nsleep MARK3\n"},
		{"a child that tries to leave the group", "setsid -f sleep MARK4\nsetsid sleep MARK5 &\nsleep MARK6\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := `, "read": [` + jsonString(sleep) + `, ` + jsonString(setsid) + `]`
			body := strings.ReplaceAll(tc.body, "MARK", mark)
			w := newWorkspace(t, `{"checkers": [`+script(t, "hang", body, extra)+`]}`, func(c *Config) { c.Timeout = time.Second })
			start := time.Now()
			rep := w.change("a.txt", "", "y")
			took := time.Since(start)
			assert.Equal(t, "\nDiagnostics unavailable: hang timed out after 1s.", rep.Text())
			assert.GreaterOrEqual(t, took, time.Second)
			assert.Less(t, took, time.Second+100*time.Millisecond)
			t.Logf("returned after %v", took)
			assert.Empty(t, processesWith(t, "sleep "+mark), "a process of the checker outlived the check")
		})
	}
}

// processesWith lists the command lines of running processes that
// contain s.
func processesWith(t *testing.T, s string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var found []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if cmd := strings.ReplaceAll(string(b), "\x00", " "); err == nil && strings.Contains(cmd, s) {
			found = append(found, cmd)
		}
	}
	return found
}

// The version before is usually the version after of the previous change:
// its answer comes from the cache, so an edit runs the checker once.
func TestVersionBeforeFromTheCache(t *testing.T) {
	tool(t, "gofmt")
	w := newWorkspace(t, gofmtChecker)
	var runs atomic.Int64
	w.r.onStart = func(int) { runs.Add(1) }
	v1 := "package main\n"
	v2 := "package main\n\nimport \"a\" \"b\"\n"
	v3 := "package main\n\nimport \"a\"\n"
	w.change("a.go", v1, v2)
	assert.Equal(t, int64(2), runs.Load(), "both versions")
	rep := w.change("a.go", v2, v3)
	assert.Equal(t, int64(3), runs.Load(), "the version before came from the cache")
	assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[],"resolved":1}`, metadataJSON(t, rep))
	w.change("a.go", "", v1)
	assert.Equal(t, int64(4), runs.Load(), "a created file has no version before to run")
}

// The answer is fresh when the checker ran on exactly the version the
// change produced: a file changed again before the run is checked as a
// copy of that version (still fresh); one changed during the run is not.
func TestFresh(t *testing.T) {
	sleep := tool(t, "sleep")
	cat := tool(t, "cat")
	body := `sleep 0.3; echo "$1:1:1: $(cat "$1")"` + "\n"
	w := newWorkspace(t, `{"checkers": [`+script(t, "slow", body, `, "read": [`+jsonString(sleep)+`, `+jsonString(cat)+`]`)+`]}`)
	p := w.path("a.txt")
	require.NoError(t, os.WriteFile(p, []byte("changed again"), 0o644))
	rep := w.r.Check(context.Background(), Change{Path: p, Created: true, After: []byte("version")})
	res := rep.Results()[0]
	assert.True(t, res.Fresh)
	assert.Equal(t, []Problem{{1, 1, "version"}}, res.Introduced)

	require.NoError(t, os.WriteFile(p, []byte("version"), 0o644))
	go func() {
		time.Sleep(100 * time.Millisecond)
		os.WriteFile(p+".tmp", []byte("later"), 0o644)
		os.Rename(p+".tmp", p)
	}()
	rep = w.r.Check(context.Background(), Change{Path: p, Created: true, After: []byte("version")})
	res = rep.Results()[0]
	assert.False(t, res.Fresh)
	assert.Empty(t, res.Unavailable)
}

// Checker processes are bounded: with one slot, the two versions run one
// after the other.
func TestConcurrencyBound(t *testing.T) {
	sleep := tool(t, "sleep")
	conf := `{"checkers": [` + script(t, "slow", "sleep 0.3\n", `, "read": [`+jsonString(sleep)+`]`) + `]}`
	for _, tc := range []struct {
		slots    int
		min, max time.Duration
	}{{1, 600 * time.Millisecond, 900 * time.Millisecond}, {2, 300 * time.Millisecond, 550 * time.Millisecond}} {
		w := newWorkspace(t, conf, func(c *Config) { c.MaxConcurrent = tc.slots })
		start := time.Now()
		rep := w.change("a.txt", "x", "y")
		took := time.Since(start)
		assert.Equal(t, "", rep.Text())
		assert.GreaterOrEqual(t, took, tc.min, "%d slots", tc.slots)
		assert.Less(t, took, tc.max, "%d slots", tc.slots)
	}
}

// Start-up errors name the field at fault.
func TestNewErrors(t *testing.T) {
	root := t.TempDir()
	plain := filepath.Join(root, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("x"), 0o644))
	for _, tc := range []struct{ doc, want string }{
		{`{"checkers": [{"name": "a", "glob": "*", "command": ["no-such-checker-x"]}]}`, `checkers[0].command[0]: "no-such-checker-x" was not found in PATH`},
		{`{"checkers": [{"name": "a", "glob": "*", "command": [` + jsonString(plain) + `]}]}`, `checkers[0].command[0]: ` + plain + ` is not an executable file`},
		{`{"checkers": [{"name": "a", "glob": "*", "command": ["sh"], "read": ["/no/such/dir"]}]}`, `checkers[0].read[0]: stat /no/such/dir: no such file or directory`},
	} {
		cfgs, err := ParseConfig([]byte(tc.doc))
		require.NoError(t, err)
		_, err = New(Config{Root: root, Checkers: cfgs})
		assert.EqualError(t, err, tc.want)
	}
}

// With "stdin", the checker reads the version on stdin and {path} is the
// file's path: a tool's stdin mode sees the version before as it would
// see the file, named as the file (ESLint decides by the name which
// configuration applies).
func TestStdin(t *testing.T) {
	tool(t, "gofmt")
	w := newWorkspace(t, `{"checkers": [{"name": "gofmt", "glob": "*.go", "command": ["gofmt", "-e"], "stdin": true}]}`)
	good := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println() }\n"
	bad := "package main\n\nimport \"fmt\" \"os\"\n\nfunc main() { fmt.Println() }\n"
	rep := w.change("a.go", good, bad)
	assert.Equal(t, "\nNew problems after this change (the change was applied):\n3:14: expected ';', found \"os\"", rep.Text())
	rep = w.change("a.go", bad, good)
	assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[],"resolved":1}`, metadataJSON(t, rep))
}

// ESLint, when installed (npm install eslint; it is not on the CI
// machine): the version before is read on stdin under the file's name, so
// the root's eslint.config.mjs applies to both versions.
func TestESLint(t *testing.T) {
	eslint, err := exec.LookPath("eslint")
	if err != nil {
		t.Skip("eslint is not on PATH (npm install eslint); this test cannot run")
	}
	real, err := filepath.EvalSymlinks(eslint)
	require.NoError(t, err)
	install := filepath.Dir(filepath.Dir(real)) // node_modules/eslint
	w := newWorkspace(t, `{"checkers": [{"name": "eslint", "glob": "*.js", "command": [`+jsonString(eslint)+`, "-f", "json", "--stdin", "--stdin-filename", "{path}"],
		"stdin": true, "format": "eslint-json", "read": [`+jsonString(filepath.Dir(install))+`], "env": {"OPENSSL_CONF": "/dev/null"}}]}`)
	require.NoError(t, os.WriteFile(w.path("eslint.config.mjs"), []byte(`export default [{ rules: { semi: "error" } }];`+"\n"), 0o644))
	rep := w.change("a.js", "const a = 1\n", "const a = 1\nlet b = 2\n")
	assert.Equal(t, "\nNew problems after this change (the change was applied):\n2:10: error: Missing semicolon. [semi]", rep.Text())
	assert.Equal(t, 0, rep.Results()[0].Resolved)
}

// Where the checkers cannot be confined, require (the default) makes every
// check say so; best-effort runs them unconfined.
func TestSandboxModes(t *testing.T) {
	tool(t, "gofmt")
	prove = func(context.Context, string) error { return errors.New("the kernel does not offer Landlock") }
	t.Cleanup(func() { prove = sandbox.Prove })
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	cfgs, err := ParseConfig([]byte(gofmtChecker))
	require.NoError(t, err)
	p := filepath.Join(root, "a.go")
	bad := "package main\n\nimport \"a\" \"b\"\n"
	require.NoError(t, os.WriteFile(p, []byte(bad), 0o644))
	ch := Change{Path: p, Created: true, After: []byte(bad)}

	r, err := New(Config{Root: root, Checkers: cfgs})
	require.NoError(t, err)
	defer r.Close()
	assert.False(t, r.Confined())
	assert.Equal(t, "the checkers cannot be confined (the kernel does not offer Landlock); they need Landlock (--search-sandbox require)", r.Unavailable())
	assert.Equal(t, "\nDiagnostics unavailable: gofmt did not start.", r.Check(context.Background(), ch).Text())

	r, err = New(Config{Root: root, Checkers: cfgs, Sandbox: sandbox.BestEffort})
	require.NoError(t, err)
	defer r.Close()
	assert.False(t, r.Confined())
	assert.Empty(t, r.Unavailable())
	assert.Equal(t, "\nNew problems after this change (the change was applied):\n3:12: expected ';', found \"b\"", r.Check(context.Background(), ch).Text())
}

// A call that ends (its client went away) stops its checkers at once.
func TestCancelled(t *testing.T) {
	sleep := tool(t, "sleep")
	w := newWorkspace(t, `{"checkers": [`+script(t, "slow", "exec sleep 60\n", `, "read": [`+jsonString(sleep)+`]`)+`]}`)
	p := w.path("a.txt")
	require.NoError(t, os.WriteFile(p, []byte("y"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	rep := w.r.Check(ctx, Change{Path: p, Created: true, After: []byte("y")})
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, "\nDiagnostics unavailable: slow was cancelled.", rep.Text())
}

func TestCacheBounds(t *testing.T) {
	c := newCache(2, 1000)
	k := func(s string) [32]byte { return cacheKey("c", "/p", []byte(s)) }
	c.put(k("a"), []Problem{{1, 1, "a"}})
	c.put(k("b"), nil)
	_, ok := c.get(k("a")) // a is now the most recent
	require.True(t, ok)
	c.put(k("c"), nil)
	_, ok = c.get(k("b"))
	assert.False(t, ok, "the least recently used went first")
	ps, ok := c.get(k("a"))
	assert.True(t, ok)
	assert.Equal(t, []Problem{{1, 1, "a"}}, ps)
	assert.Equal(t, 2, c.len())

	c.put(k("big"), []Problem{{1, 1, strings.Repeat("x", 900)}})
	assert.Equal(t, 1, c.len(), "the byte bound evicts too")
	c.put(k("huge"), []Problem{{1, 1, strings.Repeat("x", 2000)}})
	_, ok = c.get(k("huge"))
	assert.False(t, ok, "an answer over the whole bound is not kept")
	assert.NotEqual(t, cacheKey("c", "/p", []byte("a")), cacheKey("c", "/q", []byte("a")))
	assert.NotEqual(t, cacheKey("c", "/p", []byte("a")), cacheKey("d", "/p", []byte("a")))
}

// A change the server could not hold in memory is not checked: every
// matching checker says why, none runs.
func TestUnchecked(t *testing.T) {
	w := newWorkspace(t, `{"checkers": [{"name": "never", "glob": "*.go", "command": ["false"]}]}`)
	require.NoError(t, os.WriteFile(w.path("a.go"), []byte("x"), 0o644))
	rep := w.r.Check(context.Background(), Change{Path: w.path("a.go"), Unchecked: ReasonTooLarge})
	assert.Equal(t, "\nDiagnostics unavailable: never was not run: the file is 10 MiB or larger.", rep.Text())
	assert.Equal(t, `{"checker":"never","fresh":false,"introduced":[],"resolved":0,"unavailable":"was not run: the file is 10 MiB or larger"}`, metadataJSON(t, rep))
	rep = w.r.Check(context.Background(), Change{Path: w.path("a.txt"), Unchecked: ReasonTooLarge})
	assert.Nil(t, rep.Metadata(), "no checker matches")
}
