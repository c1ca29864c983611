package events

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// A watch added through a descriptor's /proc/self/fd/<n> is on the folder
// the descriptor holds, not on whatever its path names now: the folder was
// moved away and its path made a symlink to another folder before the
// watch was added, and only the moved folder's entries are reported. The
// same folder added again keeps its watch descriptor (watchDir relies on
// it to notice a folder watched at two paths).
func TestWatchThroughADescriptorIsOfTheOpenedFolder(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(base, "d"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(base, "other"), 0o755))
	baseFd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(baseFd)
	fd, err := fs.OpenBeneath(baseFd, "d", unix.O_RDONLY|unix.O_DIRECTORY)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, os.Rename(filepath.Join(base, "d"), filepath.Join(base, "moved")))
	require.NoError(t, os.Symlink("other", filepath.Join(base, "d")))

	stop := make(chan struct{})
	in, err := newInotify(stop)
	require.NoError(t, err)
	defer in.close()
	defer close(stop)
	wd, err := in.add(fd)
	require.NoError(t, err)
	again, err := in.add(fd)
	require.NoError(t, err)
	assert.Equal(t, wd, again)

	write(t, filepath.Join(base, "d", "through-the-link.txt"), "x")
	write(t, filepath.Join(base, "other", "in-other.txt"), "x")
	require.NoError(t, os.Mkdir(filepath.Join(base, "moved", "sub"), 0o755))
	var got []inEvent
	for deadline := time.After(300 * time.Millisecond); ; {
		select {
		case e := <-in.events:
			got = append(got, e)
			continue
		case <-deadline:
		}
		break
	}
	require.Len(t, got, 1, "%+v", got)
	assert.Equal(t, inEvent{wd: wd, mask: unix.IN_CREATE | unix.IN_ISDIR, name: "sub"}, got[0])

	// Its path, a link now, is not opened at all.
	_, err = fs.OpenBeneath(baseFd, "d", unix.O_RDONLY|unix.O_DIRECTORY)
	assert.ErrorIs(t, err, unix.ENOTDIR)
}
