package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// requireLandlock skips a test of the search sandbox on a kernel without
// Landlock, saying so: such a test must never pass there without running.
func requireLandlock(t *testing.T) {
	t.Helper()
	if v, err := ll.LandlockGetABIVersion(); err != nil || v < 1 {
		t.Skipf("the kernel offers no Landlock (%v): the search sandbox cannot confine rg here, so glob and grep are unavailable under --search-sandbox require and unconfined under best-effort; this test cannot run", err)
	}
}

// swapTree is a root holding a folder d and a symlink dlink to an outside
// folder holding a canary; swap exchanges the two names atomically
// (renameat2 RENAME_EXCHANGE), so d is by turns the real folder and the
// link out.
type swapTree struct {
	root, outside string
}

const (
	canaryName    = "canary-secret.txt"
	canaryContent = "TOPSECRET canary outside the root"
)

func newSwapTree(t *testing.T) swapTree {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	st := swapTree{root: filepath.Join(base, "root"), outside: filepath.Join(base, "host-only-9d1c")}
	require.NoError(t, os.MkdirAll(filepath.Join(st.root, "d", "sub"), 0o755))
	require.NoError(t, os.MkdirAll(st.outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(st.root, "d", "inside.txt"), []byte("Line needle inside\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(st.root, "d", "sub", "deeper.txt"), []byte("needle deeper\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(st.outside, canaryName), []byte(canaryContent+" needle\n"), 0o644))
	require.NoError(t, os.Symlink(st.outside, filepath.Join(st.root, "dlink")))
	return st
}

// swap exchanges d and dlink in a tight loop until stop is closed and
// returns how many exchanges it made.
func (st swapTree) swap(t *testing.T, stop <-chan struct{}) int {
	d, link := filepath.Join(st.root, "d"), filepath.Join(st.root, "dlink")
	n := 0
	for {
		select {
		case <-stop:
			// Leave d the real folder.
			if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				require.NoError(t, unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE))
			}
			return n
		default:
		}
		if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
			t.Errorf("renameat2: %v", err)
			return n
		}
		n++
	}
}

// leaks reports whether an answer shows anything of the outside folder.
func (st swapTree) leaks(body string) bool {
	return strings.Contains(body, "canary") || strings.Contains(body, "TOPSECRET") ||
		strings.Contains(body, st.outside) || strings.Contains(body, filepath.Base(st.outside))
}

// searchCase is one kind of search the race runs.
type searchCase struct {
	name, tool, cwd string
	body            map[string]any
}

var escapeCases = []searchCase{
	{"glob path", "glob", "", map[string]any{"pattern": "**", "path": "d"}},
	{"grep path", "grep", "", map[string]any{"pattern": "needle|TOPSECRET", "path": "d"}},
	{"glob cwd", "glob", "d", map[string]any{"pattern": "**"}},
	{"grep cwd", "grep", "d", map[string]any{"pattern": "needle|TOPSECRET"}},
	{"glob neither", "glob", "", map[string]any{"pattern": "**"}},
	{"grep neither", "grep", "", map[string]any{"pattern": "needle|TOPSECRET"}},
}

// escapeCounts are the outcomes of one kind of search during the race.
type escapeCounts struct {
	requests, leaks, leaking5xx, ok, fivexx atomic.Int64
}

// raceSearches runs every escape case against base from workers goroutines
// for d while st swaps, and returns the counts per case and the swaps made.
func raceSearches(t *testing.T, st swapTree, base string, d time.Duration, workers int) (map[string]*escapeCounts, int) {
	counts := map[string]*escapeCounts{}
	for _, c := range escapeCases {
		counts[c.name] = &escapeCounts{}
	}
	hc := newClient()
	stop := make(chan struct{})
	swaps := make(chan int, 1)
	go func() { swaps <- st.swap(t, stop) }()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	var firstLeak, first5xx sync.Once
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i++ {
				c := escapeCases[i%len(escapeCases)]
				status, body, err := postSearch(hc, base, c)
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					return
				}
				n := counts[c.name]
				n.requests.Add(1)
				if status == 200 {
					n.ok.Add(1)
				}
				if status >= 500 {
					n.fivexx.Add(1)
					first5xx.Do(func() { t.Logf("first 5xx (%s): %d %s", c.name, status, body) })
				}
				if st.leaks(body) {
					n.leaks.Add(1)
					if status >= 500 {
						n.leaking5xx.Add(1)
					}
					firstLeak.Do(func() { t.Logf("first leak (%s): %d %s", c.name, status, body) })
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	return counts, <-swaps
}

func postSearch(hc *http.Client, base string, c searchCase) (int, string, error) {
	b, _ := json.Marshal(c.body)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/tools/"+c.tool, bytes.NewReader(b))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cwd != "" {
		req.Header.Set("X-Session-Cwd", c.cwd)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// TestSearchCannotBeLedOutsideTheRoot swaps a folder with a symlink to an
// outside folder while glob and grep run through the real binary (rg
// confined by the sandbox, re-executed from the server binary): nothing of
// the outside folder may appear in any answer (docs/reliability-hostile.md).
func TestSearchCannotBeLedOutsideTheRoot(t *testing.T) {
	requireLandlock(t)
	st := newSwapTree(t)
	c := startChild(t, st.root)
	hc := newClient()
	require.Equal(t, []float64{1}, c.metrics(hc, "toolfs_search_sandboxed"))
	require.Contains(t, c.log(), "search sandbox on: rg is confined to the root by Landlock")

	d := 5 * time.Second
	if long {
		d = 60 * time.Second
	}
	counts, swaps := raceSearches(t, st, c.base, d, 4)
	var total, leaks, ok int64
	for _, sc := range escapeCases {
		n := counts[sc.name]
		t.Logf("%-13s %5d requests, %5d ok, %d 5xx, %d leaks (%d in 5xx)", sc.name, n.requests.Load(), n.ok.Load(), n.fivexx.Load(), n.leaks.Load(), n.leaking5xx.Load())
		total += n.requests.Load()
		leaks += n.leaks.Load()
		ok += n.ok.Load()
		assert.Zero(t, n.leaks.Load(), sc.name)
		assert.Zero(t, n.fivexx.Load(), "%s: a folder swapped out during the walk is not a server failure", sc.name)
		assert.NotZero(t, n.ok.Load(), "%s: no search succeeded during the race", sc.name)
	}
	t.Logf("%d swaps, %d searches, %d ok, %d leaks", swaps, total, ok, leaks)
	require.Greater(t, swaps, 1000, "the swapper barely ran")

	// Once the swapping stops, the same searches see the inside again.
	a := mustCall(t, hc, c.base, "grep", "", obj{"pattern": "needle|TOPSECRET", "path": "d"})
	require.Equal(t, 200, a.Status, a.Raw)
	assert.Equal(t, "Found 2 matches\n\nd/inside.txt\nLine 1: Line needle inside\n\nd/sub/deeper.txt\nLine 1: needle deeper", sortedGroups(a.Output))
}

// sortedGroups orders grep's file groups by name (rg reports them in
// parallel order).
func sortedGroups(out string) string {
	head, body, ok := strings.Cut(out, "\n\n")
	if !ok {
		return out
	}
	groups := strings.Split(body, "\n\n")
	for i := range groups {
		for j := i + 1; j < len(groups); j++ {
			if groups[j] < groups[i] {
				groups[i], groups[j] = groups[j], groups[i]
			}
		}
	}
	return fmt.Sprintf("%s\n\n%s", head, strings.Join(groups, "\n\n"))
}

// churnTree is a root holding pairs of a folder d<i> and a symlink
// d<i>-link to one outside folder; the pairs' names are exchanged
// (RENAME_EXCHANGE) while searches walk the root, so folders keep leaving
// the tree under the walk.
type churnTree struct {
	swapTree
	pairs  int
	inside map[string]bool // every path an answer may show
}

func newChurnTree(t *testing.T, pairs int) churnTree {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	ct := churnTree{swapTree: swapTree{root: filepath.Join(base, "root"), outside: filepath.Join(base, "host-only-9d1c")}, pairs: pairs, inside: map[string]bool{"top.txt": true}}
	require.NoError(t, os.MkdirAll(filepath.Join(ct.outside, "outsub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ct.outside, canaryName), []byte(canaryContent+" needle\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ct.outside, "outsub", "canary-deeper.txt"), []byte(canaryContent+" needle\n"), 0o644))
	require.NoError(t, os.MkdirAll(ct.root, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ct.root, "top.txt"), []byte("needle top\n"), 0o644))
	for i := range pairs {
		d := fmt.Sprintf("d%02d", i)
		require.NoError(t, os.MkdirAll(filepath.Join(ct.root, d, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ct.root, d, "inside.txt"), []byte("needle inside\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ct.root, d, "sub", "deeper.txt"), []byte("needle deeper\n"), 0o644))
		require.NoError(t, os.Symlink(ct.outside, filepath.Join(ct.root, d+"-link")))
		for _, name := range []string{d, d + "-link"} { // the folder goes by either name
			ct.inside[name+"/inside.txt"], ct.inside[name+"/sub/deeper.txt"] = true, true
		}
	}
	return ct
}

// churn exchanges every pair in turn until stop is closed, leaves every
// d<i> the real folder, and returns how many exchanges it made.
func (ct churnTree) churn(t *testing.T, stop <-chan struct{}) int {
	n := 0
	for i := 0; ; i = (i + 1) % ct.pairs {
		d := filepath.Join(ct.root, fmt.Sprintf("d%02d", i))
		select {
		case <-stop:
			for j := range ct.pairs {
				d := filepath.Join(ct.root, fmt.Sprintf("d%02d", j))
				if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
					require.NoError(t, unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, d+"-link", unix.RENAME_EXCHANGE))
				}
			}
			return n
		default:
		}
		if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, d+"-link", unix.RENAME_EXCHANGE); err != nil {
			t.Errorf("renameat2: %v", err)
			return n
		}
		n++
	}
}

// shownPaths are the paths a glob or grep answer lists.
func shownPaths(tool, output string) []string {
	if output == "No files found" || output == "No matches found" {
		return nil
	}
	if tool == "glob" {
		return strings.Split(output, "\n")
	}
	_, body, _ := strings.Cut(output, "\n\n")
	var paths []string
	for _, group := range strings.Split(body, "\n\n") {
		name, _, _ := strings.Cut(group, "\n")
		paths = append(paths, name)
	}
	return paths
}

// TestSearchOfAChangingTree: glob and grep of the root while folders under
// it are swapped for symlinks to an outside folder and back (issue 27: 19
// of 247 such searches answered 500 SEARCH_FAILED, "./d/sub: No such file
// or directory"). A folder that leaves the tree during the walk is left out
// of the result: no answer is a 5xx, each success lists only paths inside
// the root, and none shows anything of the outside folder (docs/search.md).
func TestSearchOfAChangingTree(t *testing.T) {
	requireLandlock(t)
	ct := newChurnTree(t, 24)
	c := startChild(t, ct.root)
	cases := []searchCase{
		{"glob", "glob", "", obj{"pattern": "**"}},
		{"grep", "grep", "", obj{"pattern": "needle|TOPSECRET"}},
		{"glob absolute root", "glob", "", obj{"pattern": "**", "path": ct.root}},
		{"grep absolute root", "grep", "", obj{"pattern": "needle|TOPSECRET", "path": ct.root}},
	}
	d := 5 * time.Second
	if long {
		d = 60 * time.Second
	}
	stop := make(chan struct{})
	swaps := make(chan int, 1)
	go func() { swaps <- ct.churn(t, stop) }()
	deadline := time.Now().Add(d)
	var mu sync.Mutex
	statuses := map[string]map[int]int{}
	var fivexx, leaks, strays atomic.Int64
	var wg sync.WaitGroup
	hc := newClient()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i++ {
				sc := cases[i%len(cases)]
				status, body, err := postSearch(hc, c.base, sc)
				if err != nil {
					t.Errorf("%s: %v", sc.name, err)
					return
				}
				mu.Lock()
				if statuses[sc.name] == nil {
					statuses[sc.name] = map[int]int{}
				}
				statuses[sc.name][status]++
				mu.Unlock()
				if status >= 500 && fivexx.Add(1) <= 3 {
					t.Logf("%s: %d %s", sc.name, status, body)
				}
				if ct.leaks(body) && leaks.Add(1) <= 3 {
					t.Logf("leak (%s): %d %s", sc.name, status, body)
				}
				if status != 200 {
					continue
				}
				var a struct{ Output string }
				require.NoError(t, json.Unmarshal([]byte(body), &a))
				for _, p := range shownPaths(sc.tool, a.Output) {
					if !ct.inside[p] && strays.Add(1) <= 3 {
						t.Logf("stray path (%s): %q in %s", sc.name, p, body)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	n := <-swaps
	var total int
	for _, sc := range cases {
		t.Logf("%-18s statuses %v", sc.name, statuses[sc.name])
		for _, k := range statuses[sc.name] {
			total += k
		}
		assert.NotZero(t, statuses[sc.name][200], "%s: no search succeeded during the race", sc.name)
	}
	t.Logf("%d swaps, %d searches, %d 5xx, %d leaks, %d stray paths", n, total, fivexx.Load(), leaks.Load(), strays.Load())
	require.Greater(t, n, 1000, "the swapper barely ran")
	assert.Zero(t, fivexx.Load(), "answers with a 5xx status")
	assert.Zero(t, leaks.Load(), "answers showing the outside folder")
	assert.Zero(t, strays.Load(), "paths that are not inside the root")

	// Once the swapping stops, every folder is listed again.
	a := mustCall(t, hc, c.base, "glob", "", obj{"pattern": "**"})
	require.Equal(t, 200, a.Status, a.Raw)
	assert.Len(t, strings.Split(a.Output, "\n"), 1+2*ct.pairs, a.Output)
}
