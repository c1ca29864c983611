package fs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// The first mutation makes the private folder: owned by us, 0700, with a
// .gitignore of "*" so it never shows in git status. Reads never make it.
func TestPrivateFolderMadeByFirstMutation(t *testing.T) {
	f := newFixture(t, "a.txt = a")
	ctx := context.Background()
	r, _, err := f.l.OpenText(ctx, f.resolve(t, "read", "a.txt"))
	require.NoError(t, err)
	r.Close()
	_, err = f.l.Stat(ctx, f.resolve(t, "read", "b.txt"))
	require.NoError(t, err)
	assert.NoDirExists(t, f.path(PrivateDir), "a read made the private folder")

	_, err = f.l.WriteText(ctx, f.resolve(t, "write", "b.txt"), "b", nil)
	require.NoError(t, err)
	for _, d := range []string{"", "locks", "tmp"} {
		fi, err := os.Lstat(f.path(filepath.Join(PrivateDir, d)))
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
	assert.Equal(t, "*\n", f.read(t, PrivateDir+"/.gitignore"))
	locks, err := os.ReadDir(f.path(PrivateDir + "/locks"))
	require.NoError(t, err)
	require.Len(t, locks, 1)
	assert.Regexp(t, `^\d+\.lock$`, locks[0].Name())
	f.assertClean(t)
}

// A private folder someone else prepared is refused at start-up with a
// clear message, and never followed.
func TestPrivateFolderHostile(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(f *fixture) error
		wantErr string
	}{
		{"symlink to outside", func(f *fixture) error {
			return os.Symlink(f.out, f.path(PrivateDir))
		}, "fs: the server's private folder .toolfs-api in the workspace root is refused: .toolfs-api is not a folder (a symlink or a file); remove it and restart"},
		{"symlink inside", func(f *fixture) error {
			if err := os.Mkdir(f.path("mine"), 0o700); err != nil {
				return err
			}
			return os.Symlink("mine", f.path(PrivateDir))
		}, "is refused: .toolfs-api is not a folder"},
		{"a file", func(f *fixture) error {
			return os.WriteFile(f.path(PrivateDir), nil, 0o600)
		}, "is refused: .toolfs-api is not a folder"},
		{"group-writable", func(f *fixture) error {
			if err := os.Mkdir(f.path(PrivateDir), 0o700); err != nil {
				return err
			}
			return os.Chmod(f.path(PrivateDir), 0o770)
		}, "is refused: .toolfs-api is writable by others (mode 0770); remove it or chmod go-w, and restart"},
		{"someone else's", func(f *fixture) error {
			if err := os.Mkdir(f.path(PrivateDir), 0o700); err != nil {
				return err
			}
			return os.Chown(f.path(PrivateDir), 65534, 65534)
		}, "is refused: .toolfs-api is owned by uid 65534, not by this server's uid"},
		{"locks is a symlink to outside", func(f *fixture) error {
			if err := os.Mkdir(f.path(PrivateDir), 0o700); err != nil {
				return err
			}
			return os.Symlink(f.out, f.path(PrivateDir+"/locks"))
		}, "is refused: .toolfs-api/locks is not a folder"},
		{"tmp is someone else's", func(f *fixture) error {
			if err := os.MkdirAll(f.path(PrivateDir+"/tmp"), 0o700); err != nil {
				return err
			}
			return os.Chown(f.path(PrivateDir+"/tmp"), 65534, 65534)
		}, "is refused: .toolfs-api/tmp is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.name, "else's") && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			f := newFixture(t, "a.txt = a")
			require.NoError(t, tt.prepare(f))
			_, err := NewLocal(f.root, LocalOptions{})
			require.ErrorContains(t, err, tt.wantErr)

			// Made hostile after start-up: the first mutation refuses too.
			ctx := context.Background()
			_, err = f.l.WriteText(ctx, f.resolve(t, "write", "a.txt"), "pwned", nil)
			requireCode(t, err, fault.CodeIO, `cannot write "`+f.path("a.txt")+`": the server cannot use its private folder .toolfs-api in the workspace root`)
			var e *fault.Error
			require.ErrorAs(t, err, &e)
			assert.ErrorContains(t, e.Err, tt.wantErr, "the cause names the reason (for the log)")
			assert.Equal(t, "a", f.read(t, "a.txt"))
			f.assertClean(t) // the outside folder gained nothing
		})
	}
}

// The file tools never reach into the private folder, however the path
// gets there; the same name below the root is an ordinary folder.
func TestPrivateFolderRefusedToTools(t *testing.T) {
	f := newFixture(t, "a.txt = a", "sub/.toolfs-api/x.txt = x", "in => .toolfs-api/locks", "d/up => ..")
	ctx := context.Background()
	_, err := f.l.WriteText(ctx, f.resolve(t, "write", "a.txt"), "b", nil)
	require.NoError(t, err) // makes the private folder
	for _, p := range []string{
		".toolfs-api", ".toolfs-api/.gitignore", ".toolfs-api/locks/1.lock", ".toolfs-api/new.txt",
		".toolfs-api/tmp/x/y.txt", "./.toolfs-api/tmp", "sub/../.toolfs-api/.gitignore",
		"in", "in/1.lock", "d/up/.toolfs-api/.gitignore", f.path(".toolfs-api/.gitignore"),
	} {
		for _, op := range []string{"read", "write", "edit"} {
			_, err := f.l.Resolve(ctx, op, p, "")
			display := p
			if !filepath.IsAbs(p) {
				display = filepath.Join(f.root, p)
			}
			requireCode(t, err, fault.CodeSandboxDenied, `cannot `+op+` "`+display+`": outside the workspace root`)
		}
	}
	tg := f.resolve(t, "read", "sub/.toolfs-api/x.txt")
	_, err = f.l.WriteText(ctx, tg, "y", nil)
	require.NoError(t, err)

	// Swapped in after Resolve: the mutation's own walk refuses it.
	tg = f.resolve(t, "write", "e/new.txt")
	require.NoError(t, os.Symlink(".toolfs-api/tmp", f.path("e")))
	_, err = f.l.WriteText(ctx, tg, "pwned", nil)
	requireCode(t, err, fault.CodeSandboxDenied, `cannot write "`+f.path("e/new.txt")+`": outside the workspace root`)
	f.assertClean(t)
}

// The sweep removes temporary files no live process holds, keeps the ones
// a writer holds (its flock), and leaves other names alone.
func TestSweep(t *testing.T) {
	f := newFixture(t)
	tmp := f.path(PrivateDir + "/tmp")
	require.NoError(t, os.MkdirAll(tmp, 0o700))
	require.NoError(t, os.Chmod(f.path(PrivateDir), 0o700))
	dead := []string{".a.txt.toolfs-1.tmp", ".b.toolfs-zz.tmp", "..toolfs-3.tmp"}
	for _, n := range dead {
		require.NoError(t, os.WriteFile(filepath.Join(tmp, n), []byte("debris"), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(tmp, ".denied.toolfs-4.tmp"), []byte("debris"), 0o200))
	for _, n := range []string{"notes.txt", ".a.txt.toolfs-5.tmpx"} {
		require.NoError(t, os.WriteFile(filepath.Join(tmp, n), nil, 0o600))
	}
	live, err := os.OpenFile(filepath.Join(tmp, ".live.txt.toolfs-6.tmp"), os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer live.Close()
	require.NoError(t, unix.Flock(int(live.Fd()), unix.LOCK_EX))

	l, err := NewLocal(f.root, LocalOptions{SweepInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, SweepCounts{Removed: 4, InUse: 1}, l.StartupSweep())
	names := func() []string {
		entries, err := os.ReadDir(tmp)
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	assert.Equal(t, []string{".a.txt.toolfs-5.tmpx", ".live.txt.toolfs-6.tmp", "notes.txt"}, names())

	// Its writer gone, the next periodic sweep removes it.
	live.Close()
	require.Eventually(t, func() bool { return len(names()) == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{".a.txt.toolfs-5.tmpx", "notes.txt"}, names())
}

// A temporary file a sweep removes in the instant between its creation and
// its flock is noticed (link count 0), and the writer starts again.
func TestCreateLockedAfterSweep(t *testing.T) {
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(dfd)
	fd, name, err := createLocked(dfd, "t.txt")
	require.NoError(t, err)
	assert.Equal(t, sweptInUse, sweepOne(dfd, name), "a held file is never removed")
	unix.Close(fd)
	assert.Equal(t, sweptRemoved, sweepOne(dfd, name), "a file nobody holds is removed")
	assert.NoFileExists(t, filepath.Join(dir, name))
}

// A read-only root serves reads (the private folder is made only by a
// mutation), and a write says the filesystem is read-only.
func TestReadOnlyRoot(t *testing.T) {
	f := newFixture(t, "a.txt = a")
	mountOrSkip(t, f.root, f.root, "", unix.MS_BIND)
	if err := unix.Mount("", f.root, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	l, err := NewLocal(f.root, LocalOptions{})
	require.NoError(t, err)
	defer l.Close()
	ctx := context.Background()
	tg, err := l.Resolve(ctx, "read", "a.txt", "")
	require.NoError(t, err)
	r, _, err := l.OpenText(ctx, tg)
	require.NoError(t, err)
	assert.Equal(t, "a", readAll(t, r))
	_, err = l.WriteText(ctx, tg, "b", nil)
	requireCode(t, err, fault.CodeIO, `cannot write "`+f.path("a.txt")+`": read-only file system`)
	_, err = l.EditText(ctx, tg, EditRequest{OldString: "a", NewString: "b"}, nil)
	requireCode(t, err, fault.CodeIO, `cannot edit "`+f.path("a.txt")+`": read-only file system`)
	assert.NoDirExists(t, f.path(PrivateDir))
}
