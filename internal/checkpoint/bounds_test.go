package checkpoint

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	tfs "github.com/toolfs/toolfs-api/internal/fs"
)

// A change that replaced a file larger than MaxFileBytes is recorded as not
// revertible (its content is hashed, not kept), and a revert that would
// pass it is refused as a whole, naming it; one that stops after it works.
func TestLargeFileNotRevertible(t *testing.T) {
	big := "head\n" + strings.Repeat("0123456789abcdef\n", 2048) // 34,821 bytes
	f := newFixture(t, Options{Bytes: 1 << 20, MaxFileBytes: 32 << 10}, map[string]string{"big.txt": big, "a.txt": "a\n"})
	f.edit("s", "a.txt", "a", "A")         // 1
	f.edit("s", "big.txt", "head", "HEAD") // 2: not revertible
	f.edit("s", "a.txt", "A", "AA")        // 3
	before := f.snapshot()

	cs := f.changes("s")
	assert.False(t, cs[1].Revertible)
	assert.Equal(t, "the content it replaced (34821 bytes) is larger than --checkpoint-max-file-bytes (32768 bytes), so it was not kept", cs[1].Reason)
	assert.Equal(t, sha(big), cs[1].Before.SHA256)
	assert.True(t, cs[0].Revertible)

	_, err := f.revert("s", 0, false)
	e := requireCode(t, err, fault.CodeNotRevertible,
		"cannot revert change 2 (big.txt): the content it replaced (34821 bytes) is larger than --checkpoint-max-file-bytes (32768 bytes), so it was not kept")
	assert.Equal(t, int64(2), e.Seq)
	assert.Equal(t, "big.txt", e.Path)
	assert.Equal(t, before, f.snapshot(), "nothing restored, a.txt included")
	_, err = f.revert("s", 1, true)
	requireCode(t, err, fault.CodeNotRevertible, "")

	_, err = f.revert("s", 2, false)
	require.NoError(t, err)
	assert.Equal(t, "A\n", f.read("a.txt"))

	// Reverting a revert of a large file: its content before is not kept.
	res, err := f.revert("s", 0, false)
	require.Error(t, err, "still passes change 2")
	assert.Nil(t, res)
}

// The kept contents stay within Bytes: the oldest changes lose theirs
// first (they stay listed, not revertible), the newest keep theirs.
func TestBytesBound(t *testing.T) {
	const size = 8 << 10
	f := newFixture(t, Options{Bytes: 64 << 10, MaxFileBytes: 16 << 10}, nil)
	for i := range 20 {
		content := "head\n" + strings.Repeat(fmt.Sprintf("%02d", i), size/2)
		f.put(fmt.Sprintf("f%02d.txt", i), content)
		f.edit("s", fmt.Sprintf("f%02d.txt", i), "head", "HEAD")
		// The change that crosses the bound keeps its content; the next one
		// waits for the collection (docs/checkpoints.md, "Bounds"), which
		// may still be running in the background now.
		_, total := f.blobs()
		assert.LessOrEqual(t, total, int64(64<<10+len(content)), "after change %d", i+1)
	}
	require.NoError(t, f.s.collect(context.Background()))
	cs := f.changes("s")
	require.Len(t, cs, 20)
	var revertible []int64
	for _, c := range cs {
		if c.Revertible {
			revertible = append(revertible, c.Seq)
		} else {
			assert.Equal(t, "the content it replaced was dropped to keep the checkpoints within --checkpoint-bytes", c.Reason)
		}
	}
	require.NotEmpty(t, revertible)
	assert.Equal(t, int64(20), revertible[0], "the newest kept")
	assert.Equal(t, int64(len(revertible)), revertible[0]-revertible[len(revertible)-1]+1, "the oldest dropped first: the kept ones are the newest, contiguous")
	assert.LessOrEqual(t, len(revertible), 8)
	_, total := f.blobs()
	assert.LessOrEqual(t, total, int64(48<<10), "a collection brings them to 3/4 of the bound")

	oldest := revertible[len(revertible)-1]
	_, err := f.revert("s", oldest-2, false)
	requireCode(t, err, fault.CodeNotRevertible, fmt.Sprintf("cannot revert change %d (f%02d.txt): the content it replaced was dropped to keep the checkpoints within --checkpoint-bytes", oldest-1, oldest-2))
	_, err = f.revert("s", oldest-1, false)
	require.NoError(t, err)
	assert.Equal(t, "head\n"+strings.Repeat("19", size/2), f.read("f19.txt"))
}

// The changes stay within MaxChanges across sessions: the oldest are
// dropped (and a revert to before them is refused), whole logs with them.
func TestChangesBound(t *testing.T) {
	f := newFixture(t, Options{MaxChanges: 16}, map[string]string{"a.txt": "0"})
	for i := range 10 {
		f.write("old", fmt.Sprintf("old%d.txt", i), "x")
	}
	for i := range 30 {
		f.write("s", "a.txt", fmt.Sprint(i+1))
	}
	require.NoError(t, f.s.collect(context.Background()))
	assert.Empty(t, f.changes("old"), "the oldest session's changes went first")
	cs := f.changes("s")
	assert.LessOrEqual(t, len(cs), 12)
	assert.Equal(t, int64(30), cs[0].Seq)
	floor := cs[len(cs)-1].Seq - 1
	_, err := f.revert("s", 0, false)
	requireCode(t, err, fault.CodeNotRevertible, fmt.Sprintf("cannot revert to change 0: the changes up to %d are no longer kept", floor))
	_, err = f.revert("s", floor, false)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(floor), f.read("a.txt"))
	f.reopen()
	assert.Equal(t, int64(31), f.changes("s")[0].Seq, "the floor survives the compaction")
}

// Two stores on one root (two server processes) share the histories: a
// session's changes made through either are reverted through the other,
// and the seqs never collide.
func TestTwoStoresOneRoot(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	other, err := tfs.NewLocal(f.root, tfs.LocalOptions{SweepInterval: -1})
	require.NoError(t, err)
	defer other.Close()
	s2, err := Open(context.Background(), Options{FS: other})
	require.NoError(t, err)
	defer s2.Close()

	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			tg, err := f.l.Resolve(context.Background(), "write", "a.txt", "")
			require.NoError(t, err)
			_, err = f.l.WriteText(context.Background(), tg, fmt.Sprintf("a%d\n", i), &tfs.WriteIntent{Keeper: f.s.Recording("s", "write")})
			assert.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			tg, err := other.Resolve(context.Background(), "write", "b.txt", "")
			require.NoError(t, err)
			_, err = other.WriteText(context.Background(), tg, fmt.Sprintf("b%d\n", i), &tfs.WriteIntent{Keeper: s2.Recording("s", "write")})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	cs, err := s2.Changes(context.Background(), "s")
	require.NoError(t, err)
	require.Len(t, cs, 20)
	seen := map[int64]bool{}
	for _, c := range cs {
		assert.False(t, seen[c.Seq], "seq %d twice", c.Seq)
		seen[c.Seq] = true
	}
	res, err := s2.Revert(context.Background(), "s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "Reverted 20 change(s) in 2 file(s): ", res.Output[:len("Reverted 20 change(s) in 2 file(s): ")])
	assert.Equal(t, "a\n", f.read("a.txt"))
	assert.Equal(t, "b\n", f.read("b.txt"))
	assert.Len(t, f.changes("s"), 22)
}

// A revert while the same session writes other files never deadlocks and
// never loses a change: each write lands before or after it.
func TestRevertBesideWrites(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "a\n"})
	f.write("s", "a.txt", "A\n")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			f.write("s", fmt.Sprintf("w%d.txt", i), "w")
		}
	}()
	for range 5 {
		_, err := f.revert("s", 0, false)
		if err != nil {
			requireCode(t, err, fault.CodeStaleVersion, "") // a revert of a revert of the same files may meet its own
		}
	}
	wg.Wait()
	_, err := f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a.txt": "a\n"}, f.snapshot())
}

// A store's cached history is never trusted for a log another store
// replaced, even in a reused inode: it forgets the session and starts a
// longer history, and the first store lists that one.
func TestCachedHistoryOfAReplacedLog(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"a.txt": "a\n"})
	f.write("s", "a.txt", "one\n")
	require.Len(t, f.changes("s"), 1) // cached in f.s
	other, err := tfs.NewLocal(f.root, tfs.LocalOptions{SweepInterval: -1})
	require.NoError(t, err)
	defer other.Close()
	s2, err := Open(context.Background(), Options{FS: other})
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, s2.Forget(context.Background(), "s"))
	for i := range 3 {
		tg, err := other.Resolve(context.Background(), "write", "b.txt", "")
		require.NoError(t, err)
		_, err = other.WriteText(context.Background(), tg, fmt.Sprint(i), &tfs.WriteIntent{Keeper: s2.Recording("s", "write")})
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"3 write b.txt", "2 write b.txt", "1 write b.txt"}, seqsOf(f.changes("s")))
}
