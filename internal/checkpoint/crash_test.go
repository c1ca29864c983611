package checkpoint

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tfs "github.com/toolfs/toolfs-api/internal/fs"
)

// crashChildEnv makes the test binary a child that reverts session "s" of
// the root it names to 0, printing "go" when it starts and "journaled" once
// the journal is synced (TestRevertSurvivesSIGKILL).
const crashChildEnv = "TOOLFS_CHECKPOINT_CRASH_ROOT"

func TestMain(m *testing.M) {
	if root := os.Getenv(crashChildEnv); root != "" {
		os.Exit(crashChild(root))
	}
	os.Exit(m.Run())
}

func crashChild(root string) int {
	ctx := context.Background()
	l, err := tfs.NewLocal(root, tfs.LocalOptions{SweepInterval: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := Open(ctx, Options{FS: l, SweepInterval: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s.hooks.journaled = func() { fmt.Println("journaled") }
	fmt.Println("go")
	if _, err := s.Revert(ctx, "s", 0, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("done")
	return 0
}

// The SIGKILL test's files: several large ones, each changed by the agent
// (smaller under the race detector).
const crashFiles = 4

var crashFileSize = 1 << 20

func init() {
	if raceBuild {
		crashFileSize = 128 << 10
	}
}

// crashContent is a version of a large file: the agent changed its first
// line and one in the middle.
func crashContent(name string, version int) string {
	line := fmt.Sprintf("%s body: %s\n", name, strings.Repeat("x", 40))
	half := strings.Repeat(line, crashFileSize/len(line)/2)
	mark := fmt.Sprintf("%s version %d\n", name, version)
	return mark + half + mark + half
}

// A revert killed (SIGKILL) at a random point, over and over, is all or
// nothing once the store is opened again: every file holds either the
// agent's content or, byte for byte, the content before it, all the same
// way; the history says which; nothing of the store is left half-written.
// 100 kills by default (about 20 s), 500 with TOOLFS_LONG=1.
func TestRevertSurvivesSIGKILL(t *testing.T) {
	kills := 100
	if os.Getenv("TOOLFS_LONG") == "1" {
		kills = 500
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	base := t.TempDir()

	// One uninterrupted revert measures how long one takes, and how long
	// its publishing (from the journal to the end) takes.
	took, publishing := crashRound(t, exe, filepath.Join(base, "calibrate"), -1, false)
	t.Logf("an uninterrupted revert of %d files of %d bytes took %v, %v of it after the journal", crashFiles, crashFileSize, took, publishing)

	// Half the kills land anywhere in the revert, half after its journal
	// (where the files are published), each at a random point.
	outcomes := map[string]int{}
	for i := range kills {
		afterJournal := i%2 == 1
		span := took
		if afterJournal {
			span = publishing
		}
		delay := time.Duration(rand.Int64N(int64(span)*3/2 + 1))
		dir := filepath.Join(base, fmt.Sprint(i))
		crashRound(t, exe, dir, delay, afterJournal)
		outcomes[crashCheck(t, dir)]++
		require.NoError(t, os.RemoveAll(dir))
		if t.Failed() {
			break
		}
	}
	t.Logf("outcomes after %d kills: %v", kills, outcomes)
	assert.NotZero(t, outcomes["none"], "no kill landed before the journal")
	assert.NotZero(t, outcomes["all, finished at start-up"], "no kill landed between the journal and the end")
}

// crashRound prepares root (the agent's changes recorded), runs a child
// reverting them and kills it delay after it said "go" (or "journaled",
// with afterJournal; never, when delay is negative); it reports how long
// the child ran after each.
func crashRound(t *testing.T, exe, root string, delay time.Duration, afterJournal bool) (sinceGo, sinceJournal time.Duration) {
	t.Helper()
	require.NoError(t, os.MkdirAll(root, 0o755))
	for i := range crashFiles {
		name := fmt.Sprintf("f%d.txt", i)
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(crashContent(name, 0)), 0o644))
	}
	f := &fixture{t: t, root: root, opts: Options{SweepInterval: -1}}
	f.open()
	for i := range crashFiles {
		name := fmt.Sprintf("f%d.txt", i)
		f.write("s", name, crashContent(name, 1))
	}
	f.close()

	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+root)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewReader(out)
	line, err := lines.ReadString('\n')
	require.NoError(t, err, "child: %s", stderr.String())
	require.Equal(t, "go\n", line)
	start, journaled := time.Now(), time.Now()
	if delay < 0 || afterJournal {
		line, err = lines.ReadString('\n')
		require.NoError(t, err, "child: %s", stderr.String())
		require.Equal(t, "journaled\n", line)
		journaled = time.Now()
	}
	if delay >= 0 {
		time.Sleep(delay)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		return 0, 0
	}
	line, err = lines.ReadString('\n')
	require.NoError(t, err, "child: %s", stderr.String())
	require.Equal(t, "done\n", line)
	sinceGo, sinceJournal = time.Since(start), time.Since(journaled)
	require.NoError(t, cmd.Wait(), "child: %s", stderr.String())
	return sinceGo, sinceJournal
}

// crashCheck opens the store again and checks all or nothing; it returns
// which ("none", "all", or "all, finished at start-up").
func crashCheck(t *testing.T, root string) string {
	t.Helper()
	f := &fixture{t: t, root: root, opts: Options{SweepInterval: -1}}
	f.open()
	defer f.close()
	rec := f.s.Recovered()
	assert.Empty(t, rec.Failed)
	assert.Zero(t, rec.RolledBack, "nothing changed the files: never undone")
	restored := 0
	for i := range crashFiles {
		name := fmt.Sprintf("f%d.txt", i)
		switch got := f.read(name); got {
		case crashContent(name, 0):
			restored++
		case crashContent(name, 1):
		default:
			t.Errorf("%s holds neither version (%d bytes)", name, len(got))
		}
	}
	cs := f.changes("s")
	var outcome string
	switch restored {
	case 0:
		outcome = "none"
		assert.Len(t, cs, crashFiles, "no revert listed")
	case crashFiles:
		outcome = "all"
		if rec.RolledForward > 0 {
			outcome = "all, finished at start-up"
		}
		if assert.Len(t, cs, 2*crashFiles) {
			assert.Equal(t, ToolRevert, cs[0].Tool)
		}
	default:
		t.Errorf("%d of %d files restored", restored, crashFiles)
	}
	require.NoError(t, f.s.collect(context.Background()))
	for _, dir := range []string{"checkpoints/blobs", "checkpoints/sessions", "tmp"} {
		entries, err := os.ReadDir(filepath.Join(root, tfs.PrivateDir, dir))
		require.NoError(t, err)
		for _, e := range entries {
			assert.False(t, strings.HasSuffix(e.Name(), ".tmp"), "%s/%s left behind", dir, e.Name())
		}
	}
	return outcome
}
