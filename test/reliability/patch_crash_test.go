package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The patch crash test's files: several large ones, each changed by one
// patch in two places.
const (
	patchCrashFiles = 4
	patchCrashSize  = 1 << 20
)

// patchCrashContent is a version of one of the files: its first line and
// one in the middle name the version.
func patchCrashContent(i, version int) string {
	line := fmt.Sprintf("f%d body: %s\n", i, strings.Repeat("x", 40))
	half := strings.Repeat(line, patchCrashSize/len(line)/2)
	return fmt.Sprintf("f%d head version %d\n", i, version) + half + fmt.Sprintf("f%d middle version %d\n", i, version) + half
}

// patchCrashPatch changes every file from version 0 to 1.
func patchCrashPatch() string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	for i := range patchCrashFiles {
		fmt.Fprintf(&b, "*** Update File: f%d.txt\n@@\n-f%d head version 0\n+f%d head version 1\n@@\n-f%d middle version 0\n+f%d middle version 1\n", i, i, i, i, i)
	}
	b.WriteString("*** End Patch")
	return b.String()
}

// An apply_patch on a server without checkpoints (--checkpoints=false),
// killed (SIGKILL) at a random point, is all or nothing once the server
// has started again: every file holds version 0, or every file version 1,
// byte for byte, and no journal is left (docs/checkpoints.md, "Without
// checkpoints"). 20 kills by default, 100 with TOOLFS_LONG=1.
func TestApplyPatchCrashWithoutCheckpoints(t *testing.T) {
	kills := 20
	if long {
		kills = 100
	}
	hc := newClient()
	patch := patchCrashPatch()
	round := func(root string, delay time.Duration) (took time.Duration) {
		t.Helper()
		for i := range patchCrashFiles {
			require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)), []byte(patchCrashContent(i, 0)), 0o644))
		}
		c := startChild(t, root, "--checkpoints=false")
		for i := range patchCrashFiles {
			a := mustCall(t, hc, c.base, "read", "s", obj{"file_path": fmt.Sprintf("f%d.txt", i), "limit": 1})
			require.Equal(t, 200, a.Status, a.Raw)
		}
		done := make(chan answer, 1)
		start := time.Now()
		go func() {
			a, _ := call(context.Background(), hc, c.base, "apply_patch", "s", obj{"input": patch})
			done <- a
		}()
		if delay < 0 {
			a := <-done
			require.Equal(t, 200, a.Status, a.Raw)
			took = time.Since(start)
			c.stop()
			return took
		}
		time.Sleep(delay)
		c.kill()
		<-done
		return 0
	}
	// check starts the server again (which settles what the kill left) and
	// reports which version every file holds.
	check := func(root string) string {
		t.Helper()
		c := startChild(t, root, "--checkpoints=false")
		c.stop()
		settled := ""
		if strings.Contains(c.log(), "checkpoints: settled what a crash left") {
			settled = ", settled at start-up"
		}
		versions := map[int]int{}
		for i := range patchCrashFiles {
			b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)))
			require.NoError(t, err)
			switch string(b) {
			case patchCrashContent(i, 0):
				versions[0]++
			case patchCrashContent(i, 1):
				versions[1]++
			default:
				t.Errorf("f%d.txt holds neither version (%d bytes)", i, len(b))
			}
		}
		logs, err := filepath.Glob(filepath.Join(root, ".toolfs-api", "journal", "sessions", "*.log"))
		require.NoError(t, err)
		assert.Empty(t, logs, "a journal left after the start")
		assert.NoDirExists(t, filepath.Join(root, ".toolfs-api", "checkpoints"))
		switch {
		case versions[0] == patchCrashFiles:
			return "none" + settled
		case versions[1] == patchCrashFiles:
			return "all" + settled
		}
		t.Errorf("the files were left mixed: %v", versions)
		return "mixed"
	}

	base := t.TempDir()
	calibrate := filepath.Join(base, "calibrate")
	require.NoError(t, os.MkdirAll(calibrate, 0o755))
	took := round(calibrate, -1)
	assert.Equal(t, "all", check(calibrate))
	t.Logf("an uninterrupted patch of %d files of %d bytes took %v", patchCrashFiles, patchCrashSize, took)

	outcomes := map[string]int{}
	for i := range kills {
		dir := filepath.Join(base, fmt.Sprint(i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		round(dir, time.Duration(rand.Int64N(int64(took)*3/2+1)))
		outcomes[check(dir)]++
		require.NoError(t, os.RemoveAll(dir))
		if t.Failed() {
			break
		}
	}
	t.Logf("outcomes after %d kills: %v", kills, outcomes)
}
