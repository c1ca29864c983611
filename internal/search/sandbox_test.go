package search

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// requireLandlock skips a test of the sandbox on a kernel without Landlock,
// saying so: it must never pass there without running.
func requireLandlock(t testing.TB) {
	t.Helper()
	if sandbox.Problem() != "" {
		t.Skip("the kernel offers no Landlock: the search sandbox cannot confine rg here, so glob and grep are unavailable under --search-sandbox require and unconfined under best-effort; this test cannot run")
	}
}

func TestSandboxModes(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write("a.txt", "x\n")
	t.Run("kernel without Landlock", func(t *testing.T) {
		prove = func(context.Context, string) error { return errors.New("the kernel does not offer Landlock") }
		t.Cleanup(func() { prove = sandbox.Prove })

		s := New(Config{})
		assert.False(t, s.Available())
		assert.False(t, s.Sandboxed())
		assert.Equal(t, "the search sandbox cannot confine ripgrep (the kernel does not offer Landlock); glob and grep need it (--search-sandbox require)", s.UnavailableReason())
		_, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
		se := requireCode(t, err, fault.CodeSearchFailed)
		assert.Equal(t, "glob could not start its search command (ripgrep launch failed)", se.Message)
		_, err = s.Grep(context.Background(), w.fsys, w.cwd(""), "x", nil, nil)
		se = requireCode(t, err, fault.CodeSearchFailed)
		assert.Equal(t, "grep could not start its search command (ripgrep launch failed)", se.Message)

		s = New(Config{Sandbox: sandbox.BestEffort})
		assert.True(t, s.Available())
		assert.False(t, s.Sandboxed(), "best-effort without Landlock runs rg unconfined")
		assert.Empty(t, s.UnavailableReason())
		res, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
		require.NoError(t, err)
		assert.Equal(t, "a.txt", res.Output)
	})
	t.Run("kernel with Landlock", func(t *testing.T) {
		requireLandlock(t)
		for _, mode := range []sandbox.Requirement{"", sandbox.Require, sandbox.BestEffort} {
			s := New(Config{Sandbox: mode})
			assert.True(t, s.Available(), mode)
			assert.True(t, s.Sandboxed(), mode)
			res, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "x", nil, nil)
			require.NoError(t, err)
			assert.Equal(t, "Found 1 match\n\na.txt\nLine 1: x", res.Output)
		}
	})
	t.Run("ripgrep missing says so first", func(t *testing.T) {
		s := New(Config{RgPath: "/nonexistent/rg"})
		assert.Equal(t, "ripgrep (rg) was not found at start-up; install it or set --rg-path", s.UnavailableReason())
	})
}

// The files rg needs are listed one by one: the binary, its interpreter and
// its libraries, each a regular file.
func TestRuntimeFiles(t *testing.T) {
	requireRg(t)
	rg, err := exec.LookPath("rg")
	require.NoError(t, err)
	files, err := sandbox.RuntimeFiles(rg)
	require.NoError(t, err)
	require.Equal(t, rg, files[0])
	for _, f := range files {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), f)
	}
	t.Logf("rg needs %d files: %v", len(files), files)
}

// Under the sandbox rg cannot read a folder outside the root, even when it
// is named on its command line (as a swapped folder would be).
func TestSandboxRefusesOutside(t *testing.T) {
	requireRg(t)
	requireLandlock(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "elsewhere")
	for _, f := range []string{filepath.Join(root, "in.txt"), filepath.Join(outside, "secret.txt")} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte("hit\n"), 0o644))
	}
	w := workspaceAt(t, root)
	s := New(Config{})
	require.True(t, s.Sandboxed())
	at, err := newPlace(context.Background(), "glob", w.fsys, w.cwd(""))
	require.NoError(t, err)
	var out []byte
	_, err = s.run(context.Background(), "glob", at, []string{"--files", "--", ".", outside, "../elsewhere"}, func(r io.Reader) error {
		out, err = io.ReadAll(r)
		return err
	})
	// Both outside folders are refused by the kernel; refusals of what lies
	// outside are left out, as folders swapped out of the tree would be.
	require.NoError(t, err)
	assert.Equal(t, "./in.txt\n", string(out))
}

// rg's argv reaches it whole through the sandbox's child: a pattern of
// 100 KiB (white space in (?x) mode, which rg reads in linear time) is
// searched, not refused for its length.
func TestLongPatternConfined(t *testing.T) {
	requireRg(t)
	requireLandlock(t)
	w := newWorkspace(t)
	w.write("a.txt", "x\nneedle\n")
	s := New(Config{})
	require.True(t, s.Sandboxed())
	res, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "(?x)"+strings.Repeat(" ", 100<<10)+"needle", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "Found 1 match\n\na.txt\nLine 2: needle", res.Output)
}

func TestRedactAndPatternRejected(t *testing.T) {
	at := place{root: "/srv/w", real: "/data/w"}
	assert.Equal(t, "d: IO error for operation on (a path outside the workspace root): Permission denied",
		at.redact("d: IO error for operation on /etc/secret: Permission denied"))
	// Paths under the root (as shown or real) stay; a sibling sharing its
	// prefix does not.
	assert.Equal(t, "/srv/w/a: x; /data/w/b: y; '(a path outside the workspace root)': z; (a path outside the workspace root): w",
		at.redact("/srv/w/a: x; /data/w/b: y; '/home/u/.gitignore': z; /srv/w-evil: w"))
	assert.True(t, patternRejected("regex parse error:\n    (\n    ^\nerror: unclosed group"))
	assert.True(t, patternRejected("error parsing glob '{a': unclosed alternate group; missing '}'"))
	assert.False(t, patternRejected("./.ignore: line 1: error parsing glob '[': unclosed character class; missing ']'\nmissing: No such file or directory (os error 2)"))
	assert.False(t, patternRejected("missing: No such file or directory (os error 2)"))
}

// TestSandboxRace is the in-process twin of test/reliability's
// TestSearchCannotBeLedOutsideTheRoot: the search test binary re-executes
// itself as the sandbox child.
func TestSandboxRace(t *testing.T) {
	requireRg(t)
	requireLandlock(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "host-only-5e2b")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d", "inside.txt"), []byte("needle inside\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "canary-secret.txt"), []byte("TOPSECRET needle\n"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "dlink")))
	w := workspaceAt(t, root)
	s := New(Config{MaxConcurrent: 4})
	require.True(t, s.Sandboxed())

	stop := make(chan struct{})
	var swaps atomic.Int64
	go func() {
		d, link := filepath.Join(root, "d"), filepath.Join(root, "dlink")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	}()
	leaks := func(text string) bool {
		return strings.Contains(text, "canary") || strings.Contains(text, "TOPSECRET") || strings.Contains(text, "host-only")
	}
	var searches, ok, leaked atomic.Int64
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; time.Now().Before(deadline); i++ {
				ctx := context.Background()
				var res Result
				var err error
				switch i % 6 {
				case 0:
					res, err = s.Glob(ctx, w.fsys, w.cwd(""), "**", ptr("d"))
				case 1:
					res, err = s.Grep(ctx, w.fsys, w.cwd(""), "needle", ptr("d"), nil)
				case 2, 3:
					cwd, cerr := w.fsys.Resolve(ctx, "search", "d", "")
					if cerr != nil {
						continue
					}
					if i%6 == 2 {
						res, err = s.Glob(ctx, w.fsys, cwd, "**", nil)
					} else {
						res, err = s.Grep(ctx, w.fsys, cwd, "needle", nil, nil)
					}
				case 4:
					res, err = s.Glob(ctx, w.fsys, w.cwd(""), "**", nil)
				case 5:
					res, err = s.Grep(ctx, w.fsys, w.cwd(""), "needle", nil, nil)
				}
				searches.Add(1)
				text := res.Output
				if err != nil {
					text = err.Error()
				} else {
					ok.Add(1)
				}
				if leaks(text) {
					if leaked.Add(1) == 1 {
						t.Errorf("leak: %q", text)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	t.Logf("%d swaps, %d searches, %d ok, %d leaks", swaps.Load(), searches.Load(), ok.Load(), leaked.Load())
	assert.Zero(t, leaked.Load())
	assert.NotZero(t, ok.Load())
	assert.Greater(t, swaps.Load(), int64(1000))
}

// rg reads no ignore rules from outside the root, and a bad ignore file is
// not the caller's pattern.
func TestIgnoreFilesFromOutside(t *testing.T) {
	requireRg(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "elsewhere")
	w := workspaceAt(t, mkdir(t, root))
	w.write("a.txt", "hit\n")
	w.write("sub/b.txt", "hit\n")
	s := New(Config{})
	grep := func(t *testing.T, cwd string, path *string) (Result, error) {
		return s.Grep(context.Background(), w.fsys, w.cwd(cwd), "hit", path, nil)
	}
	t.Run("ignore files above the root", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(base, ".ignore"), []byte("a.txt\n[\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(base, ".rgignore"), []byte("b.txt\n"), 0o644))
		t.Cleanup(func() { os.Remove(filepath.Join(base, ".ignore")); os.Remove(filepath.Join(base, ".rgignore")) })
		res, err := grep(t, "", nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"a.txt", "sub/b.txt"}, groupNames(res))
	})
	t.Run("a .git file pointing outside", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(filepath.Join(outside, "gitdir", "info"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "gitdir", "info", "exclude"), []byte("a.txt\n[\n"), 0o644))
		w.write(".git", "gitdir: "+filepath.Join(outside, "gitdir")+"\n")
		t.Cleanup(func() { os.Remove(filepath.Join(root, ".git")) })
		res, err := grep(t, "", nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"a.txt", "sub/b.txt"}, groupNames(res))
		_, err = grep(t, "", ptr("missing"))
		se := requireCode(t, err, fault.CodeSearchFailed)
		assert.Equal(t, "grep search failed (exit 2): missing: No such file or directory (os error 2)", se.Message)
	})
	t.Run("a bad line in an ignore file inside is not SEARCH_INVALID_PATTERN", func(t *testing.T) {
		w.write(".ignore", "[\n")
		t.Cleanup(func() { os.Remove(filepath.Join(root, ".ignore")) })
		res, err := grep(t, "", nil)
		require.NoError(t, err, "rg warns and searches on")
		assert.Equal(t, []string{"a.txt", "sub/b.txt"}, groupNames(res))
	})
	t.Run("ignore files inside the root above the session cwd do not apply", func(t *testing.T) {
		w.write(".ignore", "b.txt\n")
		t.Cleanup(func() { os.Remove(filepath.Join(root, ".ignore")) })
		res, err := grep(t, "", nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"a.txt"}, groupNames(res))
		res, err = grep(t, "sub", nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"b.txt"}, groupNames(res))
	})
}

func mkdir(t *testing.T, dir string) string {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// groupNames are the file groups of a grep result, sorted.
func groupNames(res Result) []string {
	var names []string
	for _, f := range res.Metadata.(MatchesMeta).Files {
		names = append(names, f.Path)
	}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[j] < names[i] {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	return names
}

// glob and grep never list the server's private folder or its temporary
// files, whatever the caller's pattern, include or path.
func TestPrivateFilesNeverListed(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write("a.txt", "hit\n")
	w.write("sub/.toolfs-api/x.txt", "hit\n")
	w.write("sub/.a.txt.toolfs-123.tmp", "hit\n")
	w.write(".b.txt.toolfs-9.tmp", "hit\n")
	s := New(Config{})
	ctx := context.Background()
	for _, pattern := range []string{"**", "*", "**/.toolfs-api/**", ".toolfs-api/**", "**/*.tmp", ".*.toolfs-*.tmp", "**/x.txt"} {
		res, err := s.Glob(ctx, w.fsys, w.cwd(""), pattern, nil)
		require.NoError(t, err, pattern)
		assert.NotContains(t, res.Output, "toolfs", pattern)
	}
	for _, include := range []string{"**/.toolfs-api/**", "*.tmp", ".*", "**/x.txt"} {
		res, err := s.Grep(ctx, w.fsys, w.cwd(""), "hit", nil, ptr(include))
		require.NoError(t, err, include)
		assert.Equal(t, "No matches found", res.Output, include)
	}
	for _, path := range []string{"sub/.toolfs-api", "sub/.toolfs-api/x.txt", "sub/.a.txt.toolfs-123.tmp", ".b.txt.toolfs-9.tmp"} {
		res, err := s.Glob(ctx, w.fsys, w.cwd(""), "*", ptr(path))
		require.NoError(t, err, path)
		assert.Equal(t, "No files found", res.Output, path)
		res, err = s.Grep(ctx, w.fsys, w.cwd(""), "hit", ptr(path), nil)
		require.NoError(t, err, path)
		assert.Equal(t, "No matches found", res.Output, path)
	}
	res, err := s.Glob(ctx, w.fsys, w.cwd(""), "**", nil)
	require.NoError(t, err)
	assert.Equal(t, "a.txt", res.Output)
}

// Output fidelity (issue 22): names are grouped by their bytes, a trailing
// CR stays in a name, a symlinked path is shown as spelled, a missing
// absolute path is named as given.
func TestOutputFidelity(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	s := New(Config{})
	ctx := context.Background()
	t.Run("names differing only in invalid UTF-8 are two groups", func(t *testing.T) {
		w.write("a\xff", "x\n")
		w.write("a\xfe", "x\ny\nx\n")
		res, err := s.Grep(ctx, w.fsys, w.cwd(""), "x", nil, ptr("a*"))
		require.NoError(t, err)
		assert.Contains(t, []string{
			"Found 3 matches\n\na\uFFFD\nLine 1: x\n\na\uFFFD\nLine 1: x\nLine 3: x",
			"Found 3 matches\n\na\uFFFD\nLine 1: x\nLine 3: x\n\na\uFFFD\nLine 1: x",
		}, res.Output)
		files := res.Metadata.(MatchesMeta).Files
		require.Len(t, files, 2)
		assert.Equal(t, "a\uFFFD", files[0].Path)
		assert.Equal(t, "a\uFFFD", files[1].Path)
		assert.ElementsMatch(t, []int{1, 2}, []int{len(files[0].Matches), len(files[1].Matches)})
		os.Remove(filepath.Join(w.root, "a\xff"))
		os.Remove(filepath.Join(w.root, "a\xfe"))
	})
	t.Run("a trailing CR stays in a name", func(t *testing.T) {
		w.write("cr/n.txt\r", "x\n")
		res, err := s.Glob(ctx, w.fsys, w.cwd(""), "*", ptr("cr"))
		require.NoError(t, err)
		assert.Equal(t, "cr/n.txt\r", res.Output)
		assert.Equal(t, []string{"cr/n.txt\r"}, res.Metadata.(PathsMeta).Paths)
		res, err = s.Grep(ctx, w.fsys, w.cwd(""), "x", ptr("cr"), nil)
		require.NoError(t, err)
		assert.Equal(t, "Found 1 match\n\ncr/n.txt\r\nLine 1: x", res.Output)
		assert.Equal(t, "cr/n.txt\r", res.Metadata.(MatchesMeta).Files[0].Path)
	})
	t.Run("a symlinked path is shown as spelled", func(t *testing.T) {
		w.write("real/f.txt", "x\n")
		require.NoError(t, os.Symlink("real", filepath.Join(w.root, "link")))
		res, err := s.Glob(ctx, w.fsys, w.cwd(""), "*", ptr("link"))
		require.NoError(t, err)
		assert.Equal(t, "link/f.txt", res.Output)
		assert.Equal(t, []string{"link/f.txt"}, res.Metadata.(PathsMeta).Paths)
		res, err = s.Grep(ctx, w.fsys, w.cwd(""), "x", ptr("link"), nil)
		require.NoError(t, err)
		assert.Equal(t, "Found 1 match\n\nlink/f.txt\nLine 1: x", res.Output)
		assert.Equal(t, []FileMatches{{Path: "link/f.txt", Matches: []Match{{1, "x"}}}}, res.Metadata.(MatchesMeta).Files)
		res, err = s.Grep(ctx, w.fsys, w.cwd(""), "x", ptr("./link/"), nil)
		require.NoError(t, err)
		assert.Equal(t, "Found 1 match\n\nlink/f.txt\nLine 1: x", res.Output)
		res, err = s.Grep(ctx, w.fsys, w.cwd(""), "x", ptr(filepath.Join(w.root, "link")), nil)
		require.NoError(t, err)
		assert.Equal(t, "Found 1 match\n\nlink/f.txt\nLine 1: x", res.Output)
	})
	t.Run("a missing absolute path is named as given", func(t *testing.T) {
		missing := filepath.Join(w.root, "nope")
		_, err := s.Grep(ctx, w.fsys, w.cwd(""), "x", ptr(missing), nil)
		se := requireCode(t, err, fault.CodeSearchFailed)
		assert.Equal(t, "grep search failed (exit 2): "+missing+": No such file or directory (os error 2)", se.Message)
		_, err = s.Glob(ctx, w.fsys, w.cwd(""), "*", ptr(missing+"/"))
		se = requireCode(t, err, fault.CodeSearchFailed)
		assert.True(t, strings.HasPrefix(se.Message, "glob search failed (exit 2): "+missing+": "), se.Message)
	})
	t.Run("a session cwd reached through a symlink", func(t *testing.T) {
		cwd, err := w.fsys.Resolve(ctx, "search", "link", "")
		require.NoError(t, err)
		require.Equal(t, filepath.Join(w.root, "link"), cwd.Display)
		res, err := s.Grep(ctx, w.fsys, cwd, "x", ptr("../real"), nil)
		require.NoError(t, err)
		assert.Equal(t, "Found 1 match\n\n../real/f.txt\nLine 1: x", res.Output)
		res, err = s.Grep(ctx, w.fsys, cwd, "x", nil, nil)
		require.NoError(t, err)
		assert.Equal(t, "Found 1 match\n\nf.txt\nLine 1: x", res.Output)
	})
}
