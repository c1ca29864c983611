package search

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// requireRg skips a test that needs the real ripgrep when it is absent.
func requireRg(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("ripgrep (rg) is not on PATH; install it (apt-get install -y ripgrep) to run the search tests")
	}
}

// workspace is a real temp tree: root is its real path.
type workspace struct {
	t    testing.TB
	root string
	fsys fs.FileSystem
}

func newWorkspace(t testing.TB) *workspace {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return workspaceAt(t, root)
}

// workspaceAt serves an existing real folder through fs.Local.
func workspaceAt(t testing.TB, root string) *workspace {
	fsys, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	return &workspace{t: t, root: root, fsys: fsys}
}

// write creates root/rel with content, and its parents.
func (w *workspace) write(rel, content string) string {
	w.t.Helper()
	p := filepath.Join(w.root, rel)
	require.NoError(w.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(w.t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// age sets the mtime of root/rel to n hours after 2000-01-01: a larger n
// is newer.
func (w *workspace) age(rel string, n int) {
	w.t.Helper()
	when := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Hour)
	require.NoError(w.t, os.Chtimes(filepath.Join(w.root, rel), when, when))
}

// cwd is the session cwd target for root/rel ("" = the root), as the
// caller resolves it.
func (w *workspace) cwd(rel string) fs.Target {
	w.t.Helper()
	if rel == "" {
		rel = "."
	}
	t, err := w.fsys.Resolve(context.Background(), "search", rel, "")
	require.NoError(w.t, err)
	return t
}

func ptr(s string) *string { return &s }

// requireCode asserts err is a *fault.Error with code, and returns it.
func requireCode(t testing.TB, err error, code fault.Code) *fault.Error {
	t.Helper()
	var se *fault.Error
	require.Truef(t, errors.As(err, &se), "want *fault.Error %s, got %T %v", code, err, err)
	require.Equal(t, code, se.Code, se.Message)
	return se
}

// requireGroupGone asserts no live process of the group led by pid is left.
// Zombies do not count: an orphan is reaped by init, which may be slow (or
// absent) in a container.
func requireGroupGone(t testing.TB, pid int) {
	t.Helper()
	require.NotZero(t, pid, "rg was never started")
	require.Eventually(t, func() bool { return len(liveGroupMembers(t, pid)) == 0 },
		5*time.Second, 10*time.Millisecond, "process group %d still has live members", pid)
}

// liveGroupMembers lists the pids in process group pgid that are not zombies.
func liveGroupMembers(t testing.TB, pgid int) []int {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var live []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			live = append(live, p)
		}
	}
	return live
}

// fakeRg writes an executable shell script standing in for rg, for failure
// modes the real binary cannot be made to show (signals, stragglers). Run
// it through newSearcher: the sandbox lets only the real rg start.
func fakeRg(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rg")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}
