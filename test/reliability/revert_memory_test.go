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

// textOf is size bytes of text in lines of lineLen bytes (the last one
// cut short), different for each seed, so no two files share a kept
// content.
func textOf(seed uint64, size, lineLen int) string {
	rng := rand.New(rand.NewPCG(seed, 41))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
	b := make([]byte, size)
	for i := range b {
		if i%lineLen == lineLen-1 {
			b[i] = '\n'
		} else {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
	}
	return string(b)
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
// real binary with its default flags, an agent's session writes its files;
// a server started afresh on that root answers the dry run of reverting
// them all, and another the revert itself, each within 64 MiB of its idle
// peak RSS, with diffs only within the answer's 1 MiB and every other file
// named; the revert restores every byte. The 20 files of 9 MiB,
// created by the session (nothing kept: --checkpoint-bytes never applies)
// and replaced by it (their 9 MiB contents kept and put back); the most a
// revert diffs: 20 files just below its 256 KiB, in 2-byte lines all
// replaced (each diffed for its line counts, one diff fitting the answer);
// 40 files of 60 KiB, some diffs shown and the rest named. Before the
// bounds the first case's dry run answered 386 MB at 1,350 MiB of peak
// RSS, the second's 773 MB at 2,666 MiB.
func TestRevertMemoryBoundedChild(t *testing.T) {
	const sizeNote, budgetNote = "its content before or after is not UTF-8 text, or is 256 KiB or larger.)", "a revert shows at most 1 MiB of diffs in all.)"
	for _, tc := range []struct {
		name        string
		files, size int
		lineLen     int
		updated     bool   // the session replaced files it had created (to = files) rather than created them (to = 0)
		note        string // what stands in for every diff left out
		counted     bool   // the revert's own changes have line counts
		someShown   bool
	}{
		{"created 20x9MiB", 20, 9 << 20, 64, false, sizeNote, false, false},
		{"updated 20x9MiB", 20, 9 << 20, 64, true, sizeNote, false, false},
		{"updated 20x(256KiB-2) of 2-byte lines", 20, 256<<10 - 2, 2, true, budgetNote, true, true},
		{"updated 40x60KiB", 40, 60 << 10, 64, true, budgetNote, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			hc := newClient()
			names := make([]string, tc.files)
			originals := make([]string, tc.files)
			writer := startChild(t, root)
			for i := range tc.files {
				names[i] = fmt.Sprintf("f%02d.txt", i)
				originals[i] = textOf(uint64(i), tc.size, tc.lineLen)
				a := mustCall(t, hc, writer.base, "write", "agent", obj{"file_path": names[i], "content": originals[i]})
				require.Equal(t, http.StatusOK, a.Status, clip(a.Raw))
			}
			to := 0
			if tc.updated {
				to = tc.files // one change per file so far: the creates stay
				for i := range tc.files {
					a := mustCall(t, hc, writer.base, "write", "agent", obj{"file_path": names[i], "content": textOf(uint64(1000+i), tc.size, tc.lineLen)})
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
			counts := revertCounts(t, hc, srv.base, "agent")
			srv.stop()

			mib := func(n int64) float64 { return float64(n) / (1 << 20) }
			t.Logf("%s: dry run: %d-byte answer, peak RSS %.1f MiB (idle %.1f, %+.1f); revert: %d-byte answer, peak RSS %.1f MiB (idle %.1f, %+.1f)",
				tc.name, dryBytes, mib(dryPeak), mib(idle), mib(dryPeak-idle), resBytes, mib(resPeak), mib(idle2), mib(resPeak-idle2))
			assert.Less(t, dryPeak-idle, int64(64<<20), "the dry run's peak RSS over idle")
			assert.Less(t, resPeak-idle2, int64(64<<20), "the revert's peak RSS over idle")
			assert.Less(t, dryBytes, 8<<20, "the dry run's answer")
			assert.Less(t, resBytes, 4<<20, "the revert's answer")

			// Each file is shown within the budget or named, the same way
			// in the dry run and in the revert.
			var omitted []string
			shown := 0
			for k, a := range []revertAnswer{dry, res} {
				require.Len(t, a.Metadata.Restored, tc.files)
				diffBytes := 0
				for i, r := range a.Metadata.Restored {
					assert.Equal(t, names[i], r.Path)
					if r.DiffsOmitted {
						assert.Zero(t, len(r.Diffs), r.Path)
						if k == 0 {
							omitted = append(omitted, r.Path)
							assert.Contains(t, dry.Output, "\n(The diff of "+r.Path+" is not shown: "+tc.note)
						}
						continue
					}
					assert.NotZero(t, len(r.Diffs), r.Path)
					for _, d := range r.Diffs {
						diffBytes += len(d) // the JSON of each hunk: at least its texts and path
					}
					if k == 0 {
						shown++
						assert.Contains(t, dry.Output, "\n--- "+r.Path+"\n+++ "+r.Path+"\n@@ ")
					} else {
						assert.NotContains(t, omitted, r.Path)
					}
				}
				assert.LessOrEqual(t, diffBytes, 2<<20, "1 MiB of diff texts, JSON-escaped")
			}
			assert.Equal(t, tc.someShown, shown > 0, "files shown: %d", shown)
			require.NotEmpty(t, omitted)
			all := strings.Join(names, ", ")
			assert.Equal(t, fmt.Sprintf("Reverted %d change(s) in %d file(s): %s\nDiffs not shown for %d file(s) (not UTF-8 text, 256 KiB or larger, or past the 1 MiB of diffs a revert shows in all): %s",
				tc.files, tc.files, all, len(omitted), strings.Join(omitted, ", ")), res.Output)
			assert.True(t, strings.HasPrefix(dry.Output, fmt.Sprintf("Dry run: no changes were written. Reverting would undo %d change(s) in %d file(s): %s\n", tc.files, tc.files, all)), clip(dry.Output))
			for _, c := range counts {
				assert.Equal(t, tc.counted, c, "the revert's own changes counted")
			}

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

// revertCounts lists, for each change of the session's newest revert,
// whether it has line counts (GET /sessions/{id}/changes).
func revertCounts(t *testing.T, hc *http.Client, base, session string) []bool {
	t.Helper()
	resp, err := hc.Get(base + "/sessions/" + session + "/changes")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Changes []struct {
			Tool  string `json:"tool"`
			Added *int   `json:"added"`
		} `json:"changes"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	var out []bool
	for _, c := range list.Changes {
		if c.Tool != "revert" {
			break
		}
		out = append(out, c.Added != nil)
	}
	require.NotEmpty(t, out)
	return out
}
