package fs

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// PrivateDir is the folder directly under the workspace root where the server
// keeps its own files (cross-process lock files, staged temporary files). It
// lives on the shared filesystem so that every process serving the root sees
// it, whatever its $TMPDIR (docs/reliability.md). The file tools do not
// reach into it; others learn of it through Workspace.IsPrivate.
const PrivateDir = ".toolfs-api"

// The parts of PrivateDir (docs/decisions-fs.md#the-private-folder).
const (
	privateLocks     = "locks"
	privateTmp       = "tmp"
	privateGitignore = ".gitignore"
)

// errPrivate is a path that reaches into PrivateDir: the tools refuse it as
// outside the workspace root.
var errPrivate = errors.New("path reaches into the server's private folder")

// privateFolder is PrivateDir opened once and kept: lock files and staged
// temporary files are opened relative to these descriptors, never by path,
// so nobody can redirect them once the folders passed their checks.
type privateFolder struct {
	dir, locks, tmp int
	tmpDev          uint64
}

// private opens PrivateDir on first use (creating it when create is set) and
// keeps it. A failure is not kept: a root that was read-only, or a hostile
// folder that was removed, is tried again on the next call.
type private struct {
	rootFd int
	mu     sync.Mutex
	f      *privateFolder
}

// privateError says why PrivateDir cannot be used; the message is for the
// start-up log and the server log, not for the model.
type privateError struct {
	reason  string
	err     error
	hostile bool // someone else's folder, a symlink or a file: refused at start-up
}

func (e *privateError) Error() string {
	msg := fmt.Sprintf("fs: the server's private folder %s in the workspace root %s", PrivateDir, e.reason)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *privateError) Unwrap() error { return e.err }

// get returns the kept folder, opening it first if needed. Without create, a
// missing PrivateDir is (nil, nil).
func (p *private) get(create bool) (*privateFolder, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil {
		return p.f, nil
	}
	f, err := openPrivate(p.rootFd, create)
	if err != nil || f == nil {
		return nil, err
	}
	p.f = f
	return f, nil
}

func (p *private) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil {
		unix.Close(p.f.dir)
		unix.Close(p.f.locks)
		unix.Close(p.f.tmp)
		p.f = nil
	}
}

// openPrivate opens (and with create, makes) PrivateDir and its parts. Every
// folder is opened with O_NOFOLLOW relative to its checked parent and must be
// a real folder owned by this user that no one else can write: anything else
// could let another local user redirect or block our files.
func openPrivate(rootFd int, create bool) (*privateFolder, error) {
	dir, err := ownFolder(rootFd, PrivateDir, PrivateDir, create)
	if err != nil || dir < 0 {
		return nil, err
	}
	f := &privateFolder{dir: dir, locks: -1, tmp: -1}
	fail := func(err error) (*privateFolder, error) {
		unix.Close(f.dir)
		if f.locks >= 0 {
			unix.Close(f.locks)
		}
		if f.tmp >= 0 {
			unix.Close(f.tmp)
		}
		return nil, err
	}
	if create {
		// "*" keeps the whole folder out of the user's git status.
		gfd, err := unix.Openat(dir, privateGitignore, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		switch {
		case err == nil:
			_, werr := unix.Write(gfd, []byte("*\n"))
			unix.Close(gfd)
			if werr != nil {
				return fail(&privateError{reason: "cannot be set up", err: werr})
			}
		case err != unix.EEXIST:
			return fail(&privateError{reason: "cannot be set up", err: err})
		}
	}
	if f.locks, err = ownFolder(dir, privateLocks, PrivateDir+"/"+privateLocks, true); err != nil {
		return fail(err)
	}
	if f.tmp, err = ownFolder(dir, privateTmp, PrivateDir+"/"+privateTmp, true); err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f.tmp, &st); err != nil {
		return fail(&privateError{reason: "cannot be set up", err: err})
	}
	f.tmpDev = st.Dev
	return f, nil
}

// ownFolder opens the folder name in dir, making it (0700) when create is
// set, and checks it. It returns -1 and no error when the folder is missing
// and create is not set.
func ownFolder(dir int, name, shown string, create bool) (int, error) {
	if create {
		if err := unix.Mkdirat(dir, name, 0o700); err != nil && err != unix.EEXIST {
			return -1, &privateError{reason: "cannot be created (" + shown + ")", err: err}
		}
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT && !create:
		return -1, nil
	case err == unix.ELOOP || err == unix.ENOTDIR:
		return -1, &privateError{reason: "is refused: " + shown + " is not a folder (a symlink or a file); remove it and restart", hostile: true}
	case err != nil:
		return -1, &privateError{reason: "cannot be opened (" + shown + ")", err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &privateError{reason: "cannot be opened (" + shown + ")", err: err}
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		unix.Close(fd)
		return -1, &privateError{reason: fmt.Sprintf("is refused: %s is owned by uid %d, not by this server's uid %d; remove it and restart", shown, st.Uid, uid), hostile: true}
	}
	if st.Mode&0o022 != 0 {
		unix.Close(fd)
		return -1, &privateError{reason: fmt.Sprintf("is refused: %s is writable by others (mode %04o); remove it or chmod go-w, and restart", shown, st.Mode&0o7777), hostile: true}
	}
	return fd, nil
}

// privateErr maps a failure to use PrivateDir during op on display. A root
// that is read-only or not ours to write reads as such (as writing the file
// itself would have said); anything else tells the model the server cannot
// use its folder, and the reason goes to the log.
func privateErr(op, display string, err error) *fault.Error {
	var pe *privateError
	if errors.As(err, &pe) && !pe.hostile && (errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		return ioError(op, display, err)
	}
	return &fault.Error{Code: fault.CodeIO, Message: fmt.Sprintf(`cannot %s "%s": the server cannot use its private folder %s in the workspace root`, op, display, PrivateDir), Err: err}
}
