package fs

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// OpenBeneath refuses a symlink in any component, the last included, and
// any way out of the folder, with openat2 and with the component walk used
// where the kernel has none.
func TestOpenBeneath(t *testing.T) {
	f := newFixture(t,
		"a/b/c/",
		"a/f.txt",
		"link => a",
		"a/blink => b",
		"a/out => $OUT",
		"a/up => ..",
		"abs => $ROOT/a",
	)
	rootFd, err := unix.Open(f.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(rootFd)
	cases := []struct {
		rel   string
		flags int
		ok    bool
	}{
		{rel: "", flags: unix.O_RDONLY | unix.O_DIRECTORY, ok: true},
		{rel: ".", flags: unix.O_RDONLY | unix.O_DIRECTORY, ok: true},
		{rel: "a", flags: unix.O_RDONLY | unix.O_DIRECTORY, ok: true},
		{rel: "a/b/c", flags: unix.O_PATH | unix.O_DIRECTORY, ok: true},
		{rel: "a/b/c/", flags: unix.O_PATH | unix.O_DIRECTORY, ok: true},
		{rel: "a/f.txt", flags: unix.O_RDONLY, ok: true},
		{rel: "a/f.txt", flags: unix.O_RDONLY | unix.O_DIRECTORY},
		{rel: "link", flags: unix.O_RDONLY | unix.O_DIRECTORY},
		{rel: "link", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "link/b", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "link/b/c", flags: unix.O_RDONLY | unix.O_DIRECTORY},
		{rel: "a/blink/c", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "a/out", flags: unix.O_RDONLY | unix.O_DIRECTORY},
		{rel: "a/out/secret.txt", flags: unix.O_RDONLY},
		{rel: "a/up", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "a/up/a", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "abs/b", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "..", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "../out", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "a/../../out", flags: unix.O_PATH | unix.O_DIRECTORY},
		{rel: "missing", flags: unix.O_PATH | unix.O_DIRECTORY},
	}
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			noOpenat2.Store(mode == "walk")
			defer noOpenat2.Store(false)
			for _, c := range cases {
				fd, err := OpenBeneath(rootFd, c.rel, c.flags)
				if !c.ok {
					assert.Error(t, err, "%q", c.rel)
					assert.Equal(t, -1, fd, "%q", c.rel)
					continue
				}
				require.NoError(t, err, "%q", c.rel)
				var got unix.Stat_t
				require.NoError(t, unix.Fstat(fd, &got))
				unix.Close(fd)
				var want syscall.Stat_t
				require.NoError(t, syscall.Lstat(filepath.Join(f.root, c.rel), &want))
				assert.Equal(t, want.Ino, got.Ino, "%q", c.rel)
			}
		})
	}
}

// The errors say why, so a caller can tell "not there any more" from a
// failure of its own.
func TestOpenBeneathErrors(t *testing.T) {
	f := newFixture(t, "a/b/", "link => a")
	rootFd, err := unix.Open(f.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(rootFd)
	_, err = OpenBeneath(rootFd, "link/b", unix.O_PATH|unix.O_DIRECTORY)
	assert.ErrorIs(t, err, unix.ELOOP)
	_, err = OpenBeneath(rootFd, "../out", unix.O_PATH|unix.O_DIRECTORY)
	assert.ErrorIs(t, err, unix.EXDEV)
	_, err = OpenBeneath(rootFd, "a/none", unix.O_PATH|unix.O_DIRECTORY)
	assert.ErrorIs(t, err, unix.ENOENT)
}
