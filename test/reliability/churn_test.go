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
// again while a first one writes large files there: every start-up sweep
// meets the first server's temporary files and must leave them alone (their
// flock is held), so every write succeeds and every file is complete.
func TestSweepSparesLiveWriter(t *testing.T) {
	restarts := 8
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

	inUse := regexp.MustCompile(`"msg":"start-up sweep of temporary files","removed":(\d+),"in_use":(\d+)`)
	sawLive := 0
	started := time.Now()
	tmp := filepath.Join(root, ".toolfs-api", "tmp")
	staging := func() bool {
		entries, _ := os.ReadDir(tmp)
		return len(entries) > 0
	}
	for range restarts {
		_, ok := waitFor(30*time.Second, staging) // a write is staging now
		if !ok {
			mu.Lock()
			t.Fatalf("no temporary file appeared in 30 s; %d writes; failures: %q", writes.Load(), fails)
		}
		sweeper := startChild(t, root)
		sweeper.stop()
		if m := inUse.FindStringSubmatch(sweeper.log()); m != nil {
			require.Equal(t, "0", m[1], "the sweep removed a file: %s", m[0])
			if n, _ := strconv.Atoi(m[2]); n > 0 {
				sawLive++
			}
		}
	}
	cancel()
	wg.Wait()
	require.Empty(t, fails)
	require.Positive(t, sawLive, "no sweep met a live temporary file: the test proves nothing")
	for w := range 2 {
		b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("big-%d.txt", w)))
		require.NoError(t, err)
		s := sha256.Sum256(b)
		assert.Contains(t, sums[:], hex.EncodeToString(s[:]), "big-%d.txt is not one complete version", w)
	}
	t.Logf("sweep beside a live writer: %d start-up sweeps, %d met live 16 MiB temporary files and kept them, %d writes all ok, %s",
		restarts, sawLive, writes.Load(), time.Since(started).Round(time.Millisecond))
}
