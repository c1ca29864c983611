package checkpoint

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	tfs "github.com/toolfs/toolfs-api/internal/fs"
)

// journalThree makes, in session s, one journaled change of three files:
// a.txt replaced, new/d.txt created, c.txt removed.
func journalThree(f *fixture) ([]Journaled, error) {
	f.t.Helper()
	ctx := context.Background()
	ts := []tfs.Target{f.target("a.txt"), f.target("new/d.txt"), f.target("c.txt")}
	lk, err := f.l.LockTargets(ctx, ts)
	require.NoError(f.t, err)
	defer lk.Unlock()
	text := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	aInfo, err := f.l.Stat(ctx, ts[0])
	require.NoError(f.t, err)
	cInfo, err := f.l.Stat(ctx, ts[2])
	require.NoError(f.t, err)
	return f.s.Journal(ctx, "s", "patch", lk, []FileChange{
		{Target: ts[0], Expect: aInfo.Version, Fill: text("a1\n")},
		{Target: ts[1], Fill: text("d\n"), Mode: 0o600},
		{Target: ts[2], Expect: cInfo.Version},
	})
}

// Journal makes a change of several files as one: one seq in the history,
// each file's states, a revert that undoes it whole; a file not at its
// expected version refuses it with nothing changed.
func TestJournal(t *testing.T) {
	f := newFixture(t, Options{}, threeFiles)
	require.NoError(t, os.Chmod(f.path("c.txt"), 0o640))
	done, err := journalThree(f)
	require.NoError(t, err)
	require.Len(t, done, 3)
	assert.Equal(t, map[string]string{"a.txt": "a1\n", "b.txt": "b0\n", "new/d.txt": "d\n"}, f.snapshot())
	st, err := os.Stat(f.path("new/d.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	assert.Nil(t, done[1].Before, "created")
	assert.Nil(t, done[2].After, "removed")
	assert.NotEmpty(t, done[0].Version)
	assert.Equal(t, []string{"1 patch a.txt", "1 patch new/d.txt", "1 patch c.txt"}, seqsOf(f.changes("s")))

	_, err = f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, threeFiles, f.snapshot())
	st, err = os.Stat(f.path("c.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), st.Mode().Perm(), "recreated with its mode")

	// A stale expectation: nothing changes, nothing is recorded.
	ctx := context.Background()
	a := f.target("a.txt")
	lk, err := f.l.LockTargets(ctx, []tfs.Target{a})
	require.NoError(t, err)
	_, err = f.s.Journal(ctx, "s", "patch", lk, []FileChange{{Target: a, Expect: "1:2:3:4:5", Fill: func(w io.Writer) error { return nil }}})
	lk.Unlock()
	requireCode(t, err, fault.CodeStaleVersion, "")
	assert.Equal(t, threeFiles, f.snapshot())
	assert.Len(t, f.changes("s"), 6)
}

// crashedJournal runs journalThree on its own goroutine and stops it dead
// after its journal, or after the i-th file is published.
func crashedJournal(t *testing.T, f *fixture, afterFile int) {
	t.Helper()
	stop := func() { runtime.Goexit() }
	if afterFile < 0 {
		f.s.hooks.journaled = stop
	} else {
		f.s.hooks.published = func(i int) {
			if i == afterFile {
				stop()
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := journalThree(f)
		t.Errorf("the change was not stopped: %v", err)
	}()
	<-done
	f.s.hooks = testHooks{}
}

// A journaled change stopped mid-way is settled whole when the store is
// opened again: rolled back while a file still needs a new content that
// was only staged (stopped at its journal, or after a.txt), completed when
// what is left needs none (after new/d.txt: only c.txt's removal).
func TestInterruptedJournalSettledWhole(t *testing.T) {
	changed := map[string]string{"a.txt": "a1\n", "b.txt": "b0\n", "new/d.txt": "d\n"}
	for _, tc := range []struct {
		after int
		rec   Recovery
		files map[string]string
		seqs  []string
	}{
		{-1, Recovery{RolledBack: 1}, threeFiles, nil},
		{0, Recovery{RolledBack: 1}, threeFiles, nil},
		{1, Recovery{RolledForward: 1}, changed, []string{"1 patch a.txt", "1 patch new/d.txt", "1 patch c.txt"}},
	} {
		f := newFixture(t, Options{}, threeFiles)
		crashedJournal(t, f, tc.after)
		f.reopen()
		assert.Equal(t, tc.rec, f.s.Recovered(), "stopped after file %d", tc.after)
		assert.Equal(t, tc.files, f.snapshot(), "stopped after file %d", tc.after)
		assert.Equal(t, tc.seqs, seqsOf(f.changes("s")), "stopped after file %d", tc.after)
		f.reopen()
		assert.Equal(t, Recovery{}, f.s.Recovered(), "nothing left to settle")
	}
}

// A journal-only store (a server without checkpoints) makes the change of
// several files all or nothing as the history does, in its own folder, and
// keeps nothing once it is done: no history, no log, its kept contents
// collected. Stopped mid-way, it is settled whole when opened again, and
// the settled journal is removed.
func TestJournalOnly(t *testing.T) {
	changed := map[string]string{"a.txt": "a1\n", "b.txt": "b0\n", "new/d.txt": "d\n"}
	logs := func(f *fixture) []string {
		names, _ := filepath.Glob(filepath.Join(f.root, ".toolfs-api", JournalFolderName, "sessions", "*.log"))
		return names
	}
	f := newFixture(t, Options{JournalOnly: true}, threeFiles)
	done, err := journalThree(f)
	require.NoError(t, err)
	require.Len(t, done, 3)
	assert.Equal(t, changed, f.snapshot())
	assert.Empty(t, logs(f), "the done journal is removed")
	assert.NoDirExists(t, filepath.Join(f.root, ".toolfs-api", FolderName), "no history folder")
	require.NoError(t, f.s.collect(context.Background()))
	blobs, err := os.ReadDir(filepath.Join(f.root, ".toolfs-api", JournalFolderName, "blobs"))
	require.NoError(t, err)
	assert.Empty(t, blobs, "the replaced contents are not kept once done")

	for _, tc := range []struct {
		after int
		rec   Recovery
		files map[string]string
	}{
		{-1, Recovery{RolledBack: 1}, threeFiles},
		{0, Recovery{RolledBack: 1}, threeFiles},
		{1, Recovery{RolledForward: 1}, changed},
	} {
		f := newFixture(t, Options{JournalOnly: true}, threeFiles)
		crashedJournal(t, f, tc.after)
		assert.Len(t, logs(f), 1, "the journal stays while the change is in flight")
		f.reopen()
		assert.Equal(t, tc.rec, f.s.Recovered(), "stopped after file %d", tc.after)
		assert.Equal(t, tc.files, f.snapshot(), "stopped after file %d", tc.after)
		assert.Empty(t, logs(f), "stopped after file %d: the settled journal is removed", tc.after)
		f.reopen()
		assert.Equal(t, Recovery{}, f.s.Recovered(), "nothing left to settle")
	}
}
