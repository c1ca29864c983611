package reliability

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// globIgnore is size bytes of .gitignore lines that no table answers: a
// literal between two stars, each rule a glob tried against every name.
func globIgnore(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "*%06x*\n", i)
	}
	return b.String()[:size]
}

// cpuTime is the process's user and system time so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var utime, stime int64
	_, err = fmt.Sscan(f[11], &utime)
	require.NoError(t, err)
	_, err = fmt.Sscan(f[12], &stime)
	require.NoError(t, err)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

type ignoreListing struct {
	Entries       []struct{ Path string } `json:"entries"`
	Truncated     bool                    `json:"truncated"`
	TruncatedBy   string                  `json:"truncated_by"`
	IgnoreSkipped []string                `json:"ignore_skipped"`
}

// TestListIgnoreBoundedChild: GET /files?ignore=git costs bounded time and
// memory whatever the .gitignore files hold (docs/files.md, "Ignore
// rules"). The real binary with its default flags, on the two trees of
// issue 41: eight 1 MiB .gitignore files down one folder chain (18
// entries, listed to depth 8) and one 1 MiB root .gitignore over 300
// files, every rule a glob; and 1 MiB of the most rules a listing takes,
// literal names, the most memory its rules hold. One listing alone may use at most 1 s of the
// server's CPU and must say which bound cut it; four at once must answer
// within 20 s (wall, on a shared machine) with the server's peak RSS
// within 64 MiB of what it was before them. Before the bounds, one listing
// of the chain took 5.8–17.4 s and four at once ~900 MB.
func TestListIgnoreBoundedChild(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name  string
		tree  func(root string)
		query string
		cut   func(t *testing.T, l ignoreListing)
	}{
		{
			name: "eight 1 MiB .gitignore files down one chain",
			tree: func(root string) {
				dir := root
				for i := range 8 {
					if i > 0 {
						dir = filepath.Join(dir, fmt.Sprintf("d%d", i))
					}
					require.NoError(t, os.MkdirAll(dir, 0o755))
					require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(globIgnore(mib)), 0o644))
				}
				for _, f := range []string{"a.txt", "b.txt", "d1/d2/d3/d4/d5/d6/d7/c.txt"} {
					require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644))
				}
			},
			query: "?depth=8&ignore=git",
			cut: func(t *testing.T, l ignoreListing) {
				assert.Len(t, l.Entries, 18, "nothing is ignored by these rules")
				assert.Equal(t, []string{"d1/.gitignore", "d1/d2/.gitignore", "d1/d2/d3/.gitignore", "d1/d2/d3/d4/.gitignore",
					"d1/d2/d3/d4/d5/.gitignore", "d1/d2/d3/d4/d5/d6/.gitignore", "d1/d2/d3/d4/d5/d6/d7/.gitignore"}, l.IgnoreSkipped,
					"the root's 1 MiB is the listing's whole budget of rule bytes")
			},
		},
		{
			name: "one 1 MiB root .gitignore over 300 files",
			tree: func(root string) {
				require.NoError(t, os.WriteFile(filepath.Join(root, ".gitignore"), []byte(globIgnore(mib)), 0o644))
				for i := range 300 {
					require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d.txt", i)), []byte("x"), 0o644))
				}
			},
			query: "?depth=1&ignore=git",
			cut: func(t *testing.T, l ignoreListing) {
				assert.True(t, l.Truncated)
				assert.Equal(t, "ignore_work", l.TruncatedBy, "300 names against 116,508 globs pass the matching budget")
				assert.NotEmpty(t, l.Entries, "what was matched before the budget ran out is listed")
				assert.Empty(t, l.IgnoreSkipped)
			},
		},
		{
			name: "the most rules a listing takes, all in a table",
			tree: func(root string) {
				var b strings.Builder
				for i := range 1 << 17 {
					fmt.Fprintf(&b, "%07x\n", (i*7919)&(1<<17-1)) // 8 bytes: 131,072 rules in 1 MiB, out of order
				}
				require.NoError(t, os.WriteFile(filepath.Join(root, ".gitignore"), []byte(b.String()), 0o644))
				for i := range 300 {
					require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("%07x", i*7)), []byte("x"), 0o644))
					require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("k%03d", i)), []byte("x"), 0o644))
				}
			},
			query: "?depth=1&ignore=git",
			cut: func(t *testing.T, l ignoreListing) {
				assert.False(t, l.Truncated, "a table answers each name in a few probes")
				assert.Empty(t, l.IgnoreSkipped)
				assert.Len(t, l.Entries, 301, "the .gitignore and the k names; the hex names are ignored")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.tree(root)
			srv := startChild(t, root)
			pid := srv.cmd.Process.Pid
			hc := &http.Client{Timeout: 90 * time.Second}
			list := func() (ignoreListing, time.Duration, error) {
				start := time.Now()
				resp, err := hc.Get(srv.base + "/files" + tc.query)
				if err != nil {
					return ignoreListing{}, time.Since(start), err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					return ignoreListing{}, time.Since(start), err
				}
				if resp.StatusCode != http.StatusOK {
					return ignoreListing{}, time.Since(start), fmt.Errorf("status %d: %s", resp.StatusCode, b)
				}
				var l ignoreListing
				err = json.Unmarshal(b, &l)
				return l, time.Since(start), err
			}
			resp, err := hc.Get(srv.base + "/files?depth=8")
			require.NoError(t, err)
			resp.Body.Close()
			base := peakRSS(t, pid)

			cpu0 := cpuTime(t, pid)
			l, wall, err := list()
			cpu := cpuTime(t, pid) - cpu0
			require.NoError(t, err)
			t.Logf("one listing: %d entries, truncated_by %q, %d files skipped; %s wall, %s of server CPU",
				len(l.Entries), l.TruncatedBy, len(l.IgnoreSkipped), wall.Round(time.Millisecond), cpu)
			assert.LessOrEqual(t, cpu, time.Second, "server CPU for one listing")
			tc.cut(t, l)

			var wg sync.WaitGroup
			walls := make([]time.Duration, 4)
			errs := make([]error, 4)
			for i := range 4 {
				wg.Go(func() { _, walls[i], errs[i] = list() })
			}
			wg.Wait()
			peak := peakRSS(t, pid)
			for i := range 4 {
				assert.NoError(t, errs[i])
				assert.Less(t, walls[i], 20*time.Second)
			}
			growth := peak - base
			t.Logf("four at once: %v wall; peak RSS %.1f MiB after start-up, %.1f MiB after the listings (%+.1f MiB)",
				walls, float64(base)/mib, float64(peak)/mib, float64(growth)/mib)
			assert.Less(t, growth, int64(64*mib), "peak RSS growth")
		})
	}
}
