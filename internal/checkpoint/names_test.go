package checkpoint

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	tfs "github.com/toolfs/toolfs-api/internal/fs"
)

// Names are kept byte for byte (docs/checkpoints.md, "Names that are not
// UTF-8"): two files whose names differ only in a byte that is not UTF-8
// are two records, path_bytes is on disk exactly when the name needs it,
// and after a restart a revert acts on the exact bytes, never on the file
// whose name is the U+FFFD spelling.
func TestNamesKeptByteForByte(t *testing.T) {
	e9, e8, lossy := "caf\xe9/n.txt", "caf\xe8/n.txt", "caf\ufffd/n.txt"
	f := newFixture(t, Options{}, map[string]string{lossy: "agent\n"})
	f.write("s", e9, "agent\n")
	f.write("t", e8, "agent\n")
	f.write("u", "caf\ufffd/own.txt", "u\n") // a name that holds U+FFFD itself
	f.write("v", "plain.txt", "v\n")

	logOf := func(session string) string {
		b, err := os.ReadFile(f.path(tfs.PrivateDir + "/checkpoints/sessions/" + logName(session)))
		require.NoError(t, err)
		return string(b)
	}
	assert.Contains(t, logOf("s"), `"path":"caf\ufffd/n.txt","path_bytes":"Y2Fm6S9uLnR4dA==",`)
	assert.Contains(t, logOf("u"), `"path":"caf`+"\ufffd"+`/own.txt","path_bytes":"Y2Fm77+9L293bi50eHQ=",`)
	assert.NotContains(t, logOf("v"), "path_bytes", "a UTF-8 name's lines are as they were")

	f.reopen()
	for session, want := range map[string]string{"s": e9, "t": e8, "u": "caf\ufffd/own.txt"} {
		cs := f.changes(session)
		require.Len(t, cs, 1)
		assert.Equal(t, want, cs[0].Path, session)
		assert.Equal(t, []byte(want), cs[0].PathBytes, session)
		assert.True(t, cs[0].Revertible, session)
	}
	assert.Nil(t, f.changes("v")[0].PathBytes)

	res, err := f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, []byte(e9), res.Metadata.Restored[0].PathBytes)
	assert.NoFileExists(t, f.path(e9))
	assert.Equal(t, "agent\n", f.read(e8), "the other file stays")
	assert.Equal(t, "agent\n", f.read(lossy), "the file of the U+FFFD spelling stays")
	_, err = f.revert("u", 0, false)
	require.NoError(t, err)
	assert.NoFileExists(t, f.path("caf\ufffd/own.txt"))
}

// legacyLog is a log as the server wrote it before names were kept byte
// for byte: a name that was not UTF-8 is on disk with U+FFFD.
const legacyLog = `{"t":"session","session":"old","id":"legacy"}
{"t":"change","seq":1,"time":"2026-01-02T03:04:05.000000000Z","tool":"write","path":"caf\ufffd/n.txt","after":{"version":"v1","sha256":"AGENT"},"done":true}
{"t":"change","seq":2,"time":"2026-01-02T03:04:06.000000000Z","tool":"write","path":"plain.txt","after":{"version":"v2","sha256":"SUM"},"done":true}
`

// Logs written before path_bytes load: a record whose path holds U+FFFD
// may name another file than the one changed, so it is listed, not
// revertible, with its reason, and a revert over it restores nothing; the
// others revert as before. Compaction keeps that mark.
func TestLegacyLossyRecordsLoad(t *testing.T) {
	f := newFixture(t, Options{}, map[string]string{"caf\ufffd/n.txt": "agent\n"})
	f.write("new", "x.txt", "x") // makes the store's folders
	require.NoError(t, os.WriteFile(f.path("plain.txt"), []byte("plain\n"), 0o644))
	log := strings.NewReplacer("AGENT", sha("agent\n"), "SUM", sha("plain\n")).Replace(legacyLog)
	require.NoError(t, os.WriteFile(f.path(tfs.PrivateDir+"/checkpoints/sessions/"+logName("old")), []byte(log), 0o600))
	f.reopen()

	cs := f.changes("old")
	require.Len(t, cs, 2)
	assert.Equal(t, []string{"2 write plain.txt", "1 write caf\ufffd/n.txt"}, seqsOf(cs))
	assert.True(t, cs[0].Revertible)
	assert.False(t, cs[1].Revertible)
	assert.Equal(t, whyLossyName, cs[1].Reason)
	assert.Nil(t, cs[1].PathBytes, "its exact bytes are not known")

	_, err := f.revert("old", 0, false)
	requireCode(t, err, fault.CodeNotRevertible, "cannot revert change 1 (caf\ufffd/n.txt): "+whyLossyName)
	assert.Equal(t, "agent\n", f.read("caf\ufffd/n.txt"))
	_, err = f.revert("old", 1, false)
	require.NoError(t, err)
	assert.NoFileExists(t, f.path("plain.txt"), "the UTF-8 record reverts")

	h := newHistory("")
	h.feed([]byte(log))
	buf, err := marshalLines(h.entries())
	require.NoError(t, err)
	assert.NotContains(t, string(buf), "path_bytes", "a compacted log keeps the lossy record as it was")
	again := newHistory("")
	again.feed(buf)
	require.Len(t, again.changes, 2)
	assert.True(t, again.changes[0].lossy)
	assert.False(t, again.changes[0].revertible())
}
