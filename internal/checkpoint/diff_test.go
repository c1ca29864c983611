package checkpoint

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
)

// A revert's diffs are bounded per file (DiffMaxBytes) and in all
// (DiffBudgetBytes): a file past either, or not text, has no diff in the
// answer, is named there (a note in a dry run, a line after the sentence
// of a revert, diffsOmitted in the metadata), and is restored all the
// same. A smaller diff after one past the budget is still shown, and the
// line counts of the revert's own changes do not depend on the budget.
func TestRevertDiffBounds(t *testing.T) {
	long := strings.Repeat("0123456789abcdef\n", 9) // 153 bytes
	files := map[string]string{"a.txt": "alpha\nbeta\ngamma\n", "c.txt": long, "big.txt": strings.Repeat("x", 5000)}
	f := newFixture(t, Options{DiffMaxBytes: 4096, DiffBudgetBytes: 200}, files)
	f.edit("s", "a.txt", "beta", "BETA")               // 1: a 37-byte diff
	f.write("s", "c.txt", strings.ToUpper(long))       // 2: a diff of about 310 bytes, past what remains
	f.write("s", "big.txt", strings.Repeat("y", 5000)) // 3: a side at DiffMaxBytes or more
	f.write("s", "bin.dat", "\x00\x01")                // 4: not text
	f.write("s", "d.txt", "tiny\n")                    // 5: a 9-byte diff, still within
	before := f.snapshot()

	dry, err := f.revert("s", 0, true)
	require.NoError(t, err)
	assert.Equal(t, "Dry run: no changes were written. Reverting would undo 5 change(s) in 5 file(s): a.txt, c.txt, big.txt, bin.dat, d.txt\n"+
		"--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n alpha\n-BETA\n+beta\n gamma\n"+
		"(The diff of c.txt is not shown: a revert shows at most 200 bytes of diffs in all.)\n"+
		"(The diff of big.txt is not shown: its content before or after is not UTF-8 text, or is 4 KiB or larger.)\n"+
		"(The diff of bin.dat is not shown: its content before or after is not UTF-8 text, or is 4 KiB or larger.)\n"+
		"--- d.txt\n+++ d.txt\n@@ -1,1 +0,0 @@\n-tiny", dry.Output)
	assert.Equal(t, before, f.snapshot(), "a dry run writes nothing")

	res, err := f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "Reverted 5 change(s) in 5 file(s): a.txt, c.txt, big.txt, bin.dat, d.txt\n"+
		"Diffs not shown for 3 file(s) (not UTF-8 text, 4 KiB or larger, or past the 200 bytes of diffs a revert shows in all): c.txt, big.txt, bin.dat", res.Output)
	old, tiny := "alpha\nBETA\ngamma", "tiny"
	want := []Restored{
		{Path: "a.txt", Diffs: []render.Diff{{Path: "a.txt", OldText: &old, NewText: "alpha\nbeta\ngamma"}}},
		{Path: "c.txt", Diffs: []render.Diff{}, DiffsOmitted: true},
		{Path: "big.txt", Diffs: []render.Diff{}, DiffsOmitted: true},
		{Path: "bin.dat", Diffs: []render.Diff{}, DiffsOmitted: true},
		{Path: "d.txt", Diffs: []render.Diff{{Path: "d.txt", OldText: &tiny, NewText: ""}}},
	}
	assert.Equal(t, want, dry.Metadata.Restored)
	assert.Equal(t, want, res.Metadata.Restored)
	assert.Equal(t, files, f.snapshot(), "every byte back, the created files gone")

	cs := f.changes("s")
	require.Equal(t, []string{"6 revert a.txt", "6 revert c.txt", "6 revert big.txt", "6 revert bin.dat", "6 revert d.txt"}, seqsOf(cs[:5]))
	require.NotNil(t, cs[1].Added, "counted although past the budget")
	assert.Equal(t, []int{9, 9}, []int{*cs[1].Added, *cs[1].Removed})
	assert.Nil(t, cs[2].Added, "not read: at DiffMaxBytes or more")
	assert.Nil(t, cs[3].Added, "not text")
}

// A revert of a revert that removed a file shows the file coming back
// whole (an absent side is empty text).
func TestRevertDiffOfARecreatedFile(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.write("s", "n.txt", "one\ntwo\n")
	_, err := f.revert("s", 0, false)
	require.NoError(t, err)
	res, err := f.revert("s", 1, true)
	require.NoError(t, err)
	assert.Equal(t, "Dry run: no changes were written. Reverting would undo 1 change(s) in 1 file(s): n.txt\n--- n.txt\n+++ n.txt\n@@ -0,0 +1,2 @@\n+one\n+two", res.Output)
}
