package fs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

func TestNewLocal(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	tests := []struct {
		name, root string
		opts       LocalOptions
		wantErr    string
	}{
		{name: "folder", root: dir},
		{name: "missing", root: filepath.Join(dir, "nope"), wantErr: "no such file or directory"},
		{name: "file", root: file, wantErr: "is not a directory"},
		{name: "negative diff limit", root: dir, opts: LocalOptions{DiffBasisMaxBytes: -1}, wantErr: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLocal(tt.root, tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.EqualValues(t, DefaultDiffBasisMaxBytes, l.diffMax)
			require.NoError(t, l.Close())
		})
	}
}

func TestResolve(t *testing.T) {
	tree := []string{
		"a/f.txt",
		"a/sub/",
		"alias => a",
		"abs => $ROOT/a/f.txt",
		"absdir => $ROOT/a",
		"esc => $OUT/secret.txt",
		"escrel => ../out/secret.txt",
		"escdir => ../out",
		"dangout => ../out/missing.txt",
		"dangabs => /nonexistent/toolfs/missing",
		"dang => nothing.txt",
		"c1 => c2",
		"c2 => a/c3",
		"a/c3 => ../../out",
		"loop1 => loop2",
		"loop2 => loop1",
		"a/up => ..",
		"a/upup => ../..",
		"trick => missing/../../out/x",
	}
	long := strings.Repeat("n", 300)
	tests := []struct {
		name, op, cwd, path string
		wantDisplay         string // root-relative; "" = same as want key unless error
		wantKey             string // root-relative real path
		wantCode            fault.Code
		wantMsg             string // $ROOT / $BASE expand
	}{
		{name: "relative file", path: "a/f.txt", wantKey: "a/f.txt"},
		{name: "absolute inside", path: "$ROOT/a/f.txt", wantKey: "a/f.txt"},
		{name: "root itself", path: ".", wantDisplay: "", wantKey: ""},
		{name: "dotdot that stays inside", path: "a/sub/../f.txt", wantDisplay: "a/f.txt", wantKey: "a/f.txt"},
		{name: "missing with missing parents", path: "new/dir/x.txt", wantKey: "new/dir/x.txt"},
		{name: "relative cwd", cwd: "a", path: "f.txt", wantKey: "a/f.txt"},
		{name: "absolute cwd", cwd: "$ROOT/a/sub", path: "../f.txt", wantDisplay: "a/f.txt", wantKey: "a/f.txt"},
		{name: "symlinked folder keeps display", path: "alias/f.txt", wantDisplay: "alias/f.txt", wantKey: "a/f.txt"},
		{name: "missing below symlinked folder", path: "alias/new.txt", wantDisplay: "alias/new.txt", wantKey: "a/new.txt"},
		{name: "absolute symlink inside", path: "abs", wantDisplay: "abs", wantKey: "a/f.txt"},
		{name: "absolute symlinked folder inside", path: "absdir/sub", wantDisplay: "absdir/sub", wantKey: "a/sub"},
		{name: "symlink to dotdot inside", path: "a/up/a/f.txt", wantDisplay: "a/up/a/f.txt", wantKey: "a/f.txt"},
		{name: "dangling symlink inside is itself", path: "dang", wantDisplay: "dang", wantKey: "dang"},

		{name: "dotdot out", path: "../out/secret.txt", wantCode: fault.CodeSandboxDenied,
			wantMsg: `cannot read "$BASE/out/secret.txt": outside the workspace root`},
		{name: "cwd dotdot out", cwd: "..", path: "x", wantCode: fault.CodeSandboxDenied,
			wantMsg: `cannot read "$BASE/x": outside the workspace root`},
		{name: "absolute outside", op: "write", path: "/etc/passwd", wantCode: fault.CodeSandboxDenied,
			wantMsg: `cannot write "/etc/passwd": outside the workspace root`},
		{name: "absolute symlink outside", path: "esc", wantCode: fault.CodeSandboxDenied,
			wantMsg: `cannot read "$ROOT/esc": outside the workspace root`},
		{name: "relative symlink outside", path: "escrel", wantCode: fault.CodeSandboxDenied},
		{name: "symlinked folder outside", path: "escdir/secret.txt", wantCode: fault.CodeSandboxDenied},
		{name: "missing below symlinked folder outside", path: "escdir/new.txt", wantCode: fault.CodeSandboxDenied},
		{name: "dangling symlink outside", path: "dangout", wantCode: fault.CodeSandboxDenied},
		{name: "dangling absolute symlink outside", path: "dangabs", wantCode: fault.CodeSandboxDenied},
		{name: "symlink chain escaping", path: "c1/secret.txt", wantCode: fault.CodeSandboxDenied},
		{name: "symlink to the root's parent", path: "a/upup", wantCode: fault.CodeSandboxDenied},
		{name: "dotdot after a missing link target", path: "trick", wantCode: fault.CodeSandboxDenied},
		{name: "symlink loop", path: "loop1", wantCode: fault.CodeNotFound,
			wantMsg: `cannot resolve "$ROOT/loop1": too many levels of symbolic links`},
		{name: "file used as a folder", path: "a/f.txt/b", wantCode: fault.CodeNotFound,
			wantMsg: `cannot resolve "$ROOT/a/f.txt/b": a parent path segment is not a directory`},
		{name: "blank path", path: " \t", wantCode: fault.CodeNotFound, wantMsg: "file_path must be a non-empty string"},
		{name: "empty path", path: "", wantCode: fault.CodeNotFound, wantMsg: "file_path must be a non-empty string"},
		{name: "NUL byte", path: "a\x00b", wantCode: fault.CodeNotFound, wantMsg: `cannot resolve "$ROOT/a\x00b": invalid path`},
		{name: "NUL byte in cwd", cwd: "a\x00", path: "b", wantCode: fault.CodeNotFound},
		{name: "name too long", path: long, wantCode: fault.CodeNotFound,
			wantMsg: `cannot resolve "$ROOT/` + long + `": file name too long`},
	}
	f := newFixture(t, tree...)
	expand := strings.NewReplacer("$ROOT", f.root, "$BASE", f.base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := tt.op
			if op == "" {
				op = "read"
			}
			ctx, path, cwd := context.Background(), expand.Replace(tt.path), expand.Replace(tt.cwd)
			tg, err := f.l.Resolve(ctx, op, path, cwd)
			// ResolveStat answers as Resolve, then Stat of its Target.
			rtg, info, rerr := f.l.ResolveStat(ctx, op, path, cwd)
			if tt.wantCode != "" {
				requireCode(t, err, tt.wantCode, expand.Replace(tt.wantMsg))
				requireCode(t, rerr, tt.wantCode, expand.Replace(tt.wantMsg))
				return
			}
			require.NoError(t, err)
			require.NoError(t, rerr)
			assert.Equal(t, tg, rtg)
			want, err := f.l.Stat(ctx, tg)
			require.NoError(t, err)
			assert.Equal(t, want, info)
			display := tt.wantDisplay
			if display == "" && tt.name != "root itself" {
				display = tt.wantKey
			}
			assert.Equal(t, filepath.Join(f.root, display), tg.Display)
			assert.Equal(t, TargetKey(filepath.Join(f.root, tt.wantKey)), tg.Key)
		})
	}
	f.assertClean(t)
}

func TestResolveKeyStableAcrossCreation(t *testing.T) {
	f := newFixture(t, "alias => a", "a/")
	before := f.resolve(t, "write", "alias/new/deep/x.txt")
	require.NoError(t, os.MkdirAll(f.path("a/new/deep"), 0o755))
	after := f.resolve(t, "write", "alias/new/deep/x.txt")
	assert.Equal(t, before, after)
	direct := f.resolve(t, "write", "a/new/deep/x.txt")
	assert.Equal(t, before.Key, direct.Key, "aliases share a key")
}

func TestResolveRootGivenThroughSymlink(t *testing.T) {
	f := newFixture(t, "f.txt")
	alias := filepath.Join(f.base, "alias")
	require.NoError(t, os.Symlink(f.root, alias))
	l, err := NewLocal(alias, LocalOptions{})
	require.NoError(t, err)
	defer l.Close()

	tg, err := l.Resolve(context.Background(), "read", "f.txt", "")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(alias, "f.txt"), tg.Display, "display keeps the root as given")
	assert.Equal(t, TargetKey(f.path("f.txt")), tg.Key, "key is the canonical path")

	tg2, err := l.Resolve(context.Background(), "read", f.path("f.txt"), "")
	require.NoError(t, err, "the canonical spelling of the root is inside too")
	assert.Equal(t, tg.Key, tg2.Key)
}

func TestResolveCancelled(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.l.Resolve(ctx, "read", "x", "")
	requireCode(t, err, fault.CodeAborted, "resolve aborted")
}

// A Key this provider did not make is refused rather than trusted.
func TestForeignKeyRefused(t *testing.T) {
	f := newFixture(t)
	for _, key := range []string{f.out + "/secret.txt", f.root + "/../out/secret.txt", f.root + "x/y"} {
		_, err := f.l.Stat(context.Background(), Target{Key: TargetKey(key), Display: "/x"})
		requireCode(t, err, fault.CodeSandboxDenied, `cannot read "/x": outside the workspace root`)
	}
}

// The openat2 fast path and the full walk agree wherever the fast path
// answers, and it declines on every symlink.
func TestWalkFastAgreesWithFullWalk(t *testing.T) {
	f := newFixture(t, "a/b/f.txt", "a/link => b", "top.txt", "a/b/pipe |")
	paths := []struct {
		rel      string
		wantFast bool
	}{
		{"a/b/f.txt", true},
		{"top.txt", true},
		{"a/b", true},
		{"a/b/pipe", true},
		{"a/b/missing", true},
		{"a/missing/x", false},
		{"a/link/f.txt", false},
		{"a/link", false},
		{"top.txt/x", false},
	}
	for _, p := range paths {
		t.Run(p.rel, func(t *testing.T) {
			fast, ok := f.l.walkFast(p.rel)
			defer fast.close(f.l)
			require.Equal(t, p.wantFast, ok)
			if !ok {
				return
			}
			noOpenat2.Store(true)
			full, err := f.l.walk(p.rel, false)
			noOpenat2.Store(false)
			require.NoError(t, err)
			defer full.close(f.l)
			assert.Equal(t, full.kind, fast.kind)
			assert.Equal(t, full.rel, fast.rel)
			assert.Equal(t, full.name, fast.name)
			assert.Equal(t, full.st, fast.st)
		})
	}
}

// dotDotTree builds the CPU-amplification tree of docs/reliability-hostile.md
// under root: depth nested folders "a", a file f at the bottom, and beside
// it a symlink s whose target repeats "a/.." pops times before naming f. It
// returns the path of s.
func dotDotTree(tb testing.TB, root string, depth, pops int) string {
	tb.Helper()
	deep := filepath.Join(root, strings.Repeat("a/", depth)+"a")
	require.NoError(tb, os.MkdirAll(deep, 0o755))
	bottom := filepath.Dir(deep)
	require.NoError(tb, os.WriteFile(filepath.Join(bottom, "f"), []byte("x"), 0o644))
	require.NoError(tb, os.Symlink(strings.Repeat("a/../", pops)+"f", filepath.Join(bottom, "s")))
	return strings.Repeat("a/", depth) + "s"
}

// A ".." pops the folder the walk came through: the 1,900-deep tree whose
// link repeats "a/.." 800 times costs one open per folder entered (it cost
// about 1.5 million when every ".." re-walked from the root).
func TestResolveDotDotBounded(t *testing.T) {
	f := newFixture(t)
	p := dotDotTree(t, f.root, 1900, 800)
	opens := 0
	f.l.hooks.walkOpens = func(n int) { opens += n }
	tg := f.resolve(t, "read", p)
	assert.Equal(t, filepath.Join(f.root, strings.Repeat("a/", 1900)+"f"), string(tg.Key))
	assert.Equal(t, 1900+800, opens)
}

// Below the kept window (maxKeptDirs) a ".." reopens half a window from the
// root at once, so popping far down stays correct and cheap.
func TestResolveDotDotBelowKeptWindow(t *testing.T) {
	f := newFixture(t)
	deep := filepath.Join(f.root, strings.Repeat("b/", 600))
	require.NoError(t, os.MkdirAll(deep, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.root, strings.Repeat("b/", 100)+"g"), []byte("g"), 0o644))
	require.NoError(t, os.Symlink(strings.TrimSuffix(strings.Repeat("../", 500), "/")+"/g", filepath.Join(deep, "s")))
	opens := 0
	f.l.hooks.walkOpens = func(n int) { opens += n }
	tg := f.resolve(t, "read", strings.Repeat("b/", 600)+"s")
	assert.Equal(t, filepath.Join(f.root, strings.Repeat("b/", 100)+"g"), string(tg.Key))
	// 600 to go down; popping 500 levels reopens at most a few prefixes.
	assert.Less(t, opens, 600+4*600, "opens")
	info, err := f.l.Stat(context.Background(), tg)
	require.NoError(t, err)
	assert.Equal(t, TypeFile, info.Type)

	// Popping above the root is still an escape.
	require.NoError(t, os.Symlink(strings.TrimSuffix(strings.Repeat("../", 601), "/"), filepath.Join(deep, "out")))
	_, err = f.l.Resolve(context.Background(), "read", strings.Repeat("b/", 600)+"out", "")
	requireCode(t, err, fault.CodeSandboxDenied, "")
}
