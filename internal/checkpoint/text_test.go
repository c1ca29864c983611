package checkpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The model texts of a revert, byte for byte (docs/checkpoints.md).
func TestRevertTexts(t *testing.T) {
	assert.Equal(t, "Reverted 0 change(s) in 0 file(s).", RevertedOutput(0, nil))
	assert.Equal(t, "Reverted 1 change(s) in 1 file(s): a.txt", RevertedOutput(1, []string{"a.txt"}))
	assert.Equal(t, "Reverted 5 change(s) in 2 file(s): src/a.go, b c.txt", RevertedOutput(5, []string{"src/a.go", "b c.txt"}))
	assert.Equal(t, "Dry run: no changes were written. Reverting would undo 0 change(s) in 0 file(s).", DryRunOutput(0, nil, nil))
	assert.Equal(t, "Dry run: no changes were written. Reverting would undo 2 change(s) in 1 file(s): a.txt\n--- a.txt\n+++ a.txt",
		DryRunOutput(2, []string{"a.txt"}, []string{"--- a.txt\n+++ a.txt"}))
	assert.Equal(t, "(The diff of big.log is not shown: its content before or after is not UTF-8 text, or is 256 KiB or larger.)", msgNoDiff("big.log", DefaultDiffMaxBytes))
	assert.Equal(t, "(The diff of b c.txt is not shown: a revert shows at most 1 MiB of diffs in all.)", msgOverBudget("b c.txt", DefaultDiffBudgetBytes))
	assert.Equal(t, "Diffs not shown for 2 file(s) (not UTF-8 text, 256 KiB or larger, or past the 1 MiB of diffs a revert shows in all): big.log, b c.txt",
		msgDiffsNotShown([]string{"big.log", "b c.txt"}, DefaultDiffMaxBytes, DefaultDiffBudgetBytes))
	assert.Equal(t, []string{"1 MiB", "64 KiB", "1000 bytes", "1536 KiB"}, []string{sizeText(1 << 20), sizeText(64 << 10), sizeText(1000), sizeText(3 << 19)})
	assert.Equal(t, "cannot revert: these files changed since this session's last change to them: a.txt, b.txt", StaleMessage([]string{"a.txt", "b.txt"}))
	c := &change{seq: 7, path: "x.bin", why: whyUnreadable}
	assert.Equal(t, "cannot revert change 7 (x.bin): the content it replaced could not be read, so it was not kept", notRevertible(c).Message)
	assert.Equal(t, "cannot revert change 7 (x.bin): the content it replaced is damaged or missing in the checkpoint store", damaged(c, nil).Message)
}
