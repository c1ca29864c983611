package checkpoint

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	tfs "github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The files of the revert tests: a plain file, CRLF, no final newline, a
// BOM, and another session's file.
var originals = map[string]string{
	"a.txt":         "alpha\nbeta\ngamma\n",
	"win/crlf.txt":  "one\r\ntwo\r\nthree\r\n",
	"nonl.txt":      "no final newline",
	"bom.md":        "\uFEFF# Title\nbody\n",
	"batch.go":      "package x\n\nfunc A() {}\nfunc B() {}\n",
	"someone/b.txt": "other session\n",
}

// agentChanges is what session "s" does to the originals: edits, a create
// then an edit of it, a write over a file without a final newline, a CRLF
// edit (its LF needle adapted), a batch edit; session "other" changes
// another file. It returns the seq of each of s's changes in order.
func agentChanges(f *fixture) {
	f.edit("s", "a.txt", "beta", "BETA")                    // 1
	f.write("s", "new/created.txt", "fresh\nfile\n")        // 2
	f.edit("s", "win/crlf.txt", "one\ntwo", "uno\ndos")     // 3
	f.write("s", "nonl.txt", "rewritten, still no newline") // 4
	f.edit("s", "a.txt", "gamma\n", "gamma\ndelta")         // 5
	f.edit("s", "batch.go", "A()", "AA()", "B()", "BB()")   // 6
	f.edit("s", "new/created.txt", "file", "file, edited")  // 7
	f.edit("s", "bom.md", "body", "BODY")                   // 8
	f.edit("other", "someone/b.txt", "other", "OTHER")      // other's 1
}

// A revert of every change over several files restores every byte: edits,
// a create (removed), a batch edit, CRLF, no final newline, a BOM; another
// session's change stays.
func TestRevertRestoresEveryByte(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	agentChanges(f)
	assert.Equal(t, "uno\r\ndos\r\nthree\r\n", f.read("win/crlf.txt"), "the CRLF edit applied")

	res, err := f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "Reverted 8 change(s) in 6 file(s): a.txt, new/created.txt, win/crlf.txt, nonl.txt, batch.go, bom.md", res.Output)
	want := map[string]string{}
	for k, v := range originals {
		want[k] = v
	}
	want["someone/b.txt"] = "OTHER session\n"
	assert.Equal(t, want, f.snapshot(), "every byte back, the created file gone, the other session's change kept")
	assert.NoFileExists(t, f.path("new/created.txt"))
	assert.DirExists(t, f.path("new"), "folders a write made stay")

	require.Len(t, res.Metadata.Restored, 6)
	assert.Equal(t, "a.txt", res.Metadata.Restored[0].Path)
	old, nw := "alpha\nBETA\ngamma\ndelta", "alpha\nbeta\ngamma"
	assert.Equal(t, []render.Diff{{Path: "a.txt", OldText: &old, NewText: nw}}, res.Metadata.Restored[0].Diffs)
	removed := "fresh\nfile, edited"
	assert.Equal(t, []render.Diff{{Path: "new/created.txt", OldText: &removed, NewText: ""}}, res.Metadata.Restored[1].Diffs)
	assert.Len(t, res.Files, 6)
	assert.Equal(t, tfs.Version(""), res.Files[1].Version, "removed")
	assert.NotEmpty(t, res.Files[0].Version)

	// The revert is in the history as changes of its own, newest first.
	cs := f.changes("s")
	require.Len(t, cs, 14)
	assert.Equal(t, []string{"9 revert a.txt", "9 revert new/created.txt", "9 revert win/crlf.txt", "9 revert nonl.txt", "9 revert batch.go", "9 revert bom.md",
		"8 edit bom.md", "7 edit new/created.txt", "6 edit batch.go", "5 edit a.txt", "4 write nonl.txt", "3 edit win/crlf.txt", "2 write new/created.txt", "1 edit a.txt"}, seqsOf(cs))
	for _, c := range cs {
		assert.True(t, c.Revertible, c.Path)
	}
	assert.Nil(t, cs[1].After, "the revert removed it")
	assert.Nil(t, cs[12].Before, "the write created it")
	assert.Equal(t, &Before{Version: cs[13].Before.Version, SHA256: sha("alpha\nbeta\ngamma\n"), Bytes: 17}, cs[13].Before)
	assert.Equal(t, sha("alpha\nBETA\ngamma\n"), cs[13].After.SHA256)
	assert.Equal(t, 1, *cs[13].Added)
	assert.Equal(t, 1, *cs[13].Removed)
	assert.Equal(t, 2, *cs[12].Added, "a create adds its lines")
	assert.Equal(t, 0, *cs[12].Removed)
	assert.Equal(t, 2, *cs[0].Removed, "the revert of a.txt: BETA and gamma/delta")
	assert.Equal(t, []string{"1 edit someone/b.txt"}, seqsOf(f.changes("other")))
}

// A revert to a seq undoes only the changes after it.
func TestRevertToASeq(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	agentChanges(f)
	res, err := f.revert("s", 4, false)
	require.NoError(t, err)
	assert.Equal(t, "Reverted 4 change(s) in 4 file(s): a.txt, batch.go, new/created.txt, bom.md", res.Output)
	assert.Equal(t, "alpha\nBETA\ngamma\n", f.read("a.txt"), "change 1 stays")
	assert.Equal(t, "fresh\nfile\n", f.read("new/created.txt"), "back to change 2")
	assert.Equal(t, "rewritten, still no newline", f.read("nonl.txt"), "change 4 stays")
	assert.Equal(t, originals["batch.go"], f.read("batch.go"))

	res, err = f.revert("s", 9, false)
	require.NoError(t, err)
	assert.Equal(t, "Reverted 0 change(s) in 0 file(s).", res.Output, "nothing after the revert itself")
}

// A person's edit of one file made after the agent's changes refuses the
// whole revert, naming that file, and nothing anywhere changes, history
// included; a person's edit between two of the session's changes of a file
// refuses reverting past it.
func TestRevertRefusesChangedFiles(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	agentChanges(f)
	f.put("nonl.txt", "a person's edit")
	f.put("bom.md", "\uFEFF# Title\nBODY\n\n") // one byte more
	before, history := f.snapshot(), f.changes("s")
	blobs, _ := f.blobs()

	_, err := f.revert("s", 0, false)
	e := requireCode(t, err, fault.CodeStaleVersion,
		"cannot revert: these files changed since this session's last change to them: nonl.txt, bom.md")
	assert.Equal(t, []string{"nonl.txt", "bom.md"}, e.Paths)
	assert.Equal(t, before, f.snapshot(), "nothing restored anywhere")
	assert.Equal(t, history, f.changes("s"), "nothing recorded")
	_, err = f.revert("s", 0, true)
	requireCode(t, err, fault.CodeStaleVersion, "")

	// Between two changes: a.txt was changed by 1 and 5; a person edits it
	// between, as far as the history can tell (5's before is not 1's after).
	f2 := newFixture(t, Options{}, originals)
	f2.edit("s", "a.txt", "beta", "BETA")
	f2.put("a.txt", "alpha\nBETA\ngamma\nperson\n")
	f2.edit("s", "a.txt", "person", "agent")
	_, err = f2.revert("s", 0, false)
	requireCode(t, err, fault.CodeStaleVersion, "cannot revert: these files changed since this session's last change to them: a.txt")
	assert.Equal(t, "alpha\nBETA\ngamma\nagent\n", f2.read("a.txt"))
	_, err = f2.revert("s", 1, false)
	require.NoError(t, err, "the last change alone is still revertible")
	assert.Equal(t, "alpha\nBETA\ngamma\nperson\n", f2.read("a.txt"), "the person's edit is back, not clobbered")
	after, _ := f.blobs()
	assert.Subset(t, after, blobs)
}

// A file whose version changed but whose bytes did not (a touch, a chmod)
// is not stale.
func TestRevertAfterTouch(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	f.edit("s", "a.txt", "beta", "BETA")
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(f.path("a.txt"), later, later))
	require.NoError(t, os.Chmod(f.path("a.txt"), 0o600))
	_, err := f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, originals["a.txt"], f.read("a.txt"))
	fi, err := os.Stat(f.path("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file keeps its mode")
}

// A revert can be reverted: reverting to just before it brings the agent's
// changes back, byte for byte, and that too is recorded.
func TestRevertOfARevert(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	agentChanges(f)
	agent := f.snapshot()
	res, err := f.revert("s", 0, false)
	require.NoError(t, err)
	require.Equal(t, int64(9), res.Seq)

	res, err = f.revert("s", 8, false)
	require.NoError(t, err)
	assert.Equal(t, "Reverted 6 change(s) in 6 file(s): a.txt, new/created.txt, win/crlf.txt, nonl.txt, batch.go, bom.md", res.Output)
	assert.Equal(t, agent, f.snapshot())
	assert.Equal(t, int64(10), res.Seq)

	// And all the way back again, through both reverts.
	_, err = f.revert("s", 0, false)
	require.NoError(t, err)
	want := map[string]string{}
	for k, v := range originals {
		want[k] = v
	}
	want["someone/b.txt"] = "OTHER session\n"
	assert.Equal(t, want, f.snapshot())
}

// A dry run does every check, shows the diff, and writes nothing.
func TestRevertDryRun(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	f.edit("s", "a.txt", "beta", "BETA")
	f.write("s", "n.txt", "new\n")
	before, history := f.snapshot(), f.changes("s")
	blobs, _ := f.blobs()

	res, err := f.revert("s", 0, true)
	require.NoError(t, err)
	assert.Equal(t, "Dry run: no changes were written. Reverting would undo 2 change(s) in 2 file(s): a.txt, n.txt\n"+
		"--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n alpha\n-BETA\n+beta\n gamma\n"+
		"--- n.txt\n+++ n.txt\n@@ -1,1 +0,0 @@\n-new", res.Output)
	assert.Len(t, res.Metadata.Restored, 2)
	assert.Zero(t, res.Seq)
	assert.Equal(t, before, f.snapshot())
	assert.Equal(t, history, f.changes("s"))
	after, _ := f.blobs()
	assert.Equal(t, blobs, after, "a dry run keeps nothing")
}

// The history lives under the root: a store opened again (a restart)
// lists it, reverts it, and numbers new changes after it.
func TestHistorySurvivesRestart(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	agentChanges(f)
	listed := f.changes("s")
	f.reopen()
	assert.Equal(t, listed, f.changes("s"))
	f.edit("s", "a.txt", "alpha", "ALPHA")
	assert.Equal(t, int64(9), f.changes("s")[0].Seq)
	f.reopen()
	_, err := f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, originals["a.txt"], f.read("a.txt"))
	assert.Equal(t, int64(10), f.changes("s")[0].Seq)
}

// Forget drops a session's history; its kept contents go with the next
// collection, another session's stay.
func TestForget(t *testing.T) {
	f := newFixture(t, Options{}, originals)
	agentChanges(f)
	require.NoError(t, f.s.Forget(context.Background(), "s"))
	assert.Empty(t, f.changes("s"))
	res, err := f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "Reverted 0 change(s) in 0 file(s).", res.Output)
	require.NoError(t, f.s.collect(context.Background()))
	names, _ := f.blobs()
	assert.Equal(t, []string{sha("other session\n")}, names, "only the other session's kept content is left")
	require.NoError(t, f.s.Forget(context.Background(), "never-seen"))
	f.edit("s", "a.txt", "alpha", "A")
	assert.Equal(t, int64(1), f.changes("s")[0].Seq, "a new history starts at 1")
}

// Histories unused for longer than the TTL are forgotten; Touch keeps one.
func TestTTL(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	f := newFixture(t, Options{TTL: time.Hour, Now: func() time.Time { return clock() }}, originals)
	f.edit("idle", "a.txt", "alpha", "A")
	f.edit("busy", "nonl.txt", "no", "NO")
	clock = func() time.Time { return now.Add(2 * time.Hour) }
	f.s.Touch("busy")
	require.NoError(t, f.s.collect(context.Background()))
	assert.Empty(t, f.changes("idle"))
	assert.Len(t, f.changes("busy"), 1)
}

func sha(s string) string {
	h, _, _ := hashOnly(context.Background(), strings.NewReader(s))
	return h
}

// Each kept content is stored once: two changes that replaced the same
// bytes share a blob, in a folder only the server can read.
func TestKeptContentsDeduplicated(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "same\n", "b.txt": "same\n"})
	f.write("s", "a.txt", "A\n")
	f.write("t", "b.txt", "B\n")
	names, total := f.blobs()
	assert.Equal(t, []string{sha("same\n")}, names)
	assert.Equal(t, int64(5), total)
	fi, err := os.Stat(f.path(tfs.PrivateDir + "/checkpoints/blobs/" + names[0]))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// A kept content whose bytes changed on disk is never put back: the revert
// is refused, naming the change, and nothing is written.
func TestDamagedKeptContent(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	f.write("s", "b.txt", "B\n")
	f.write("s", "a.txt", "A\n")
	require.NoError(t, os.WriteFile(f.path(tfs.PrivateDir+"/checkpoints/blobs/"+sha("a\n")), []byte("x\n"), 0o600))
	before := f.snapshot()
	_, err := f.revert("s", 0, false)
	requireCode(t, err, fault.CodeNotRevertible, "cannot revert change 2 (a.txt): the content it replaced is damaged or missing in the checkpoint store")
	assert.Equal(t, before, f.snapshot())
}

// A file reached now through a folder swapped for a link (to a copy of it)
// is not the file the session changed: the revert is refused, naming it,
// and neither file is written.
func TestRevertThroughASwappedFolder(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"d/a.txt": "a\n"})
	f.write("s", "d/a.txt", "A\n")
	require.NoError(t, os.Rename(f.path("d"), f.path("d2")))
	require.NoError(t, os.Symlink("d2", f.path("d")))
	_, err := f.revert("s", 0, false)
	requireCode(t, err, fault.CodeStaleVersion, "cannot revert: these files changed since this session's last change to them: d/a.txt")
	assert.Equal(t, "A\n", f.read("d2/a.txt"))
}

// A busy session in a root the store has not written yet costs nothing per
// request: Touch used to try to open the missing private folder every time.
func TestTouchBeforeAnyChangeIsFree(t *testing.T) {
	f := newFixture(t, Options{TTL: time.Hour}, originals)
	f.s.Touch("s")
	allocs := testing.AllocsPerRun(100, func() { f.s.Touch("s") })
	assert.Zero(t, allocs)
}
