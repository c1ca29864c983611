package fs

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

func TestWriteText(t *testing.T) {
	const stale = Version("0:0:0:0:0")
	current := Version("current") // replaced by the target's version
	tests := []struct {
		name, path, content string
		intent              *WriteIntent
		wantOp              Operation
		wantBefore          *string
		wantAfter           string
		wantCode            fault.Code
		wantMsg             string
	}{
		{name: "unconditional create", path: "new.txt", content: "x", wantOp: OpCreate},
		{name: "create with missing parents", path: "p/q/new.txt", content: "x", wantOp: OpCreate},
		{name: "create-only on a missing file", path: "new.txt", content: "x\r\n", intent: &WriteIntent{Kind: CreateIfAbsent}, wantOp: OpCreate},
		{name: "unconditional update", path: "f.txt", content: "new\r\n", wantOp: OpUpdate,
			wantBefore: ptr("old\nline\n"), wantAfter: "new\n"},
		{name: "replace at the read version", path: "f.txt", content: "new", intent: &WriteIntent{Kind: ReplaceIfVersion, Version: current},
			wantOp: OpUpdate, wantBefore: ptr("old\nline\n"), wantAfter: "new"},
		{name: "binary prior file has no basis", path: "bin", content: "text", wantOp: OpUpdate},
		{name: "invalid UTF-8 prior file has no basis", path: "latin1", content: "text", wantOp: OpUpdate},

		{name: "create-only on an existing file", path: "f.txt", content: "x", intent: &WriteIntent{Kind: CreateIfAbsent},
			wantCode: fault.CodeNotObserved, wantMsg: `cannot overwrite existing "$ROOT/f.txt" without reading it first`},
		{name: "replace a changed file", path: "f.txt", content: "x", intent: &WriteIntent{Kind: ReplaceIfVersion, Version: stale},
			wantCode: fault.CodeStaleVersion, wantMsg: `cannot write "$ROOT/f.txt": file changed since it was read`},
		{name: "replace a vanished file", path: "gone.txt", content: "x", intent: &WriteIntent{Kind: ReplaceIfVersion, Version: stale},
			wantCode: fault.CodeStaleVersion, wantMsg: `cannot write "$ROOT/gone.txt": file no longer exists`},
		{name: "folder, create-only: type before guard", path: "dir", content: "x", intent: &WriteIntent{Kind: CreateIfAbsent},
			wantCode: fault.CodeNotRegularFile, wantMsg: `cannot write "$ROOT/dir": not a regular file`},
		{name: "folder, unconditional", path: "dir", content: "x", wantCode: fault.CodeNotRegularFile},
		{name: "FIFO answers at once", path: "pipe", content: "x", wantCode: fault.CodeNotRegularFile,
			wantMsg: `cannot write "$ROOT/pipe": not a regular file`},
		{name: "dangling symlink", path: "dang", content: "x", intent: &WriteIntent{Kind: CreateIfAbsent}, wantCode: fault.CodeNotRegularFile},
		{name: "file used as a folder", path: "f.txt/x", content: "x", wantCode: fault.CodeNotFound,
			wantMsg: `cannot resolve "$ROOT/f.txt/x": a parent path segment is not a directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "f.txt = old\r\nline\n", "bin = a\x00b", "latin1 = caf\xe9", "dir/", "pipe |", "dang => nothing")
			var tg Target
			if strings.Contains(tt.path, "f.txt/") {
				tg = Target{Key: TargetKey(f.path(tt.path)), Display: f.path(tt.path)}
			} else {
				tg = f.resolve(t, "write", tt.path)
			}
			intent := tt.intent
			if intent != nil && intent.Version == current {
				intent = &WriteIntent{Kind: intent.Kind, Version: f.version(t, tg)}
			}
			before := readIfRegular(f.path(tt.path))

			out, err := f.l.WriteText(context.Background(), tg, tt.content, intent)
			if tt.wantCode != "" {
				requireCode(t, err, tt.wantCode, strings.ReplaceAll(tt.wantMsg, "$ROOT", f.root))
				assert.Equal(t, before, readIfRegular(f.path(tt.path)), "target touched by a failed write")
				f.assertClean(t)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantOp, out.Operation)
			assert.Equal(t, tt.content, f.read(t, tt.path))
			assert.Equal(t, f.version(t, tg), out.Version, "the returned version is the file's")
			assert.Equal(t, tt.wantBefore, out.Before)
			assert.Equal(t, tt.wantAfter, out.After)
			f.assertClean(t)
		})
	}
}

func ptr(s string) *string { return &s }

// readIfRegular reads a regular file (never a FIFO), or returns nil.
func readIfRegular(p string) []byte {
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	b, _ := os.ReadFile(p)
	return b
}

func TestWriteDiffBasisLimit(t *testing.T) {
	tests := []struct {
		name, old, content string
		wantBasis          bool
	}{
		{"both below", "1234567", "abcdefg", true},
		{"old at the limit", "12345678", "abc", false},
		{"new at the limit", "123", "abcdefgh", false},
		{"limit counts bytes, not characters", "é", "éééé", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "f.txt = "+tt.old)
			l, err := NewLocal(f.root, LocalOptions{DiffBasisMaxBytes: 8})
			require.NoError(t, err)
			defer l.Close()
			out, err := l.WriteText(context.Background(), f.resolve(t, "write", "f.txt"), tt.content, nil)
			require.NoError(t, err)
			if tt.wantBasis {
				require.NotNil(t, out.Before)
				assert.Equal(t, tt.old, *out.Before)
				assert.Equal(t, tt.content, out.After)
			} else {
				assert.Nil(t, out.Before)
				assert.Empty(t, out.After)
			}
		})
	}
}

func TestWriteModes(t *testing.T) {
	f := newFixture(t, "private.txt", "setuid.txt")
	require.NoError(t, os.Chmod(f.path("private.txt"), 0o640))
	require.NoError(t, os.Chmod(f.path("setuid.txt"), 0o4755))
	ctx := context.Background()

	_, err := f.l.WriteText(ctx, f.resolve(t, "write", "private.txt"), "x", nil)
	require.NoError(t, err)
	_, err = f.l.WriteText(ctx, f.resolve(t, "write", "setuid.txt"), "x", nil)
	require.NoError(t, err)
	_, err = f.l.WriteText(ctx, f.resolve(t, "write", "sub/new.txt"), "x", nil)
	require.NoError(t, err)

	mode := func(rel string) os.FileMode {
		fi, err := os.Stat(f.path(rel))
		require.NoError(t, err)
		return fi.Mode()
	}
	assert.Equal(t, os.FileMode(0o640), mode("private.txt"))
	assert.Equal(t, os.FileMode(0o755), mode("setuid.txt"), "setuid is dropped on rewrite")
	assert.Equal(t, 0o666&^umask(t), mode("sub/new.txt"))
	assert.Equal(t, os.ModeDir|0o777&^umask(t), mode("sub"))
}

func TestWriteThroughSymlink(t *testing.T) {
	f := newFixture(t, "real/f.txt = old", "link.txt => real/f.txt", "abslink => $ROOT/real/f.txt")
	for _, via := range []string{"link.txt", "abslink"} {
		tg := f.resolve(t, "write", via)
		out, err := f.l.WriteText(context.Background(), tg, via, &WriteIntent{Kind: ReplaceIfVersion, Version: f.version(t, tg)})
		require.NoError(t, err)
		assert.Equal(t, OpUpdate, out.Operation)
		fi, err := os.Lstat(f.path(via))
		require.NoError(t, err)
		assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link stays a link")
		assert.Equal(t, via, f.read(t, "real/f.txt"))
	}
	f.assertClean(t)
}

// A competitor creates the target between our checks and our no-replace
// publication.
func TestWriteCreateOnlyRace(t *testing.T) {
	tests := []struct {
		name     string
		linkOnly bool
		appear   func(f *fixture) error
		wantCode fault.Code
		wantMsg  string
	}{
		{name: "regular file", appear: func(f *fixture) error { return os.WriteFile(f.path("t.txt"), []byte("theirs"), 0o644) },
			wantCode: fault.CodeNotObserved, wantMsg: `cannot overwrite existing "$ROOT/t.txt" without reading it first`},
		{name: "regular file, link publication", linkOnly: true,
			appear:   func(f *fixture) error { return os.WriteFile(f.path("t.txt"), []byte("theirs"), 0o644) },
			wantCode: fault.CodeNotObserved},
		{name: "symlink to a regular file", appear: func(f *fixture) error { return os.Symlink("other.txt", f.path("t.txt")) },
			wantCode: fault.CodeNotObserved},
		{name: "folder", appear: func(f *fixture) error { return os.Mkdir(f.path("t.txt"), 0o755) },
			wantCode: fault.CodeNotRegularFile, wantMsg: `cannot write "$ROOT/t.txt": not a regular file`},
		{name: "dangling symlink", appear: func(f *fixture) error { return os.Symlink("nothing", f.path("t.txt")) },
			wantCode: fault.CodeNotRegularFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "other.txt = theirs")
			f.l.hooks.linkOnly = tt.linkOnly
			f.l.hooks.beforePublish = func() { require.NoError(t, tt.appear(f)) }
			_, err := f.l.WriteText(context.Background(), f.resolve(t, "write", "t.txt"), "mine", &WriteIntent{Kind: CreateIfAbsent})
			requireCode(t, err, tt.wantCode, strings.ReplaceAll(tt.wantMsg, "$ROOT", f.root))
			if fi, err := os.Stat(f.path("t.txt")); err == nil && fi.Mode().IsRegular() {
				assert.Equal(t, "theirs", f.read(t, "t.txt"), "the competitor's file is kept")
			}
			f.assertClean(t)
		})
	}
	t.Run("link publication without a competitor", func(t *testing.T) {
		f := newFixture(t)
		f.l.hooks.linkOnly = true
		tg := f.resolve(t, "write", "t.txt")
		out, err := f.l.WriteText(context.Background(), tg, "mine", &WriteIntent{Kind: CreateIfAbsent})
		require.NoError(t, err)
		assert.Equal(t, "mine", f.read(t, "t.txt"))
		assert.Equal(t, f.version(t, tg), out.Version)
		f.assertClean(t)
	})
}

// A writer outside our lock replaces the file while we stage ours.
func TestWriteReplaceRaceWithExternalWriter(t *testing.T) {
	f := newFixture(t, "t.txt = v1")
	tg := f.resolve(t, "write", "t.txt")
	v := f.version(t, tg)
	f.l.hooks.beforePublish = func() { require.NoError(t, os.WriteFile(f.path("t.txt"), []byte("external"), 0o644)) }
	_, err := f.l.WriteText(context.Background(), tg, "mine", &WriteIntent{Kind: ReplaceIfVersion, Version: v})
	requireCode(t, err, fault.CodeStaleVersion, "")
	assert.Equal(t, "external", f.read(t, "t.txt"))
	f.assertClean(t)
}

func TestWriteCancelled(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		early bool
	}{
		{"before the lock", "f.txt", true},
		{"after staging, existing file", "f.txt", false},
		{"after staging, new file", "new/n.txt", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "f.txt = old")
			ctx, cancel := context.WithCancel(context.Background())
			if tt.early {
				cancel()
			} else {
				f.l.hooks.beforePublish = cancel
			}
			_, err := f.l.WriteText(ctx, f.resolve(t, "write", tt.path), "new", nil)
			requireCode(t, err, fault.CodeAborted, "write aborted")
			assert.Equal(t, "old", f.read(t, "f.txt"))
			assert.NoFileExists(t, f.path("new/n.txt"))
			f.assertClean(t)
		})
	}
}

func TestConcurrentGuardedWrites(t *testing.T) {
	f := newFixture(t, "f.txt = v0")
	tg := f.resolve(t, "write", "f.txt")
	v := f.version(t, tg)
	const n = 16
	var wins, stale atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := f.l.WriteText(context.Background(), tg, string([]byte{'w', byte('a' + i)}), &WriteIntent{Kind: ReplaceIfVersion, Version: v})
			switch fault.CodeOf(err) {
			case "":
				wins.Add(1)
			case fault.CodeStaleVersion:
				stale.Add(1)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
	assert.Equal(t, int32(n-1), stale.Load())
	f.assertClean(t)
}

func TestConcurrentCreateOnly(t *testing.T) {
	f := newFixture(t)
	tg := f.resolve(t, "write", "new.txt")
	const n = 16
	var wins, refused atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := f.l.WriteText(context.Background(), tg, "x", &WriteIntent{Kind: CreateIfAbsent})
			switch fault.CodeOf(err) {
			case "":
				wins.Add(1)
			case fault.CodeNotObserved:
				refused.Add(1)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
	assert.Equal(t, int32(n-1), refused.Load())
	f.assertClean(t)
}

// mountOrSkip mounts (tmpfs, or a bind of source) on target for the test, or
// skips it with the reason: mounting needs root and a permissive container.
func mountOrSkip(t *testing.T, source, target, fstype string, flags uintptr) {
	t.Helper()
	require.NoError(t, os.MkdirAll(target, 0o755))
	if err := unix.Mount(source, target, fstype, flags, ""); err != nil {
		t.Skipf("cannot mount %s on %s (needs root and CAP_SYS_ADMIN): %v", fstype+source, target, err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
}

// A target on another mount inside the root cannot be reached by a rename
// from the private tmp folder: the file is staged beside it instead, when
// the device differs (tmpfs) and when only the rename says EXDEV (a bind
// mount of the same filesystem, where the edit's content is written again).
func TestStagedBesideOnAnotherMount(t *testing.T) {
	for _, tt := range []struct {
		name          string
		source, fstyp string
		flags         uintptr
		restages      int // publications that met EXDEV
	}{
		{"tmpfs", "none", "tmpfs", 0, 0},
		{"bind mount, same filesystem", "$BASE/elsewhere", "", unix.MS_BIND, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			source := strings.ReplaceAll(tt.source, "$BASE", f.base)
			if tt.flags&unix.MS_BIND != 0 {
				require.NoError(t, os.Mkdir(source, 0o755))
			}
			mountOrSkip(t, source, f.path("m"), tt.fstyp, tt.flags)
			restages := 0
			f.l.hooks.restaged = func() { restages++ }
			ctx := context.Background()
			tg := f.resolve(t, "write", "m/x.txt")
			_, err := f.l.WriteText(ctx, tg, "one\ntwo\n", &WriteIntent{Kind: CreateIfAbsent})
			require.NoError(t, err)
			out, err := f.l.WriteText(ctx, tg, "one\nthree\n", nil)
			require.NoError(t, err)
			assert.Equal(t, OpUpdate, out.Operation)
			v := f.version(t, tg)
			eo, err := f.l.EditText(ctx, tg, EditRequest{OldString: "three", NewString: "four"}, &v)
			require.NoError(t, err)
			require.NotNil(t, eo.After)
			assert.Equal(t, "one\nfour\n", *eo.After, "the basis of a rewritten edit holds one copy")
			assert.Equal(t, "one\nfour\n", f.read(t, "m/x.txt"))
			assert.Equal(t, tt.restages, restages)
			f.assertClean(t)
		})
	}
}

// TestReplacedFileIsReleased: a write or edit holds the file it replaces
// open across the rename and closes it after returning (see oldFile); a
// dry run and a write refused at publication close it at once. No
// descriptor may stay open, and every written file's hash is its content's.
func TestReplacedFileIsReleased(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no finalizer may close them for us
	f := newFixture(t, "f.txt = v\n")
	ctx := context.Background()
	tg := f.resolve(t, "write", "f.txt")
	_, err := f.l.WriteText(ctx, tg, "first\n", nil) // opens the private folders it keeps
	require.NoError(t, err)
	fds := func() int {
		e, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(e)
	}
	base, prev := fds(), "first\n"
	for i := range 40 {
		content := fmt.Sprintf("v%d\n", i)
		out, err := f.l.WriteText(ctx, tg, content, nil)
		require.NoError(t, err)
		assert.Equal(t, HashBytes([]byte(content)), out.Hash)
		require.NotNil(t, out.Before)
		assert.Equal(t, prev, *out.Before, "the basis is the replaced file")
		prev = content + "x\n"
		v := f.version(t, tg)
		_, err = f.l.EditText(ctx, tg, EditRequest{OldString: content, NewString: content + "x\n"}, &v)
		require.NoError(t, err)
		_, err = f.l.WriteText(ctx, tg, content, &WriteIntent{DryRun: true})
		require.NoError(t, err)
	}
	f.l.hooks.beforePublish = func() { require.NoError(t, os.WriteFile(f.path("f.txt"), []byte("theirs"), 0o644)) }
	_, err = f.l.WriteText(ctx, tg, "mine", &WriteIntent{Kind: ReplaceIfVersion, Version: f.version(t, tg)})
	requireCode(t, err, fault.CodeStaleVersion, "")
	assert.Eventually(t, func() bool { return fds() <= base }, 5*time.Second, 5*time.Millisecond,
		"descriptors: %d before, %d after", base, fds())
}
