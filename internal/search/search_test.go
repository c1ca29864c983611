package search

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

func TestArgv(t *testing.T) {
	vcs := []string{
		"--glob=!**/.git", "--glob=!**/.git/**", "--glob=!**/.svn", "--glob=!**/.svn/**",
		"--glob=!**/.hg", "--glob=!**/.hg/**", "--glob=!**/.bzr", "--glob=!**/.bzr/**",
		"--glob=!**/.jj", "--glob=!**/.jj/**", "--glob=!**/.sl", "--glob=!**/.sl/**",
	}
	ws := newWorkspace(t).fsys
	private := []string{"--glob=!**/.toolfs-api", "--glob=!**/.toolfs-api/**", "--glob=!**/.*.toolfs-*.tmp"}
	globHead := []string{"--files", "--glob=*.ts", "--sort=modified", "--no-ignore", "--hidden"}
	grepHead := []string{"--no-ignore-parent", "--no-ignore-global", "--no-ignore-exclude"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"glob without path", globArgs(privateGlobs(ws), "*.ts", ""), cat(globHead, vcs, private, []string{"--"})},
		{"glob with path", globArgs(privateGlobs(ws), "*.ts", "src"), cat(globHead, vcs, private, []string{"--", "src"})},
		{"grep bare", grepArgs(privateGlobs(ws), "a|b", "", ""), cat([]string{"--json", "--regexp=a|b"}, grepHead, private, []string{"--"})},
		{"grep with include and path", grepArgs(privateGlobs(ws), "-x", "*.{js,ts}", "-dir"), cat([]string{"--json", "--regexp=-x"}, grepHead, []string{"--glob=*.{js,ts}"}, private, []string{"--", "-dir"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestArgumentErrors(t *testing.T) {
	// No rg needed: arguments are checked before anything runs.
	s := New(Config{RgPath: "/nonexistent/rg"})
	w := newWorkspace(t)
	cwd := w.cwd("")
	ctx := context.Background()
	glob := func(p string, path *string) error { _, err := s.Glob(ctx, w.fsys, cwd, p, path); return err }
	grep := func(p string, path, inc *string) error { _, err := s.Grep(ctx, w.fsys, cwd, p, path, inc); return err }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"glob empty pattern", glob("", nil), "pattern must be a non-empty string"},
		{"glob blank pattern is trimmed", glob(" \t\n", nil), "pattern must be a non-empty string"},
		{"glob empty path", glob("*", ptr("")), "path must be a non-empty string when given"},
		{"glob blank path", glob("*", ptr("  ")), "path must be a non-empty string when given"},
		{"glob NUL in pattern", glob("a\x00b", nil), "pattern must not contain a NUL byte"},
		{"glob NUL in path", glob("*", ptr("a\x00")), "path must not contain a NUL byte"},
		{"grep empty pattern", grep("", nil, nil), "pattern must be a non-empty string"},
		{"grep empty path", grep("x", ptr(""), nil), "path must be a non-empty string when given"},
		{"grep empty include", grep("x", nil, ptr("")), "include must be a non-empty glob when given"},
		{"grep blank include", grep("x", nil, ptr(" ")), "include must be a non-empty glob when given"},
		{"grep negated include", grep("x", nil, ptr("!*.ts")), `include must be a positive glob filter; negated patterns ("!…") are not supported`},
		{"grep comma list include", grep("x", nil, ptr("*.ts,*.js")), "include must be one glob, not a comma-separated list (use {a,b} alternation instead)"},
		{"grep comma after alternation", grep("x", nil, ptr("*.{ts,js},*.md")), "include must be one glob, not a comma-separated list (use {a,b} alternation instead)"},
		{"grep NUL in include", grep("x", nil, ptr("*\x00")), "include must not contain a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			se := requireCode(t, tt.err, fault.CodeInvalidArgument)
			assert.Equal(t, tt.want, se.Message)
		})
	}
}

func TestHasTopLevelComma(t *testing.T) {
	tests := []struct {
		glob string
		want bool
	}{
		{"*.ts", false},
		{"*.{ts,js}", false},
		{"{a,{b,c}}/*.go", false},
		{`a\,b`, false},
		{"[,]x", false},
		{"[],]x", false},
		{"a,b", true},
		{"{a,b},c", true},
		{"}a,b", true},
	}
	for _, tt := range tests {
		t.Run(tt.glob, func(t *testing.T) {
			assert.Equal(t, tt.want, hasTopLevelComma(tt.glob))
		})
	}
}

func TestGlob(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write("beta.ts", "b")
	w.write("alpha.ts", "a")
	w.write(".hidden.ts", "h")
	w.write("ignored.ts", "i")
	w.write(".gitignore", "ignored.ts\n")
	w.write("src/deep/gamma.ts", "g")
	w.write("src/readme.md", "r")
	for _, d := range []string{".git", ".svn", ".hg", ".bzr", ".jj", ".sl"} {
		w.write(d+"/meta.ts", "vcs")
		w.write("src/"+d+"/meta.ts", "vcs")
	}
	w.age(".hidden.ts", 1990)
	w.age("alpha.ts", 2000)
	w.age("ignored.ts", 2005)
	w.age("beta.ts", 2020)
	w.age("src/deep/gamma.ts", 2021)
	require.NoError(t, os.Symlink(filepath.Join(w.root, "alpha.ts"), filepath.Join(w.root, "link.ts")))
	require.NoError(t, os.Symlink(filepath.Join(w.root, "src"), filepath.Join(w.root, "linkdir")))
	s := New(Config{})
	require.True(t, s.Available())

	tests := []struct {
		name    string
		cwd     string
		pattern string
		path    *string
		want    string
	}{
		{"oldest first, hidden and ignored included, VCS and symlinks excluded", "", "*.ts", nil, ".hidden.ts\nalpha.ts\nignored.ts\nbeta.ts\nsrc/deep/gamma.ts"},
		{"pattern is trimmed", "", "  alpha.ts\n", nil, "alpha.ts"},
		{"anchored pattern", "", "src/**/*.ts", nil, "src/deep/gamma.ts"},
		{"relative path", "", "*", ptr("src/deep"), "src/deep/gamma.ts"},
		{"path equal to the cwd prints no ./", "", "*.md", ptr("."), "src/readme.md"},
		{"absolute path inside the root", "", "*.md", ptr(filepath.Join(w.root, "src")), "src/readme.md"},
		{"path through a symlink inside the root", "", "*.md", ptr("linkdir"), "linkdir/readme.md"},
		{"session cwd makes results relative to it", "src", "*.ts", nil, "deep/gamma.ts"},
		{"path above the session cwd", "src/deep", "alpha.ts", ptr("../.."), "../../alpha.ts"},
		{".git as the root finds nothing", "", "*", ptr(".git"), "No files found"},
		{"no match", "", "*.nothing", nil, "No files found"},
		{"a file as the path", "", "*", ptr("alpha.ts"), "alpha.ts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Glob(context.Background(), w.fsys, w.cwd(tt.cwd), tt.pattern, tt.path)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Output)
			meta, ok := res.Metadata.(PathsMeta)
			require.True(t, ok)
			assert.Equal(t, "paths", meta.Shape)
			assert.False(t, meta.Truncated)
			if tt.want == "No files found" {
				assert.Equal(t, []string{}, meta.Paths)
				assert.Zero(t, meta.Total)
			} else {
				assert.Equal(t, strings.Split(tt.want, "\n"), meta.Paths)
				assert.Equal(t, len(meta.Paths), meta.Total)
			}
		})
	}
}

func TestGrep(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write(".git/HEAD", "needle in vcs\n")
	w.write(".gitignore", "ignored.txt\n")
	w.write("ignored.txt", "needle ignored\n")
	w.write(".hidden.txt", "needle hidden\n")
	w.write("a.txt", "needle one\nnothing\nneedle two\r\n")
	w.write("sub/b.go", "package b // needle\n")
	w.write("sub/c.txt", "no\n")
	w.write("crlf.txt", "needle crlf\r\n")
	w.write("latin1.txt", "caf\xe9 needle\n")
	w.write("dash.txt", "--files\n-e x\n")
	w.write("long.txt", strings.Repeat("é", 1500)+"needle\n") // 3000 bytes before the needle
	s := New(Config{})

	tests := []struct {
		name     string
		cwd      string
		pattern  string
		path     *string
		include  *string
		want     string
		wantMeta []FileMatches
	}{
		{
			name: "grouped, ignored and hidden skipped, CRLF stripped", pattern: "needle", path: ptr("a.txt"),
			want:     "Found 2 matches\n\na.txt\nLine 1: needle one\nLine 3: needle two",
			wantMeta: []FileMatches{{Path: "a.txt", Matches: []Match{{1, "needle one"}, {3, "needle two"}}}},
		},
		{name: "singular", pattern: "package", want: "Found 1 match\n\nsub/b.go\nLine 1: package b // needle"},
		{name: "include", pattern: "needle", include: ptr("*.go"), want: "Found 1 match\n\nsub/b.go\nLine 1: package b // needle"},
		{name: "include with alternation", pattern: "needle crlf", include: ptr("*.{txt,md}"), want: "Found 1 match\n\ncrlf.txt\nLine 1: needle crlf"},
		{name: "include matching no file", pattern: "needle", include: ptr("*.zzz"), want: "No matches found"},
		{name: "gitignore applies", pattern: "ignored", want: "No matches found"},
		{name: "hidden files skipped", pattern: "hidden", want: "No matches found"},
		{name: "not valid UTF-8", pattern: "needle", path: ptr("latin1.txt"), want: "Found 1 match\n\nlatin1.txt\nLine 1: (line is not valid UTF-8)"},
		{name: "long line cut on a rune", pattern: "é+needle", want: "Found 1 match\n\nlong.txt\nLine 1: " + strings.Repeat("é", 1000) + " (line truncated)"},
		{name: "leading dashes are a pattern", pattern: "--files", want: "Found 1 match\n\ndash.txt\nLine 1: --files"},
		{name: "whitespace pattern is allowed", pattern: " ", path: ptr("sub/b.go"), want: "Found 1 match\n\nsub/b.go\nLine 1: package b // needle"},
		{name: "folder path", pattern: "needle", path: ptr("sub"), want: "Found 1 match\n\nsub/b.go\nLine 1: package b // needle"},
		{name: "session cwd", cwd: "sub", pattern: "needle", want: "Found 1 match\n\nb.go\nLine 1: package b // needle"},
		{name: "path above the session cwd", cwd: "sub", pattern: "crlf", path: ptr("../crlf.txt"), want: "Found 1 match\n\n../crlf.txt\nLine 1: needle crlf"},
		{name: "no match", pattern: "zzzz", want: "No matches found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Grep(context.Background(), w.fsys, w.cwd(tt.cwd), tt.pattern, tt.path, tt.include)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Output)
			meta, ok := res.Metadata.(MatchesMeta)
			require.True(t, ok)
			assert.Equal(t, "matches", meta.Shape)
			assert.False(t, meta.Truncated)
			if tt.wantMeta != nil {
				assert.Equal(t, tt.wantMeta, meta.Files)
			}
			if tt.want == "No matches found" {
				assert.Equal(t, []FileMatches{}, meta.Files)
			}
		})
	}
}

// rg applies .gitignore only inside a git work tree (a .git folder at or
// above the search), but .ignore files always.
func TestGrepIgnoreFiles(t *testing.T) {
	requireRg(t)
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"gitignore without .git is not applied", map[string]string{".gitignore": "a.txt\n"}, "Found 1 match\n\na.txt\nLine 1: hit"},
		{"gitignore inside a git tree", map[string]string{".gitignore": "a.txt\n", ".git/HEAD": ""}, "No matches found"},
		{"nested gitignore inside a git tree", map[string]string{"sub/.gitignore": "b.txt\n", "sub/b.txt": "hit\n", ".git/HEAD": "", ".gitignore": "a.txt\n"}, "No matches found"},
		{".ignore always", map[string]string{".ignore": "a.txt\n"}, "No matches found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t)
			w.write("a.txt", "hit\n")
			for rel, content := range tt.files {
				w.write(rel, content)
			}
			res, err := New(Config{}).Grep(context.Background(), w.fsys, w.cwd(""), "hit", nil, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Output)
		})
	}
}

func TestGrepGroupsFilesInRgOrder(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write("a.txt", "x1\nx2\n")
	w.write("b.txt", "x3\n")
	res, err := New(Config{}).Grep(context.Background(), w.fsys, w.cwd(""), "x", nil, nil)
	require.NoError(t, err)
	// rg searches in parallel: either file may come first.
	assert.Contains(t, []string{
		"Found 3 matches\n\na.txt\nLine 1: x1\nLine 2: x2\n\nb.txt\nLine 1: x3",
		"Found 3 matches\n\nb.txt\nLine 1: x3\n\na.txt\nLine 1: x1\nLine 2: x2",
	}, res.Output)
	assert.Equal(t, 3, res.Metadata.(MatchesMeta).Total)
}

func TestHostilePatternsStaySingleArguments(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write("file.txt", "plain\n")
	s := New(Config{})
	hostile := []string{
		"-rf", "--files", "--pre=touch", "$(touch pwned)", "`touch pwned`", `"; touch pwned; "`,
		"'$(touch pwned)'", "a\ntouch pwned", "; rm -rf . #", "|| touch pwned",
	}
	for _, p := range hostile {
		t.Run(p, func(t *testing.T) {
			// Each call either runs as a plain search or is refused as a
			// pattern; never as a flag, never through a shell.
			res, err := s.Glob(context.Background(), w.fsys, w.cwd(""), p, nil)
			if err == nil {
				assert.Equal(t, "No files found", res.Output)
			} else {
				requireCode(t, err, fault.CodeSearchInvalidPattern)
			}
			res, err = s.Grep(context.Background(), w.fsys, w.cwd(""), p, nil, nil)
			if err == nil {
				assert.Contains(t, []string{"No matches found", "Found 1 match\n\nfile.txt\nLine 1: plain"}, res.Output)
			} else {
				requireCode(t, err, fault.CodeSearchInvalidPattern)
			}
			res, err = s.Grep(context.Background(), w.fsys, w.cwd(""), "plain", nil, ptr("x"+p))
			if err == nil {
				assert.Equal(t, "No matches found", res.Output)
			} else {
				requireCode(t, err, fault.CodeInvalidArgument) // a comma list
			}
			entries, err := os.ReadDir(w.root)
			require.NoError(t, err)
			require.Len(t, entries, 1, "a hostile pattern created something")
		})
	}
}

func TestRgErrors(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write("a.txt", "x\n")
	s := New(Config{})
	ctx := context.Background()
	tests := []struct {
		name    string
		run     func() error
		code    fault.Code
		message string
	}{
		{
			name: "invalid regex", code: fault.CodeSearchInvalidPattern,
			run:     func() error { _, err := s.Grep(ctx, w.fsys, w.cwd(""), "(", nil, nil); return err },
			message: "grep pattern rejected by ripgrep: regex parse error:",
		},
		{
			name: "invalid glob", code: fault.CodeSearchInvalidPattern,
			run:     func() error { _, err := s.Glob(ctx, w.fsys, w.cwd(""), "[", nil); return err },
			message: "glob pattern rejected by ripgrep: error parsing glob '[': unclosed character class; missing ']'",
		},
		{
			name: "invalid include", code: fault.CodeSearchInvalidPattern,
			run:     func() error { _, err := s.Grep(ctx, w.fsys, w.cwd(""), "x", nil, ptr("{a")); return err },
			message: "grep pattern rejected by ripgrep: error parsing glob '{a'",
		},
		{
			name: "newline in a regex", code: fault.CodeSearchInvalidPattern,
			run:     func() error { _, err := s.Grep(ctx, w.fsys, w.cwd(""), "a\nb", nil, nil); return err },
			message: "grep pattern rejected by ripgrep: the literal '\"\\n\"' is not allowed in a regex",
		},
		{
			name: "missing path, grep", code: fault.CodeSearchFailed,
			run:     func() error { _, err := s.Grep(ctx, w.fsys, w.cwd(""), "x", ptr("nope"), nil); return err },
			message: "grep search failed (exit 2): nope: No such file or directory (os error 2)",
		},
		{
			name: "missing path, glob", code: fault.CodeSearchFailed,
			run:     func() error { _, err := s.Glob(ctx, w.fsys, w.cwd(""), "*", ptr("gone/deeper")); return err },
			message: "glob search failed (exit 2): gone/deeper: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			se := requireCode(t, tt.run(), tt.code)
			assert.True(t, strings.HasPrefix(se.Message, tt.message), se.Message)
		})
	}
}

func TestPathOutsideTheRoot(t *testing.T) {
	requireRg(t)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o644))
	w := newWorkspace(t)
	w.write("sub/a.txt", "secret\n")
	require.NoError(t, os.Symlink(outside, filepath.Join(w.root, "out")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(w.root, "sub/leak.txt")))
	s := New(Config{})
	tests := []struct {
		name, cwd, path, display string
	}{
		{"dot-dot", "", "../x", filepath.Join(filepath.Dir(w.root), "x")},
		{"dot-dot from a sub cwd", "sub", "../../", filepath.Dir(w.root)},
		{"absolute elsewhere", "", outside, outside},
		{"symlink to outside", "", "out", filepath.Join(w.root, "out")},
		{"through a symlink to outside", "sub", "../out/secret.txt", filepath.Join(w.root, "out/secret.txt")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := `cannot search "` + tt.display + `": outside the workspace root`
			_, err := s.Glob(context.Background(), w.fsys, w.cwd(tt.cwd), "*", ptr(tt.path))
			require.Equal(t, fault.CodeSandboxDenied, fault.CodeOf(err))
			assert.Equal(t, want, err.Error())
			_, err = s.Grep(context.Background(), w.fsys, w.cwd(tt.cwd), "secret", ptr(tt.path), nil)
			require.Equal(t, fault.CodeSandboxDenied, fault.CodeOf(err))
			assert.Equal(t, want, err.Error())
		})
	}
	t.Run("other resolve errors come back as is", func(t *testing.T) {
		_, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "x", ptr("sub/a.txt/deeper"), nil)
		require.Equal(t, fault.CodeNotFound, fault.CodeOf(err))
		assert.Equal(t, `cannot resolve "`+filepath.Join(w.root, "sub/a.txt/deeper")+`": a parent path segment is not a directory`, err.Error())
	})
	t.Run("symlinks inside the tree are not followed", func(t *testing.T) {
		res, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "secret", nil, nil)
		require.NoError(t, err)
		assert.Equal(t, "Found 1 match\n\nsub/a.txt\nLine 1: secret", res.Output)
		res, err = s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
		require.NoError(t, err)
		assert.Equal(t, "sub/a.txt", res.Output)
	})
}

func TestRgMissing(t *testing.T) {
	w := newWorkspace(t)
	t.Setenv("PATH", t.TempDir())
	for name, s := range map[string]*Searcher{
		"not on PATH":       New(Config{}),
		"configured absent": New(Config{RgPath: "/nonexistent/rg"}),
	} {
		t.Run(name, func(t *testing.T) {
			assert.False(t, s.Available())
			_, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
			se := requireCode(t, err, fault.CodeSearchFailed)
			assert.Equal(t, "glob could not start its search command (ripgrep launch failed)", se.Message)
			_, err = s.Grep(context.Background(), w.fsys, w.cwd(""), "x", nil, nil)
			se = requireCode(t, err, fault.CodeSearchFailed)
			assert.Equal(t, "grep could not start its search command (ripgrep launch failed)", se.Message)
		})
	}
}

func TestUnusableCwd(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	tests := []struct {
		name string
		cwd  fs.Target
	}{
		{"deleted folder", fs.Target{Key: fs.TargetKey(filepath.Join(w.root, "gone")), Display: filepath.Join(w.root, "gone")}},
		{"zero target (never the server's own cwd)", fs.Target{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{}).Grep(context.Background(), w.fsys, tt.cwd, "x", nil, nil)
			se := requireCode(t, err, fault.CodeSearchFailed)
			assert.Equal(t, "grep could not start its search command (ripgrep launch failed)", se.Message)
		})
	}
}

// A FIFO (or socket, or device) as the search path is refused before rg
// runs: rg would block on it and hold a slot until the timeout.
func TestPathNeitherFileNorFolder(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(w.root, "fifo"), 0o644))
	require.NoError(t, os.Symlink("fifo", filepath.Join(w.root, "link-to-fifo")))
	s := New(Config{Timeout: 20 * time.Second})
	for _, p := range []string{"fifo", "link-to-fifo"} {
		start := time.Now()
		_, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "x", ptr(p), nil)
		require.Equal(t, fault.CodeNotRegularFile, fault.CodeOf(err))
		assert.Equal(t, `cannot search "`+filepath.Join(w.root, p)+`": not a regular file or folder`, err.Error())
		_, err = s.Glob(context.Background(), w.fsys, w.cwd(""), "*", ptr(p))
		require.Equal(t, fault.CodeNotRegularFile, fault.CodeOf(err))
		assert.Less(t, time.Since(start), 2*time.Second)
	}
}

// hangingRg is a stand-in for an rg that never finishes (the real one
// cannot be made to hang: a FIFO path is refused). It runs unconfined, as
// the sandbox lets only the real rg start.
func hangingRg(t *testing.T, cfg Config) *Searcher {
	cfg.RgPath = fakeRg(t, "exec sleep 60")
	return newSearcher(cfg)
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	w := newWorkspace(t)
	s := hangingRg(t, Config{Timeout: 200 * time.Millisecond})
	var pid atomic.Int64
	s.onStart = func(p int) { pid.Store(int64(p)) }
	start := time.Now()
	_, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "x", nil, nil)
	se := requireCode(t, err, fault.CodeSearchAborted)
	assert.Equal(t, "grep was aborted before completion (tool timeout or caller cancellation)", se.Message)
	assert.Less(t, time.Since(start), 5*time.Second)
	requireGroupGone(t, int(pid.Load()))
}

func TestCallerCancellation(t *testing.T) {
	w := newWorkspace(t)
	s := hangingRg(t, Config{})
	started := make(chan int, 1)
	s.onStart = func(p int) { started <- p }
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := s.Grep(ctx, w.fsys, w.cwd(""), "x", nil, nil)
	requireCode(t, err, fault.CodeSearchAborted)

	t.Run("already cancelled", func(t *testing.T) {
		_, err := s.Glob(ctx, w.fsys, w.cwd(""), "*", nil)
		se := requireCode(t, err, fault.CodeSearchAborted)
		assert.Equal(t, "glob was aborted before completion (tool timeout or caller cancellation)", se.Message)
	})
}

func TestMaxConcurrentQueuesCallers(t *testing.T) {
	requireRg(t)
	rg, err := exec.LookPath("rg")
	require.NoError(t, err)
	w := newWorkspace(t)
	w.write("a.txt", "x\n")
	w.write("hang.txt", "x\n")
	// rg, except that searching hang.txt never finishes.
	s := newSearcher(Config{RgPath: fakeRg(t, `case "$*" in *hang.txt*) exec sleep 60;; esac; exec `+rg+` "$@"`), MaxConcurrent: 1, Timeout: 10 * time.Second})
	started := make(chan int, 2)
	s.onStart = func(p int) { started <- p }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocked := make(chan error, 1)
	go func() {
		_, err := s.Grep(ctx, w.fsys, w.cwd(""), "x", ptr("hang.txt"), nil)
		blocked <- err
	}()
	<-started // the only slot is taken by an rg that never finishes

	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	_, err = s.Grep(short, w.fsys, w.cwd(""), "x", ptr("a.txt"), nil)
	requireCode(t, err, fault.CodeSearchAborted)
	assert.Empty(t, started, "a second rg started beyond MaxConcurrent")

	cancel()
	requireCode(t, <-blocked, fault.CodeSearchAborted)
	res, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "x", ptr("a.txt"), nil)
	require.NoError(t, err, "the slot was not released")
	assert.Equal(t, "Found 1 match\n\na.txt\nLine 1: x", res.Output)
}

func TestRawOutputOverflow(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	for i := range 200 {
		w.write(fmt.Sprintf("f%03d.txt", i), strings.Repeat("x\n", 20))
	}
	s := New(Config{})
	s.rawMax = 1000
	var pid atomic.Int64
	s.onStart = func(p int) { pid.Store(int64(p)) }
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"glob", func() error { _, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil); return err },
			"glob produced more raw output than the subprocess seam retained within the 1000-byte cap; narrow pattern, path, or include and retry"},
		{"grep", func() error { _, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "x", nil, nil); return err },
			"grep produced more raw output than the subprocess seam retained within the 1000-byte cap; narrow pattern, path, or include and retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			se := requireCode(t, tt.run(), fault.CodeSearchOverflow)
			assert.Equal(t, tt.want, se.Message)
			requireGroupGone(t, int(pid.Load()))
		})
	}
}

func TestGlobCap(t *testing.T) {
	requireRg(t)
	s := New(Config{})
	footer := func(k, n int, basis string) string {
		return fmt.Sprintf("\n\n(Showing %d of %d paths%s The complete result could not be saved; narrow pattern or path to see more.)", k, n, basis)
	}
	t.Run("sampled across top-level entries", func(t *testing.T) {
		w := newWorkspace(t)
		// big/ holds 150 old files; two small folders and a top-level file are newer.
		for i := range 150 {
			rel := fmt.Sprintf("big/f%03d.txt", i)
			w.write(rel, "")
			w.age(rel, 1900+i)
		}
		for i, rel := range []string{"small/a.txt", "small/b.txt", "other/c.txt", "top.txt"} {
			w.write(rel, "")
			w.age(rel, 2060+i)
		}
		// rg sorts siblings by mtime as it walks, so folders need ages too.
		w.age("big", 1)
		w.age("small", 2)
		w.age("other", 3)
		res, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*.txt", nil)
		require.NoError(t, err)
		// Round 0 takes one of each entry, round 1 the second small file,
		// then big/ fills the page; the page keeps rg's (mtime) order.
		var page []string
		for i := range 96 {
			page = append(page, fmt.Sprintf("big/f%03d.txt", i))
		}
		page = append(page, "small/a.txt", "small/b.txt", "other/c.txt", "top.txt")
		want := strings.Join(page, "\n") + footer(100, 154,
			", sampled across 4 of the 4 top-level entries this pattern matched instead of taken in modification-time order.")
		assert.Equal(t, want, res.Output)
		assert.Equal(t, PathsMeta{Shape: "paths", Paths: page, Truncated: true, Total: 154}, res.Metadata)
	})
	t.Run("flat result is the head", func(t *testing.T) {
		w := newWorkspace(t)
		var paths []string
		for i := range 120 {
			rel := fmt.Sprintf("f%03d.txt", i)
			w.write(rel, "")
			w.age(rel, 1900+i)
			paths = append(paths, rel)
		}
		res, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
		require.NoError(t, err)
		assert.Equal(t, strings.Join(paths[:100], "\n")+footer(100, 120, "."), res.Output)
		meta := res.Metadata.(PathsMeta)
		assert.True(t, meta.Truncated)
		assert.Equal(t, 120, meta.Total)
	})
	t.Run("more entries than the cap", func(t *testing.T) {
		w := newWorkspace(t)
		w.write("dir/a.txt", "")
		w.write("dir/b.txt", "")
		w.age("dir/a.txt", 1800)
		w.age("dir/b.txt", 1801)
		w.age("dir", 1802)
		var tops []string
		for i := range 110 {
			rel := fmt.Sprintf("f%03d.txt", i)
			w.write(rel, "")
			w.age(rel, 1900+i)
			tops = append(tops, rel)
		}
		res, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
		require.NoError(t, err)
		want := strings.Join(append([]string{"dir/a.txt"}, tops[:99]...), "\n") + footer(100, 112,
			", sampled across 100 of the 111 top-level entries this pattern matched instead of taken in modification-time order. Narrow path to inspect a specific subtree.")
		assert.Equal(t, want, res.Output)
	})
}

func TestGrepCap(t *testing.T) {
	requireRg(t)
	w := newWorkspace(t)
	w.write("many.txt", strings.Repeat("hit\n", 260))
	res, err := New(Config{}).Grep(context.Background(), w.fsys, w.cwd(""), "hit", nil, nil)
	require.NoError(t, err)
	var lines []string
	var matches []Match
	for i := 1; i <= 250; i++ {
		lines = append(lines, fmt.Sprintf("Line %d: hit", i))
		matches = append(matches, Match{LineNumber: i, Line: "hit"})
	}
	want := "Found 250 of 260 matches\n\nmany.txt\n" + strings.Join(lines, "\n") +
		"\n\n(The complete result could not be saved; narrow pattern, path, or include to see more.)"
	assert.Equal(t, want, res.Output)
	assert.Equal(t, MatchesMeta{Shape: "matches", Files: []FileMatches{{Path: "many.txt", Matches: matches}}, Truncated: true, Total: 260}, res.Metadata)
}

func TestFakeRgFailures(t *testing.T) {
	w := newWorkspace(t)
	tests := []struct {
		name   string
		script string
		code   fault.Code
		want   string
	}{
		{"killed by a signal", "kill -SEGV $$", fault.CodeSearchFailed, "grep search command was killed by signal SIGSEGV"},
		{"other exit with stderr", "echo '  boom  ' >&2; exit 3", fault.CodeSearchFailed, "grep search failed (exit 3): boom"},
		{"other exit without stderr", "exit 4", fault.CodeSearchFailed, "grep search failed (exit 4)"},
		{"stderr over its cap", "head -c 70000 /dev/zero | tr '\\0' e >&2; exit 2", fault.CodeSearchFailed,
			"grep search failed (exit 2): " + strings.Repeat("e", StderrMaxBytes) + " [stderr truncated]"},
		{"stderr cut inside a character", "head -c 65535 /dev/zero | tr '\\0' e >&2; printf '\\303\\251' >&2; exit 2", fault.CodeSearchFailed,
			"grep search failed (exit 2): " + strings.Repeat("e", StderrMaxBytes-1) + "\uFFFD [stderr truncated]"},
		{"malformed output", "echo '{\"type\":\"match\"}'", fault.CodeSearchFailed, "grep received malformed ripgrep --json output (a match record has no data)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSearcher(Config{RgPath: fakeRg(t, tt.script)})
			_, err := s.Grep(context.Background(), w.fsys, w.cwd(""), "x", nil, nil)
			se := requireCode(t, err, tt.code)
			assert.Equal(t, tt.want, se.Message)
		})
	}
}

// rg starts with an empty environment, confined or not: nothing of the
// server's own (its token) reaches it.
func TestRgGetsNoEnvironment(t *testing.T) {
	t.Setenv("TOOLFS_TOKEN", "s3cret-token")
	w := newWorkspace(t)
	s := newSearcher(Config{RgPath: fakeRg(t, "exec env")})
	res, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
	require.NoError(t, err)
	assert.NotContains(t, res.Output, "s3cret-token")
	assert.NotContains(t, res.Output, "HOME=")
}

func TestStragglersInTheGroupAreKilled(t *testing.T) {
	w := newWorkspace(t)
	// The fake rg exits at once but leaves a child holding stdout open.
	s := newSearcher(Config{RgPath: fakeRg(t, "sleep 60 &\nexit 1")})
	var pid atomic.Int64
	s.onStart = func(p int) { pid.Store(int64(p)) }
	start := time.Now()
	res, err := s.Glob(context.Background(), w.fsys, w.cwd(""), "*", nil)
	require.NoError(t, err)
	assert.Equal(t, "No files found", res.Output)
	assert.Less(t, time.Since(start), 5*time.Second)
	requireGroupGone(t, int(pid.Load()))
}

func TestMalformedJSON(t *testing.T) {
	tests := []struct {
		name, line, detail string
	}{
		{"not JSON", `{"type":`, "a line is not JSON"},
		{"truncated non-match record", `{"type":"end","data":{"path":`, "a line is not JSON"},
		{"not an object", `[1,2]`, "a record is not an object"},
		{"no data", `{"type":"match"}`, "a match record has no data"},
		{"null data", `{"type":"match","data":null}`, "a match record has no data"},
		{"no path", `{"type":"match","data":{"lines":{"text":"x"},"line_number":1}}`, "a match record has no path text"},
		{"empty path", `{"type":"match","data":{"path":{},"lines":{"text":"x"},"line_number":1}}`, "a match record has no path text"},
		{"no line number", `{"type":"match","data":{"path":{"text":"a"},"lines":{"text":"x"}}}`, "a match record has no line number"},
		{"null line number", `{"type":"match","data":{"path":{"text":"a"},"lines":{"text":"x"},"line_number":null}}`, "a match record has no line number"},
		{"no lines", `{"type":"match","data":{"path":{"text":"a"},"line_number":1}}`, "a match record has no line content"},
		{"empty lines", `{"type":"match","data":{"path":{"text":"a"},"lines":{},"line_number":1}}`, "a match record has neither line text nor bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := matchAccumulator{max: 10, lineMax: 100}
			err := a.consume(strings.NewReader(`{"type":"begin","data":{"path":{"text":"a"}}}` + "\n" + tt.line + "\n"))
			se := requireCode(t, err, fault.CodeSearchFailed)
			assert.Equal(t, "grep received malformed ripgrep --json output ("+tt.detail+")", se.Message)
		})
	}
}

func TestMatchRecords(t *testing.T) {
	a := matchAccumulator{max: 2, lineMax: 8, cwd: "/w"}
	stream := strings.Join([]string{
		`{"type":"summary","data":{"elapsed_total":{}}}`,
		``,
		`{"type":"match","data":{"path":{"text":"/w/a.txt"},"lines":{"text":"aéaéaéa\r\n"},"line_number":7}}`,
		`{"type":"match","data":{"path":{"bytes":"/3gudHh0"},"lines":{"bytes":"6Q=="},"line_number":2}}`,
		`{"type":"match","data":{"path":{"text":"c.txt"},"lines":{"text":"x"},"line_number":1}}`,
	}, "\n")
	require.NoError(t, a.consume(strings.NewReader(stream)))
	assert.Equal(t, 3, a.seen)
	assert.Equal(t, []FileMatches{
		{Path: "a.txt", Matches: []Match{{7, "aéaéa (line truncated)"}}},
		{Path: "\uFFFDx.txt", Matches: []Match{{2, "(line is not valid UTF-8)"}}},
	}, a.files)
}

func TestSampleAcrossTopLevel(t *testing.T) {
	tests := []struct {
		name          string
		paths         []string
		root          string
		max           int
		want          []string
		shown, groups int
	}{
		{"round robin keeps rg order", []string{"a/1", "a/2", "a/3", "b/1", "c/1"}, "", 3, []string{"a/1", "b/1", "c/1"}, 3, 3},
		{"exhausted groups are skipped", []string{"a/1", "b/1", "a/2", "a/3", "a/4"}, "", 4, []string{"a/1", "b/1", "a/2", "a/3"}, 0, 2},
		{"flat result is the head", []string{"x", "y", "z"}, "", 2, []string{"x", "y"}, 0, 3},
		{"grouped below the root", []string{"src/a/1", "src/a/2", "src/b/1"}, "src", 2, []string{"src/a/1", "src/b/1"}, 2, 2},
		{"unreachable entries", []string{"a/1", "a/2", "b", "c", "d"}, "", 3, []string{"a/1", "b", "c"}, 3, 4},
		{"absolute paths", []string{"/r/a/1", "/r/a/2", "/r/b"}, "/r", 2, []string{"/r/a/1", "/r/b"}, 2, 2},
		{"parent root", []string{"../x/a/1", "../x/a/2", "../x/b"}, "../x", 2, []string{"../x/a/1", "../x/b"}, 2, 2},
		{"backslash is a name character", []string{`a\b/1`, `a\b/2`, `a\c`}, "", 2, []string{`a\b/1`, `a\c`}, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, shown, groups := sampleAcrossTopLevel(tt.paths, tt.root, tt.max)
			assert.Equal(t, tt.want, page)
			assert.Equal(t, tt.shown, shown)
			assert.Equal(t, tt.groups, groups)
		})
	}
	t.Run("many groups", func(t *testing.T) {
		paths := make([]string, 200_000)
		for i := range paths {
			paths[i] = fmt.Sprintf("d%d/f", i)
		}
		paths[1] = "d0/g"
		page, shown, groups := sampleAcrossTopLevel(paths, "", 100)
		assert.Len(t, page, 100)
		assert.Equal(t, 100, shown)
		assert.Equal(t, 199_999, groups)
	})
}

func TestMetadataIsBounded(t *testing.T) {
	s := New(Config{})
	s.metaMax = 200
	paths := make([]string, 50)
	for i := range paths {
		paths[i] = fmt.Sprintf("dir/file-%02d.txt", i)
	}
	pm := s.boundPaths(PathsMeta{Shape: "paths", Paths: paths, Truncated: true, Total: 500})
	b, err := json.Marshal(pm)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), 200)
	assert.Equal(t, paths[:len(pm.Paths)], pm.Paths)
	assert.Greater(t, len(pm.Paths), 5)
	assert.True(t, pm.Truncated)
	assert.Equal(t, 500, pm.Total)
	// One more path would not have fitted.
	pm.Paths = paths[:len(pm.Paths)+1]
	b, err = json.Marshal(pm)
	require.NoError(t, err)
	assert.Greater(t, len(b), 200)

	t.Run("a single oversized item is kept", func(t *testing.T) {
		big := FileMatches{Path: "a", Matches: []Match{{1, strings.Repeat("x", 500)}}}
		mm := s.boundMatches(MatchesMeta{Shape: "matches", Files: []FileMatches{big, {Path: "b"}}, Total: 2})
		assert.Equal(t, []FileMatches{big}, mm.Files)
	})
}

func TestCwdRelative(t *testing.T) {
	tests := []struct{ p, cwd, want string }{
		{"/w/a/b", "/w", "a/b"},
		{"/w", "/w", "."},
		{"/wx/a", "/w", "/wx/a"},
		{"rel/a", "/w", "rel/a"},
		{"/a", "/", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.p, func(t *testing.T) {
			assert.Equal(t, tt.want, cwdRelative(tt.p, tt.cwd))
		})
	}
}

// TestVanished: which of rg's complaints say the tree changed under its
// walk (docs/search.md): a path below the folder searched that was not
// found, not a folder, or a symlink loop; never the path argument itself,
// nor a refused open.
func TestVanished(t *testing.T) {
	for _, tc := range []struct {
		arg, line string
		want      bool
	}{
		{"", "./d/sub: IO error for operation on ./d/sub: No such file or directory (os error 2)", true},
		{"", "d/inside.txt: No such file or directory (os error 2)", true},
		{"", "./d: Not a directory (os error 20)", true},
		{"", "./d/x: Too many levels of symbolic links (os error 40)", true},
		{"", "rg: ./d/sub: No such file or directory (os error 2)", true},
		{"", "a name: with a colon: No such file or directory (os error 2)", true},
		{"", ".: No such file or directory (os error 2)", false},
		{"", "../x: No such file or directory (os error 2)", false},
		{"", "/elsewhere/x: No such file or directory (os error 2)", false},
		{"", "./d: Permission denied (os error 13)", false},
		{"", "./d: IO error for operation on ./d: Permission denied (os error 13)", false},
		{"", "No files were searched, which means ripgrep probably applied a filter you didn't expect.", false},
		{"", "./.ignore: line 1: error parsing glob '[': unclosed character class; missing ']'", false},
		{"d", "d/sub: IO error for operation on d/sub: No such file or directory (os error 2)", true},
		{"d", "d: No such file or directory (os error 2)", false},
		{"d", "dd/x: No such file or directory (os error 2)", false},
		{"nope", "nope: No such file or directory (os error 2)", false},
		{"gone/deeper", "gone/deeper: IO error for operation on gone/deeper: No such file or directory (os error 2)", false},
		{"../up", "../up/x: No such file or directory (os error 2)", true},
		{"/w/root", "/w/root/d/sub: IO error for operation on /w/root/d/sub: Not a directory (os error 20)", true},
		{"/w/root", "/w/root: No such file or directory (os error 2)", false},
		{"/w/root", "/w/rootx/d: No such file or directory (os error 2)", false},
	} {
		assert.Equal(t, tc.want, place{arg: tc.arg}.vanished(tc.line), "arg %q: %s", tc.arg, tc.line)
	}
}

// TestTreeChangedUnderTheWalk: rg exits 2 when entries its walk listed are
// gone when it opens them, and still prints what it found. Those entries
// are left out of a successful answer; any other complaint still fails the
// search, and a missing path argument is the original's failure.
func TestTreeChangedUnderTheWalk(t *testing.T) {
	w := newWorkspace(t)
	w.write("a.txt", "hit\n")
	match := `printf '%s\n' '{"type":"match","data":{"path":{"text":"a.txt"},"lines":{"text":"hit\n"},"line_number":1}}'`
	gone := strings.Repeat("./d/sub: IO error for operation on ./d/sub: No such file or directory (os error 2)\n", 1000) // past the stderr cap
	for _, tc := range []struct {
		name, tool, script string
		path               *string
		want               string
		code               fault.Code
	}{
		{"glob: a folder gone", "glob", "echo a.txt; echo './d/sub: IO error for operation on ./d/sub: No such file or directory (os error 2)' >&2; exit 2", nil, "a.txt", ""},
		{"glob: more gone than the stderr cap holds", "glob", "echo a.txt; printf '" + gone + "' >&2; exit 2", nil, "a.txt", ""},
		{"grep: files and folders gone", "grep", match + "; printf 'd/inside.txt: No such file or directory (os error 2)\\n./e: Not a directory (os error 20)\\nrg: ./f: Too many levels of symbolic links (os error 40)\\n' >&2; exit 2", nil,
			"Found 1 match\n\na.txt\nLine 1: hit", ""},
		{"grep: only gone entries", "grep", "echo 'd/inside.txt: No such file or directory (os error 2)' >&2; exit 2", nil, "No matches found", ""},
		{"grep: another complaint fails, without the gone entries", "grep", match + "; printf './d/sub: No such file or directory (os error 2)\\nd/a.txt: Permission denied (os error 13)\\n' >&2; exit 2", nil,
			"grep search failed (exit 2): d/a.txt: Permission denied (os error 13)", fault.CodeSearchFailed},
		{"grep: the path argument missing", "grep", "echo 'nope: No such file or directory (os error 2)' >&2; exit 2", ptr("nope"),
			"grep search failed (exit 2): nope: No such file or directory (os error 2)", fault.CodeSearchFailed},
		{"glob: gone below a path argument", "glob", "echo d/x.txt; echo 'd/sub: IO error for operation on d/sub: No such file or directory (os error 2)' >&2; exit 2", ptr("d"), "d/x.txt", ""},
		{"grep: exit 2 and no complaint", "grep", "exit 2", nil, "grep search failed (exit 2)", fault.CodeSearchFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSearcher(Config{RgPath: fakeRg(t, tc.script)})
			var res Result
			var err error
			if tc.tool == "glob" {
				res, err = s.Glob(context.Background(), w.fsys, w.cwd(""), "**", tc.path)
			} else {
				res, err = s.Grep(context.Background(), w.fsys, w.cwd(""), "hit", tc.path, nil)
			}
			if tc.code != "" {
				assert.Equal(t, tc.want, requireCode(t, err, tc.code).Message)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.Output)
		})
	}
}
