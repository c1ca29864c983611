package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServesAsTheFolderOwner is the README's container command without the
// container: `docker run --user "$(id -u):$(id -g)"` runs the server under
// the uid of the folder's owner, a uid the image's /etc/passwd does not
// know, with HOME=/ and the image's environment (but a loopback address). It serves that folder:
// writes and edits succeed and what it creates is the owner's, and grep
// runs confined. The image's own user (uid 10001) on the same folder is
// what the README warns of: on a fresh folder every write is 403
// FS_PERMISSION_DENIED (and once the owner has run a server there, the
// image's user cannot open its private folder and does not start).
func TestServesAsTheFolderOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the server under other uids")
	}
	const owner = 4321
	parent, err := os.MkdirTemp("", "toolfs-user-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(parent) })
	require.NoError(t, os.Chmod(parent, 0o755))
	folder := func(name string) string {
		root := filepath.Join(parent, name)
		require.NoError(t, os.Mkdir(root, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha\n"), 0o644))
		for _, p := range []string{root, filepath.Join(root, "a.txt")} {
			require.NoError(t, os.Chown(p, owner, owner))
		}
		return root
	}
	serve := func(uid uint32, root string) (string, func()) {
		cmd := exec.Command(binary(t))
		cmd.Dir = "/"
		cmd.Env = []string{"HOME=/", "PATH=" + os.Getenv("PATH"), "TOOLFS_ROOT=" + root, "TOOLFS_ADDR=127.0.0.1:0", "TOOLFS_LOG_FORMAT=json"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err, "stderr: %s", stderr)
		m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(line)
		require.NotNil(t, m, line)
		return m[1], func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }
	}
	post := func(base, tool, body string) answer {
		t.Helper()
		return call(t, "POST", base+"/tools/"+tool, "", body)
	}

	root := folder("workspace")
	base, stop := serve(owner, root)
	assert.Contains(t, post(base, "read", `{"file_path":"a.txt"}`).body, `1: alpha`)
	assert.Equal(t, 200, post(base, "edit", `{"file_path":"a.txt","old_string":"alpha","new_string":"beta"}`).status)
	assert.Equal(t, 200, post(base, "write", `{"file_path":"new/b.txt","content":"b\n"}`).status)
	g := post(base, "grep", `{"pattern":"beta"}`)
	assert.Equal(t, 200, g.status, g.body)
	assert.Contains(t, g.body, `Found 1 match`)
	stop()
	b, err := os.ReadFile(filepath.Join(root, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "beta\n", string(b))
	for _, p := range []string{"new", "new/b.txt", "a.txt", ".toolfs-api"} {
		info, err := os.Stat(filepath.Join(root, p))
		require.NoError(t, err)
		assert.Equal(t, uint32(owner), info.Sys().(*syscall.Stat_t).Uid, "%s is the folder owner's", p)
	}

	base, stop = serve(10001, folder("fresh"))
	defer stop()
	w := post(base, "write", `{"file_path":"c.txt","content":"c\n"}`)
	assert.Equal(t, 403, w.status)
	assert.True(t, strings.Contains(w.body, `"code":"FS_PERMISSION_DENIED"`), w.body)
}
