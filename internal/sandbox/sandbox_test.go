package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireLandlock skips a test of the sandbox on a kernel without Landlock,
// saying so: it must never pass there without running.
func requireLandlock(t testing.TB) {
	t.Helper()
	if kernelLandlockABI() == 0 {
		t.Skip("the kernel offers no Landlock: nothing can be confined here, so this test cannot run")
	}
}

func TestProve(t *testing.T) {
	requireLandlock(t)
	exe, err := Self()
	require.NoError(t, err)
	require.NoError(t, Prove(context.Background(), exe))

	landlockABI = func() int { return 0 }
	t.Cleanup(func() { landlockABI = kernelLandlockABI })
	assert.EqualError(t, Prove(context.Background(), exe), "the kernel does not offer Landlock")
}

// The files a program needs are listed one by one: the binary, its
// interpreter and its libraries; for a script, the script and its
// interpreter's, through env(1) too.
func TestProgramFiles(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	files, err := ProgramFiles(sh, os.Getenv("PATH"))
	require.NoError(t, err)
	require.Equal(t, sh, files[0])
	for _, f := range files {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), f)
	}

	dir := t.TempDir()
	direct := filepath.Join(dir, "direct")
	require.NoError(t, os.WriteFile(direct, []byte("#!"+sh+" -e\necho hi\n"), 0o755))
	got, err := ProgramFiles(direct, "")
	require.NoError(t, err)
	assert.Equal(t, append([]string{direct}, files...), got)

	env, err := exec.LookPath("env")
	require.NoError(t, err)
	envFiles, err := ProgramFiles(env, "")
	require.NoError(t, err)
	viaEnv := filepath.Join(dir, "via-env")
	require.NoError(t, os.WriteFile(viaEnv, []byte("#!"+env+" sh\necho hi\n"), 0o755))
	got, err = ProgramFiles(viaEnv, filepath.Dir(sh))
	require.NoError(t, err)
	assert.Equal(t, viaEnv, got[0])
	for _, f := range append(envFiles, files...) {
		assert.Contains(t, got, f)
	}

	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte("#!relative\n"), 0o755))
	_, err = ProgramFiles(bad, "")
	assert.EqualError(t, err, bad+`: the "#!" line names no absolute interpreter`)
}

// A confined program reads beneath its readable folder and its Read paths,
// writes only its Write folders and devices, and nothing else; it gets
// exactly the environment it was given.
func TestCommandConfines(t *testing.T) {
	requireLandlock(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	root, outside, priv := filepath.Join(base, "root"), filepath.Join(base, "outside"), filepath.Join(base, "priv")
	for _, d := range []string{filepath.Join(root, "sub"), outside, priv} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "in.txt"), []byte("inside\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o644))
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	cat, err := exec.LookPath("cat")
	require.NoError(t, err)
	var progs []string
	for _, p := range []string{sh, cat} {
		f, err := ProgramFiles(p, "")
		require.NoError(t, err)
		progs = append(progs, f...)
	}
	exe, err := Self()
	require.NoError(t, err)

	run := func(t *testing.T, script string, unconfined bool) (string, int) {
		t.Helper()
		dir, err := os.Open(filepath.Join(root, "sub"))
		require.NoError(t, err)
		defer dir.Close()
		rootF, err := os.Open(root)
		require.NoError(t, err)
		defer rootF.Close()
		c := Command{
			Path: sh, Args: []string{"sh", "-c", script}, Env: []string{"PATH=" + filepath.Dir(cat), "ONLY=this"},
			Policy: Policy{Exec: progs, Write: []string{priv}, Devices: []string{os.DevNull}},
			Dir:    dir, ReadBeneath: rootF,
		}
		cmd, err := c.Cmd(exe, unconfined)
		require.NoError(t, err)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err = cmd.Run()
		if err != nil {
			require.IsType(t, &exec.ExitError{}, err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}
	for _, tc := range []struct {
		name, script, want string
		code               int
	}{
		{"reads beneath the root from its folder", "cat in.txt ../sub/in.txt", "inside\ninside\n", 0},
		{"writes its private folder and /dev/null", "echo x > " + priv + "/w && cat " + priv + "/w && echo y > /dev/null", "x\n", 0},
		{"its environment is exactly the given one", "echo $ONLY $HOME", "this\n", 0},
		{"cannot read outside", "cat " + outside + "/secret.txt", "cat: " + outside + "/secret.txt: Permission denied\n", 1},
		{"cannot write in the root", "echo x > " + root + "/w", "sh: 1: cannot create " + root + "/w: Permission denied\n", 2},
		{"cannot read /etc", "cat /etc/hostname", "cat: /etc/hostname: Permission denied\n", 1},
		{"cannot signal the server", "kill -0 " + strconv.Itoa(os.Getpid()), "sh: 1: kill: Operation not permitted\n\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(t, tc.script, false)
			assert.Equal(t, tc.want, out)
			assert.Equal(t, tc.code, code)
		})
	}
	t.Run("unconfined reads outside", func(t *testing.T) {
		out, code := run(t, "cat "+outside+"/secret.txt; pwd", true)
		assert.Equal(t, "secret\n"+filepath.Join(root, "sub")+"\n", out)
		assert.Equal(t, 0, code)
	})
	t.Run("a program it may not execute did not start", func(t *testing.T) {
		dir, err := os.Open(root)
		require.NoError(t, err)
		defer dir.Close()
		c := Command{Path: "/nonexistent/prog", Args: []string{"prog"}, Dir: dir, Policy: Policy{Exec: progs}}
		cmd, err := c.Cmd(exe, false)
		require.NoError(t, err)
		var out bytes.Buffer
		cmd.Stderr = &out
		err = cmd.Run()
		require.Error(t, err)
		assert.Equal(t, ChildFailed, cmd.ProcessState.ExitCode())
		assert.True(t, strings.HasPrefix(out.String(), ChildErrPrefix), out.String())
	})
}

// A confined program gets its argv and environment as an exec of it
// would: each string may be as long as the kernel allows one (128 KiB),
// and together they may be far longer than the one string the child's
// own instructions travel in (a grep pattern of 100 KiB, a large
// environment).
func TestLongArgumentsAndEnvironment(t *testing.T) {
	requireLandlock(t)
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	files, err := ProgramFiles(sh, "")
	require.NoError(t, err)
	exe, err := Self()
	require.NoError(t, err)
	dir, err := os.Open(t.TempDir())
	require.NoError(t, err)
	defer dir.Close()
	const n = 100 << 10
	c := Command{
		Path: sh, Args: []string{"sh", "-c", `printf '%s %s %s' ${#1} ${#A} ${#B}`, "sh", strings.Repeat("p", n)},
		Env:    []string{"A=" + strings.Repeat("a", n), "B=" + strings.Repeat("b", n)},
		Policy: Policy{Exec: files}, Dir: dir,
	}
	for _, unconfined := range []bool{false, true} {
		cmd, err := c.Cmd(exe, unconfined)
		require.NoError(t, err)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "unconfined %v: %s", unconfined, out)
		assert.Equal(t, "102400 102400 102400", string(out), "unconfined %v", unconfined)
	}
}

// probeEnv stops this test binary at once (TestMain), so a re-exec that
// did not become the child shows as empty output.
const probeEnv = "TOOLFS_SANDBOX_TEST_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) == "1" {
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Only both markers together make a process the child: the environment
// variable alone, or the marker alone, runs the program as usual (here: the
// test binary, which TestMain stops at once under probeEnv).
func TestChildNeedsBothMarkers(t *testing.T) {
	requireLandlock(t)
	dir, err := os.Open(t.TempDir())
	require.NoError(t, err)
	defer dir.Close()
	echo, err := exec.LookPath("echo")
	require.NoError(t, err)
	files, err := ProgramFiles(echo, "")
	require.NoError(t, err)
	exe, err := Self()
	require.NoError(t, err)
	cmd, err := Command{Path: echo, Args: []string{"echo", "CHILD-RAN"}, Dir: dir, Policy: Policy{Exec: files}}.Cmd(exe, false)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"both markers", cmd.Args, append(cmd.Env, probeEnv+"=1"), "CHILD-RAN\n"},
		{"environment only", []string{cmd.Args[0], "x", cmd.Args[2]}, append(cmd.Env, probeEnv+"=1"), ""},
		{"marker only", cmd.Args, []string{childEnv + "=0", probeEnv + "=1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := exec.Command(exe)
			c.Args, c.Env, c.ExtraFiles = tc.args, tc.env, cmd.ExtraFiles
			out, err := c.CombinedOutput()
			require.NoError(t, err, string(out))
			assert.Equal(t, tc.want, string(out))
		})
	}
}
