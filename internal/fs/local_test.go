package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

func TestStat(t *testing.T) {
	f := newFixture(t,
		"a/f.txt = hello",
		"a/sub/",
		"link => a/f.txt",
		"dang => nothing",
		"pipe |",
	)
	tests := []struct {
		name, path string
		wantType   FileType
		wantSize   int64
	}{
		{name: "file", path: "a/f.txt", wantType: TypeFile, wantSize: 5},
		{name: "folder", path: "a/sub", wantType: TypeDirectory, wantSize: -1},
		{name: "root", path: ".", wantType: TypeDirectory, wantSize: -1},
		{name: "symlink followed", path: "link", wantType: TypeFile, wantSize: 5},
		{name: "FIFO", path: "pipe", wantType: TypeOther, wantSize: -1},
		{name: "missing", path: "a/nope.txt", wantType: TypeMissing, wantSize: -1},
		{name: "dangling symlink", path: "dang", wantType: TypeMissing, wantSize: -1},
	}
	versionRE := regexp.MustCompile(`^\d+:\d+:\d+:\d+:\d+$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := f.l.Stat(context.Background(), f.resolve(t, "read", tt.path))
			require.NoError(t, err)
			assert.Equal(t, tt.wantType, info.Type)
			assert.Equal(t, tt.wantSize, info.Size)
			if tt.wantType == TypeMissing {
				assert.Empty(t, info.Version)
			} else {
				assert.Regexp(t, versionRE, string(info.Version))
			}
		})
	}

	t.Run("symlink and target share a version", func(t *testing.T) {
		assert.Equal(t, f.version(t, f.resolve(t, "read", "a/f.txt")), f.version(t, f.resolve(t, "read", "link")))
	})
	t.Run("parent turned into a file after Resolve", func(t *testing.T) {
		tg := f.resolve(t, "read", "later/x.txt")
		f.build(t, "later")
		info, err := f.l.Stat(context.Background(), tg)
		require.NoError(t, err)
		assert.Equal(t, TypeMissing, info.Type)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := f.l.Stat(ctx, f.resolve(t, "read", "a/f.txt"))
		requireCode(t, err, fault.CodeAborted, "stat aborted")
	})
}

// The original's test: a same-size rewrite with mtime restored still
// changes the version (ctime and, with a rename, the inode move).
func TestVersionChangesOnSameSizeRewrite(t *testing.T) {
	f := newFixture(t, "f.txt = aaaa")
	tg := f.resolve(t, "read", "f.txt")
	fi, err := os.Stat(f.path("f.txt"))
	require.NoError(t, err)
	v1 := f.version(t, tg)

	time.Sleep(10 * time.Millisecond) // let the ctime clock tick
	require.NoError(t, os.WriteFile(f.path("f.txt"), []byte("bbbb"), 0o644))
	require.NoError(t, os.Chtimes(f.path("f.txt"), fi.ModTime(), fi.ModTime()))
	fi2, err := os.Stat(f.path("f.txt"))
	require.NoError(t, err)
	require.Equal(t, fi.ModTime(), fi2.ModTime())
	require.Equal(t, fi.Size(), fi2.Size())
	assert.NotEqual(t, v1, f.version(t, tg))
}

func TestOpenText(t *testing.T) {
	f := newFixture(t, "a/f.txt = hello\r\nworld", "a/sub/", "link => a/f.txt", "pipe |", "dang => nothing")
	tests := []struct {
		name, path string
		want       string
		wantCode   fault.Code
		wantMsg    string
	}{
		{name: "file", path: "a/f.txt", want: "hello\r\nworld"},
		{name: "through a symlink", path: "link", want: "hello\r\nworld"},
		{name: "missing", path: "a/nope", wantCode: fault.CodeNotFound, wantMsg: `cannot read "$ROOT/a/nope": not found`},
		{name: "dangling symlink", path: "dang", wantCode: fault.CodeNotFound, wantMsg: `cannot read "$ROOT/dang": not found`},
		{name: "folder", path: "a/sub", wantCode: fault.CodeNotRegularFile, wantMsg: `cannot read "$ROOT/a/sub": not a regular file`},
		{name: "FIFO answers at once", path: "pipe", wantCode: fault.CodeNotRegularFile, wantMsg: `cannot read "$ROOT/pipe": not a regular file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := f.resolve(t, "read", tt.path)
			done := make(chan struct{})
			var (
				rc   interface{ Close() error }
				info Info
				err  error
				got  string
			)
			go func() {
				defer close(done)
				r, i, e := f.l.OpenText(context.Background(), tg)
				rc, info, err = r, i, e
				if e == nil {
					got = readAll(t, r)
				}
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("OpenText blocked")
			}
			if tt.wantCode != "" {
				requireCode(t, err, tt.wantCode, strings.ReplaceAll(tt.wantMsg, "$ROOT", f.root))
				assert.Nil(t, rc)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, TypeFile, info.Type)
			assert.Equal(t, int64(len(tt.want)), info.Size)
			assert.Equal(t, f.version(t, tg), info.Version)
		})
	}

	t.Run("cancelled between reads", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r, _, err := f.l.OpenText(ctx, f.resolve(t, "read", "a/f.txt"))
		require.NoError(t, err)
		defer r.Close()
		buf := make([]byte, 2)
		_, err = r.Read(buf)
		require.NoError(t, err)
		cancel()
		_, err = r.Read(buf)
		requireCode(t, err, fault.CodeAborted, "read aborted")
	})
	t.Run("cancelled before open", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := f.l.OpenText(ctx, f.resolve(t, "read", "a/f.txt"))
		requireCode(t, err, fault.CodeAborted, "read aborted")
	})
}

// Between Resolve and use, a folder or the file itself is swapped for a
// symlink leading outside: nothing outside may be read or touched.
func TestSymlinkSwappedAfterResolve(t *testing.T) {
	ops := []struct {
		name string
		do   func(l *Local, tg Target) error
	}{
		{"stat", func(l *Local, tg Target) error { _, err := l.Stat(context.Background(), tg); return err }},
		{"open", func(l *Local, tg Target) error { _, _, err := l.OpenText(context.Background(), tg); return err }},
		{"write", func(l *Local, tg Target) error {
			_, err := l.WriteText(context.Background(), tg, "pwned", nil)
			return err
		}},
		{"edit", func(l *Local, tg Target) error {
			_, err := l.EditText(context.Background(), tg, EditRequest{OldString: "secret", NewString: "pwned"}, nil)
			return err
		}},
	}
	swaps := []struct {
		name, path string
		swap       func(f *fixture) error
	}{
		{"parent folder", "a/secret.txt", func(f *fixture) error {
			if err := os.RemoveAll(f.path("a")); err != nil {
				return err
			}
			return os.Symlink(f.out, f.path("a"))
		}},
		{"the file", "secret.txt", func(f *fixture) error {
			if err := os.Remove(f.path("secret.txt")); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(f.out, "secret.txt"), f.path("secret.txt"))
		}},
		{"the file, relative link", "secret.txt", func(f *fixture) error {
			if err := os.Remove(f.path("secret.txt")); err != nil {
				return err
			}
			return os.Symlink("../out/secret.txt", f.path("secret.txt"))
		}},
	}
	for _, sw := range swaps {
		for _, op := range ops {
			t.Run(sw.name+"/"+op.name, func(t *testing.T) {
				f := newFixture(t, "a/secret.txt = secret", "secret.txt = secret")
				tg := f.resolve(t, "write", sw.path)
				require.NoError(t, sw.swap(f))
				err := op.do(f.l, tg)
				requireCode(t, err, fault.CodeSandboxDenied, "")
				f.assertClean(t)
			})
		}
	}
}

// Between Resolve and a mutation, a name on the way is swapped for a
// symlink to elsewhere inside the root: the mutation lands at its Key or
// nowhere (walkKey), so it never touches the file the link leads to.
func TestMutationLandsAtItsKey(t *testing.T) {
	swapDir := func(f *fixture) error {
		if err := os.RemoveAll(f.path("a")); err != nil {
			return err
		}
		return os.Symlink("other", f.path("a"))
	}
	swapFile := func(f *fixture) error {
		if err := os.Remove(f.path("a/f.txt")); err != nil {
			return err
		}
		return os.Symlink("../other/f.txt", f.path("a/f.txt"))
	}
	cases := []struct {
		name, path string
		swap       func(f *fixture) error
		do         func(l *Local, tg Target) error
		want       string
	}{
		{"write over the file, folder swapped", "a/f.txt", swapDir, func(l *Local, tg Target) error {
			_, err := l.WriteText(context.Background(), tg, "pwned", nil)
			return err
		}, `cannot write "$ROOT/a/f.txt": file changed since it was read`},
		{"create, folder swapped", "a/new.txt", swapDir, func(l *Local, tg Target) error {
			_, err := l.WriteText(context.Background(), tg, "pwned", &WriteIntent{Kind: CreateIfAbsent})
			return err
		}, `cannot write "$ROOT/a/new.txt": file changed since it was read`},
		{"create with missing parents, folder swapped", "a/b/c/new.txt", swapDir, func(l *Local, tg Target) error {
			_, err := l.WriteText(context.Background(), tg, "pwned", nil)
			return err
		}, `cannot write "$ROOT/a/b/c/new.txt": file changed since it was read`},
		{"edit, folder swapped", "a/f.txt", swapDir, func(l *Local, tg Target) error {
			_, err := l.EditText(context.Background(), tg, EditRequest{OldString: "inside", NewString: "pwned"}, nil)
			return err
		}, `cannot edit "$ROOT/a/f.txt": file changed since it was read`},
		{"edit, the file swapped", "a/f.txt", swapFile, func(l *Local, tg Target) error {
			_, err := l.EditText(context.Background(), tg, EditRequest{OldString: "inside", NewString: "pwned"}, nil)
			return err
		}, `cannot edit "$ROOT/a/f.txt": file changed since it was read`},
		{"write, the file swapped", "a/f.txt", swapFile, func(l *Local, tg Target) error {
			_, err := l.WriteText(context.Background(), tg, "pwned", nil)
			return err
		}, `cannot write "$ROOT/a/f.txt": file changed since it was read`},
		{"dry run, folder swapped", "a/f.txt", swapDir, func(l *Local, tg Target) error {
			_, err := l.WriteText(context.Background(), tg, "pwned", &WriteIntent{DryRun: true})
			return err
		}, `cannot write "$ROOT/a/f.txt": file changed since it was read`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "a/f.txt = inside", "other/f.txt = inside")
			tg := f.resolve(t, "write", tc.path)
			require.NoError(t, tc.swap(f))
			err := tc.do(f.l, tg)
			requireCode(t, err, fault.CodeStaleVersion, strings.ReplaceAll(tc.want, "$ROOT", f.root))
			assert.Equal(t, "inside", f.read(t, "other/f.txt"), "the link's target is untouched")
			entries, err := os.ReadDir(f.path("other"))
			require.NoError(t, err)
			assert.Len(t, entries, 1, "nothing created beside it")
			f.assertClean(t)
		})
	}
}

func TestErrorMapping(t *testing.T) {
	l := &Local{}
	tests := []struct {
		name     string
		err      error
		wantCode fault.Code
		wantMsg  string
	}{
		{"EACCES", syscall.EACCES, fault.CodePermission, `cannot write "/w/f": permission denied`},
		{"EPERM", syscall.EPERM, fault.CodePermission, `cannot write "/w/f": permission denied`},
		{"ENOSPC", syscall.ENOSPC, fault.CodeIO, `cannot write "/w/f": no space left on device`},
		{"EROFS", syscall.EROFS, fault.CodeIO, `cannot write "/w/f": read-only file system`},
		{"ENAMETOOLONG", syscall.ENAMETOOLONG, fault.CodeNotFound, `cannot resolve "/w/f": file name too long`},
		{"ELOOP", syscall.ELOOP, fault.CodeNotFound, `cannot resolve "/w/f": too many levels of symbolic links`},
		{"wrapped errno", fmt.Errorf("ctx: %w", syscall.EIO), fault.CodeIO, `cannot write "/w/f": input/output error`},
		{"not an errno", errors.New("/secret/host/path broke"), fault.CodeIO, `cannot write "/w/f": i/o error`},
		{"already mapped", fault.New(fault.CodeAborted, "write aborted"), fault.CodeAborted, "write aborted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.fail("write", "/w/f", tt.err)
			requireCode(t, err, tt.wantCode, tt.wantMsg)
			if _, mapped := tt.err.(*fault.Error); !mapped {
				assert.ErrorIs(t, err, tt.err, "the cause stays reachable for logs")
			}
		})
	}
}

func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root bypasses permission bits")
	}
	f := newFixture(t, "locked/f.txt")
	require.NoError(t, os.Chmod(f.path("locked"), 0))
	t.Cleanup(func() { os.Chmod(f.path("locked"), 0o755) })
	_, err := f.l.Resolve(context.Background(), "read", "locked/f.txt", "")
	requireCode(t, err, fault.CodePermission, fmt.Sprintf(`cannot read "%s": permission denied`, f.path("locked/f.txt")))
}
