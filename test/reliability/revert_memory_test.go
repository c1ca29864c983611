package reliability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// revertFiles and revertFileBytes are the case (issue 41, item 2):
// 20 files of 9 MiB, each just under the 10 MiB a revert used to diff.
const (
	revertFiles     = 20
	revertFileBytes = 9 << 20
)

// textOf9MiB is revertFileBytes of text in 64-byte lines, different for
// each seed, so no two files share a kept content.
func textOf9MiB(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 41))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
	var b strings.Builder
	b.Grow(revertFileBytes)
	line := make([]byte, 64)
	for b.Len() < revertFileBytes {
		for i := range 63 {
			line[i] = alphabet[rng.IntN(len(alphabet))]
		}
		line[63] = '\n'
		b.Write(line)
	}
	return b.String()
}

// revertAnswer is POST /sessions/{id}/revert's 200 body.
type revertAnswer struct {
	Output   string `json:"output"`
	Metadata struct {
		Restored []struct {
			Path         string            `json:"path"`
			Diffs        []json.RawMessage `json:"diffs"`
			DiffsOmitted bool              `json:"diffsOmitted"`
		} `json:"restored"`
	} `json:"metadata"`
}

// postRevert reverts session to seq to, and returns the answer and its
// size in bytes.
func postRevert(t *testing.T, hc *http.Client, base, session string, to int, dryRun bool) (revertAnswer, int) {
	t.Helper()
	body := fmt.Sprintf(`{"to":%d,"dry_run":%t}`, to, dryRun)
	resp, err := hc.Post(base+"/sessions/"+session+"/revert", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, clip(string(raw)))
	var a revertAnswer
	require.NoError(t, json.Unmarshal(raw, &a))
	return a, len(raw)
}

// idleServer starts the binary on root and reads its peak RSS once it has
// answered one request: the idle figure a revert is measured against.
func idleServer(t *testing.T, hc *http.Client, root string) (*child, int64) {
	t.Helper()
	srv := startChild(t, root)
	resp, err := hc.Get(srv.base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	return srv, peakRSS(t, srv.cmd.Process.Pid)
}

// TestRevertMemoryBoundedChild: a revert's memory does not grow with its
// files (issue 41, item 2; docs/checkpoints.md, "The answer"). On the
// real binary with its default flags, an agent's session writes 20 files
// of 9 MiB; a server started afresh on that root answers the dry run of
// reverting them all, and another the revert itself, each within 64 MiB
// of its idle peak RSS, with diffs only within the answer's budget and
// the other files named; the revert restores every byte. Two cases: the
// files created by the session (nothing kept: --checkpoint-bytes never
// applies) and the files replaced by the session (their 9 MiB contents
// kept and put back). Before the bound, the created case's dry run
// answered 387 MB at 1,351 MB of peak RSS.
func TestRevertMemoryBoundedChild(t *testing.T) {
	for _, tc := range []struct {
		name    string
		updated bool // the session replaced existing files (to = 1) rather than created them (to = 0)
	}{
		{"created", false},
		{"updated", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			hc := newClient()
			names := make([]string, revertFiles)
			originals := make([]string, revertFiles)
			writer := startChild(t, root)
			for i := range revertFiles {
				names[i] = fmt.Sprintf("f%02d.txt", i)
				originals[i] = textOf9MiB(uint64(i))
				a := mustCall(t, hc, writer.base, "write", "agent", obj{"file_path": names[i], "content": originals[i]})
				require.Equal(t, http.StatusOK, a.Status, clip(a.Raw))
			}
			to := 0
			if tc.updated {
				to = revertFiles // one change per file so far: the creates stay
				for i := range revertFiles {
					a := mustCall(t, hc, writer.base, "write", "agent", obj{"file_path": names[i], "content": textOf9MiB(uint64(1000 + i))})
					require.Equal(t, http.StatusOK, a.Status, clip(a.Raw))
				}
			}
			writer.stop()

			// The dry run, on a fresh server.
			srv, idle := idleServer(t, hc, root)
			dry, dryBytes := postRevert(t, hc, srv.base, "agent", to, true)
			dryPeak := peakRSS(t, srv.cmd.Process.Pid)
			srv.stop()

			// The revert, on another fresh server.
			srv, idle2 := idleServer(t, hc, root)
			res, resBytes := postRevert(t, hc, srv.base, "agent", to, false)
			resPeak := peakRSS(t, srv.cmd.Process.Pid)
			srv.stop()

			mib := func(n int64) float64 { return float64(n) / (1 << 20) }
			t.Logf("%s: dry run: %d-byte answer, peak RSS %.1f MiB (idle %.1f, +%.1f); revert: %d-byte answer, peak RSS %.1f MiB (idle %.1f, +%.1f)",
				tc.name, dryBytes, mib(dryPeak), mib(idle), mib(dryPeak-idle), resBytes, mib(resPeak), mib(idle2), mib(resPeak-idle2))
			assert.Less(t, dryPeak-idle, int64(64<<20), "the dry run's peak RSS over idle")
			assert.Less(t, resPeak-idle2, int64(64<<20), "the revert's peak RSS over idle")
			assert.Less(t, dryBytes, 8<<20, "the dry run's answer")
			assert.Less(t, resBytes, 4<<20, "the revert's answer")

			// Every file is named, none has its diff: each side is 9 MiB.
			for _, a := range []revertAnswer{dry, res} {
				require.Len(t, a.Metadata.Restored, revertFiles)
				for i, r := range a.Metadata.Restored {
					assert.Equal(t, names[i], r.Path)
					assert.True(t, r.DiffsOmitted, r.Path)
					assert.Zero(t, len(r.Diffs), r.Path)
				}
			}
			all := strings.Join(names, ", ")
			assert.True(t, strings.HasPrefix(res.Output, fmt.Sprintf("Reverted %d change(s) in %d file(s): %s\n", revertFiles, revertFiles, all)), clip(res.Output))
			assert.True(t, strings.HasPrefix(dry.Output, fmt.Sprintf("Dry run: no changes were written. Reverting would undo %d change(s) in %d file(s): %s\n", revertFiles, revertFiles, all)), clip(dry.Output))

			// Every byte back: the created files gone, the replaced ones as
			// they were.
			for i, name := range names {
				got, err := os.ReadFile(filepath.Join(root, name))
				if !tc.updated {
					assert.ErrorIs(t, err, os.ErrNotExist, name)
					continue
				}
				require.NoError(t, err)
				assert.True(t, bytes.Equal([]byte(originals[i]), got), "%s restored byte for byte", name)
			}
		})
	}
}
