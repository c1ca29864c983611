package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tfs "github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/journal"
)

// TestReplayPutsBackOnlyWhatIsMissing: a journaled write's entry holds
// its kept content and its lines; replayed after a crash took them (the
// log cut back, the blob removed), it puts them back, synced, so the
// change is listed and reverts; replayed again, or over a history
// forgotten since, it brings back no line (docs/journal.md, "Crashes").
func TestReplayPutsBackOnlyWhatIsMissing(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "one\n"})
	f.write("s", "a.txt", "two\n") // makes the log, synced
	logs, _ := filepath.Glob(filepath.Join(f.root, ".toolfs-api", "checkpoints", "sessions", "*.log"))
	require.Len(t, logs, 1)
	fi, err := os.Stat(logs[0])
	require.NoError(t, err)
	blobsBefore, _ := f.blobs()

	rec := f.s.Recording("s", "write")
	var e journal.Entry
	rec.JournalTo(&e, nil)
	_, err = f.l.WriteText(context.Background(), f.target("a.txt"), "three\n", &tfs.WriteIntent{Keeper: rec})
	require.NoError(t, err)
	recs := e.Records()
	kinds := ""
	for _, r := range recs {
		kinds += string(r.Kind)
	}
	assert.Equal(t, "BLL", kinds, "the kept content, the change line, the outcome line")

	require.NoError(t, f.s.Sealer()()(), "the seal writes the held content to blobs/")
	f.opts.Replay = recs
	f.reopen()
	assert.Equal(t, Replayed{}, f.s.Replayed(), "nothing was lost")

	// What a power loss could take.
	f.close()
	require.NoError(t, os.Truncate(logs[0], fi.Size()))
	blobsNow, _ := f.blobs()
	for _, b := range blobsNow {
		if !contains(blobsBefore, b) {
			require.NoError(t, os.Remove(filepath.Join(f.root, ".toolfs-api", "checkpoints", "blobs", b)))
		}
	}
	f.open()
	assert.Equal(t, Replayed{Blobs: 1, Lines: 2}, f.s.Replayed())
	assert.Equal(t, []string{"2 write a.txt", "1 write a.txt"}, seqsOf(f.changes("s")))
	_, err = f.revert("s", 1, false)
	require.NoError(t, err)
	assert.Equal(t, "two\n", f.read("a.txt"))

	f.reopen()
	assert.Equal(t, Replayed{}, f.s.Replayed(), "replayed twice: nothing more")
	require.NoError(t, f.s.Forget(context.Background(), "s"))
	f.reopen()
	assert.Zero(t, f.s.Replayed().Lines, "a forgotten history is not brought back")
	assert.Empty(t, f.changes("s"))
	// Its content, put back unreferenced, goes with the start-up's collection.
	kept, _ := f.blobs()
	assert.Empty(t, kept)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// journaledWrite is a write recorded into a journal entry, as the executor
// makes it with the journal on.
func (f *fixture) journaledWrite(session, rel, content string) *journal.Entry {
	f.t.Helper()
	rec := f.s.Recording(session, "write")
	e := new(journal.Entry)
	rec.JournalTo(e, nil)
	_, err := f.l.WriteText(context.Background(), f.target(rel), content, &tfs.WriteIntent{Keeper: rec})
	require.NoError(f.t, err)
	return e
}

// TestHeldContentUntilTheSeal: a journaled change's kept content is in its
// entry and in memory only, no file written for it, until the journal's
// seal writes it to blobs/; a revert before the seal reads it from memory
// (docs/journal.md, "What a change pays").
func TestHeldContentUntilTheSeal(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "one\n"})
	f.write("s", "a.txt", "two\n") // kept in blobs/, synced: no journal
	before, _ := f.blobs()
	require.Len(t, before, 1)

	f.journaledWrite("s", "a.txt", "three\n")
	now, _ := f.blobs()
	assert.Equal(t, before, now, "no file for the held content")
	cs := f.changes("s")
	require.Len(t, cs, 2)
	assert.True(t, cs[0].Revertible)
	res, err := f.revert("s", 1, true)
	require.NoError(t, err)
	assert.Contains(t, res.Output, "-three\n+two", "the dry run's diff, read from memory")

	require.NoError(t, f.s.Sealer()()())
	now, _ = f.blobs()
	assert.Len(t, now, 2, "the seal wrote it")
	assert.Zero(t, f.s.held.bytes)
	_, err = f.revert("s", 1, false)
	require.NoError(t, err)
	assert.Equal(t, "two\n", f.read("a.txt"))
}

// TestHeldContentOfAReplica: a content another process holds until its
// seal is read from that process's journal segment, so a replica reverts
// a change made on another one at once (docs/journal.md, "Replicas").
func TestHeldContentOfAReplica(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "one\n"})
	wal := filepath.Join(f.root, tfs.PrivateDir, "wal")
	require.NoError(t, os.MkdirAll(wal, 0o700))
	dir, err := os.Open(wal)
	require.NoError(t, err)
	defer dir.Close()
	j, _, err := journal.Open(fileFolder{dir}, journal.Options{})
	require.NoError(t, err)
	defer j.Close()

	res, err := j.Reserve()
	require.NoError(t, err)
	e := f.journaledWrite("s", "a.txt", "two\n")
	require.NoError(t, res.Commit(e))

	// The replica: another store on the root, which never held it.
	f.close()
	f.open()
	kept, _ := f.blobs()
	assert.Empty(t, kept)
	_, err = f.revert("s", 0, true)
	require.Error(t, err, "without the segments: not found")
	assert.Contains(t, err.Error(), "damaged or missing")

	f.close()
	f.opts.Segments = j
	f.open()
	_, err = f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "one\n", f.read("a.txt"))
}

// fileFolder is an *os.File as a journal.Folder.
type fileFolder struct{ *os.File }

func (f fileFolder) Fd() int { return int(f.File.Fd()) }

// TestHeldContentsBounded: past HeldBytes held, a kept content is written
// to blobs/ at once (without a sync), so the memory the journal's
// contents take stays bounded.
func TestHeldContentsBounded(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "one\n"})
	f.s.held.bytes = HeldBytes - 3 // as if held contents filled it
	f.journaledWrite("s", "a.txt", "two\n")
	kept, _ := f.blobs()
	assert.Len(t, kept, 1, "written at once")
	assert.Equal(t, int64(HeldBytes-3), f.s.held.bytes)

	f.s.held.bytes = 0
	f.journaledWrite("s", "a.txt", "three\n")
	kept, _ = f.blobs()
	assert.Len(t, kept, 1, "held")
	assert.Equal(t, int64(len("two\n")), f.s.held.bytes)
}
