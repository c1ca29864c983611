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
