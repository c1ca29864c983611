package reliability

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestFolderSymlinkChurn swaps path components between a folder and a
// symlink with renameat2(RENAME_EXCHANGE) in a tight loop while clients
// read, write and edit through them: "d" trades places with a symlink to
// another folder inside the root, "x" with a symlink to a folder outside
// it. A walk that meets a name changed since its lstat looks again (a
// bounded number of times), so every answer is a 200 or a 4xx (404, 403 for
// the outside folder, 409, 422), never a 5xx, and nothing outside the root
// is touched (docs/reliability.md).
func TestFolderSymlinkChurn(t *testing.T) {
	perClient := 400
	if long {
		perClient = 4000
	}
	const clients = 8
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "d"), filepath.Join(root, "e"), filepath.Join(root, "x")} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(outside, "canary.txt"), []byte("canary\n"), 0o644))
	for _, d := range []string{"d", "e", "x"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, d, "f.txt"), []byte("alpha\n"), 0o644))
	}
	require.NoError(t, os.Symlink("e", filepath.Join(root, "dl")))
	require.NoError(t, os.Symlink("../outside", filepath.Join(root, "xl")))
	srv := startChild(t, root, "--policy=false")

	stop := make(chan struct{})
	var swaps atomic.Int64
	var swapper sync.WaitGroup
	for _, pair := range [][2]string{{"d", "dl"}, {"x", "xl"}} {
		swapper.Go(func() {
			a, b := filepath.Join(root, pair[0]), filepath.Join(root, pair[1])
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("exchange %s: %v", pair, err)
					return
				}
				swaps.Add(1)
			}
		})
	}

	statuses := map[int]int{}
	var mu sync.Mutex
	var fails []string
	var wg sync.WaitGroup
	started := time.Now()
	for c := range clients {
		wg.Go(func() {
			hc := newClient()
			defer hc.CloseIdleConnections()
			for i := range perClient {
				dir := "d"
				if i%4 == 3 {
					dir = "x"
				}
				var tool string
				var body obj
				switch i % 3 {
				case 0:
					tool, body = "read", obj{"file_path": dir + "/f.txt"}
				case 1:
					tool, body = "write", obj{"file_path": fmt.Sprintf("%s/w%d-%d.txt", dir, c, i%7), "content": "alpha\n"}
				default:
					tool, body = "edit", obj{"file_path": dir + "/f.txt", "old_string": "alpha", "new_string": "beta", "replace_all": true}
					if i%2 == 0 {
						body["old_string"], body["new_string"] = "beta", "alpha"
					}
				}
				a, err := call(context.Background(), hc, srv.base, tool, "churn", body)
				mu.Lock()
				switch {
				case err != nil:
					fails = append(fails, fmt.Sprintf("%s %v: %v", tool, body["file_path"], err))
				case a.Status >= 500 || a.Status < 200 || a.Status == 400:
					fails = append(fails, fmt.Sprintf("%s %v: %d %s", tool, body["file_path"], a.Status, a.Raw))
				default:
					statuses[a.Status]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	swapper.Wait()
	elapsed := time.Since(started)

	require.Empty(t, fails, "answers that were not 200 or 4xx (%d)", len(fails))
	assert.Positive(t, statuses[200], "nothing succeeded: the test proves nothing")
	assert.Positive(t, statuses[403], "the outside folder was never met: the test proves nothing")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "a file was created outside the root")
	canary, err := os.ReadFile(filepath.Join(outside, "canary.txt"))
	require.NoError(t, err)
	require.Equal(t, "canary\n", string(canary))
	t.Logf("folder/symlink churn: %d requests (%v by status), %d exchanges, 0 answers of 5xx, %s",
		clients*perClient, statuses, swaps.Load(), elapsed.Round(time.Millisecond))
}

// TestSweepSparesLiveWriter starts a second server on a root again and
// again while a first one writes large files there. Before each start the
// writer is frozen (SIGSTOP, every thread seen stopped) at a moment when it
// has temporary files in the private folder and holds the flock of each, so
// the start-up sweep is sure to meet live files: it must remove none and
// count each as in use, and after the writer resumes every write succeeds
// and every file is complete (docs/decisions-fs.md#temporary-files). No
// step depends on timing: a freeze that catches no locked file, or one
// created but not yet locked, is undone and tried again.
func TestSweepSparesLiveWriter(t *testing.T) {
	restarts := 4
	if long {
		restarts = 40
	}
	root := t.TempDir()
	writer := startChild(t, root, "--policy=false")
	const size = 16 << 20
	var content [2]string
	var sums [2]string
	for i := range content {
		content[i] = strings.Repeat(fmt.Sprintf("line of version %d\n", i), size/18)
		s := sha256.Sum256([]byte(content[i]))
		sums[i] = hex.EncodeToString(s[:])
	}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var writes atomic.Int64
	var mu sync.Mutex
	var fails []string
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			hc := newClient()
			defer hc.CloseIdleConnections()
			for i := 0; ctx.Err() == nil; i++ {
				a, err := call(ctx, hc, writer.base, "write", "writer", obj{"file_path": fmt.Sprintf("big-%d.txt", w), "content": content[i%2]})
				if ctx.Err() != nil {
					return
				}
				if err != nil || a.Status != 200 {
					mu.Lock()
					fails = append(fails, fmt.Sprintf("write %d: %v %d %.200s", i, err, a.Status, a.Raw))
					mu.Unlock()
					return
				}
				writes.Add(1)
			}
		})
	}
	failures := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), fails...)
	}

	sweepLine := regexp.MustCompile(`"msg":"start-up sweep of temporary files","removed":(\d+),"in_use":(\d+)`)
	started := time.Now()
	tmp := filepath.Join(root, ".toolfs-api", "tmp")
	frozen := 0
	for range restarts {
		live, tries := freezeHoldingTemps(t, writer, tmp, func() int64 { return writes.Load() }, failures)
		frozen += tries
		sweeper := startChild(t, root)
		sweeper.stop()
		for name, ino := range live {
			var st unix.Stat_t
			require.NoError(t, unix.Stat(filepath.Join(tmp, name), &st), "the sweep removed a live writer's %s", name)
			require.Equal(t, ino, st.Ino, "%s is not the file the writer holds", name)
		}
		m := sweepLine.FindStringSubmatch(sweeper.log())
		require.NotNil(t, m, "the sweep logged nothing although %d live temporary files were there; log: %s", len(live), sweeper.log())
		require.Equal(t, "0", m[1], "the sweep removed a file: %s", m[0])
		require.Equal(t, strconv.Itoa(len(live)), m[2], "the sweep counted other than the live files: %s", m[0])
		require.NoError(t, writer.cmd.Process.Signal(syscall.SIGCONT))
	}
	// Every write started before the last thaw completes.
	before := writes.Load()
	_, ok := waitFor(time.Minute, func() bool { return writes.Load() >= before+2 || len(failures()) > 0 })
	cancel()
	wg.Wait()
	require.Empty(t, fails)
	require.True(t, ok, "no write completed after the last thaw")
	for w := range 2 {
		b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("big-%d.txt", w)))
		require.NoError(t, err)
		s := sha256.Sum256(b)
		assert.Contains(t, sums[:], hex.EncodeToString(s[:]), "big-%d.txt is not one complete version", w)
	}
	t.Logf("sweep beside a live writer: %d start-up sweeps each met the frozen writer's locked 16 MiB temporary files and kept them (%d freezes), %d writes all ok, %s",
		restarts, frozen, writes.Load(), time.Since(started).Round(time.Millisecond))
}

// freezeHoldingTemps stops c with SIGSTOP at a moment when the private tmp
// folder holds at least one temporary file and c holds the flock of every
// one, and returns their names and inodes and how many freezes it took.
// A freeze that finds no file, or a file whose flock is free (created, not
// yet locked), is undone with SIGCONT and tried again.
func freezeHoldingTemps(t *testing.T, c *child, tmp string, writes func() int64, failures func() []string) (map[string]uint64, int) {
	t.Helper()
	pid := c.cmd.Process.Pid
	deadline := time.Now().Add(time.Minute)
	for tries := 1; ; tries++ {
		if time.Now().After(deadline) {
			t.Fatalf("no freeze caught a locked temporary file in a minute (%d tries); %d writes; failures: %q", tries, writes(), failures())
		}
		if _, ok := waitFor(30*time.Second, func() bool { return len(tempNames(t, tmp)) > 0 }); !ok {
			t.Fatalf("no temporary file appeared in 30 s; %d writes; failures: %q", writes(), failures())
		}
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP))
		_, ok := waitFor(30*time.Second, func() bool { return allStopped(pid) })
		require.True(t, ok, "toolfs-api %d not stopped 30 s after SIGSTOP", pid)
		live := map[string]uint64{}
		for _, name := range tempNames(t, tmp) {
			if ino, held := flockHeld(t, filepath.Join(tmp, name)); held {
				live[name] = ino
			} else {
				live = nil
				break
			}
		}
		if len(live) > 0 {
			return live, tries
		}
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGCONT))
		_, ok = waitFor(30*time.Second, func() bool { return !allStopped(pid) })
		require.True(t, ok, "toolfs-api %d still stopped 30 s after SIGCONT", pid)
	}
}

// tempNames lists the temporary files in the private tmp folder.
func tempNames(t *testing.T, tmp string) []string {
	entries, err := os.ReadDir(tmp)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if ok, _ := filepath.Match(".*.toolfs-*.tmp", e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names
}

// allStopped reports whether every thread of process pid is in the stopped
// state (a thread inside a system call stops only when it returns).
func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the parenthesised command name.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// flockHeld reports whether another process holds the flock of path, and
// its inode. Probing takes the lock for an instant when it is free, which
// is harmless here: the only process that could want it is stopped.
func flockHeld(t *testing.T, path string) (uint64, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	require.NoError(t, err, "a temporary file vanished while its writer was stopped")
	defer unix.Close(fd)
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		return st.Ino, true
	}
	require.NoError(t, err)
	return st.Ino, false
}
