package fs

import (
	"strings"

	"golang.org/x/sys/unix"
)

// OpenBeneath opens rel, a "/"-separated path relative to the folder open as
// dirfd ("" or "." for that folder itself), following no symlink in any
// component, the last included, and never leaving that folder: openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, or, where the
// kernel has no openat2 (before Linux 5.6), openat with O_NOFOLLOW one
// component at a time, refusing "..". flags are open(2) flags (O_NOFOLLOW
// and O_CLOEXEC are added); the descriptor is the caller's to close.
//
// It only opens: a symlink met fails with ELOOP (ENOTDIR when it is the
// last name and flags hold O_DIRECTORY, and in the component walk), a name
// that leaves the folder with EXDEV, a missing one with ENOENT. What it opens was beneath dirfd when it was opened; it may be
// moved elsewhere afterwards, and the descriptor follows it.
func OpenBeneath(dirfd int, rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		for tries := 0; ; tries++ {
			fd, err := unix.Openat2(dirfd, rel, &how)
			// EAGAIN: a rename raced a ".." lookup; the kernel asks for a
			// retry.
			if (err == unix.EINTR || err == unix.EAGAIN) && tries < 8 {
				continue
			}
			if err != unix.ENOSYS {
				return fd, err
			}
			noOpenat2.Store(true)
			break
		}
	}
	return openBeneathWalk(dirfd, rel, flags)
}

// openBeneathWalk is OpenBeneath without openat2: each folder on the way is
// opened with O_PATH|O_DIRECTORY|O_NOFOLLOW from the one before, so a
// symlink is never followed and ".." is refused outright.
func openBeneathWalk(dirfd int, rel string, flags int) (int, error) {
	parts := strings.Split(rel, "/")
	dir := dirfd
	defer func() {
		if dir != dirfd {
			unix.Close(dir)
		}
	}()
	for i, c := range parts {
		last := i == len(parts)-1
		switch c {
		case "..":
			return -1, unix.EXDEV
		case "", ".":
			if !last {
				continue
			}
			c = "."
		}
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags
		}
		fd, err := openatRetry(dir, c, f)
		if err != nil {
			return -1, err
		}
		if last {
			return fd, nil
		}
		if dir != dirfd {
			unix.Close(dir)
		}
		dir = fd
	}
	return -1, unix.ENOENT // not reached: the last part returns
}

func openatRetry(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
