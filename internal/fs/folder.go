package fs

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Folder is a folder the server keeps for its own files inside PrivateDir
// (the checkpoints, docs/checkpoints.md), checked as PrivateDir's own parts
// are (docs/decisions-fs.md#the-private-folder): opened with O_NOFOLLOW
// relative to its checked parent, a real folder owned by this user that
// neither group nor others can write, and kept open, so that everything in
// it is opened relative to its descriptor and nobody can redirect it. Its
// user opens files in it with *at syscalls on Fd, never by a path string.
type Folder struct {
	fd    int
	shown string // its path below the root, for messages
}

// PrivateFolder opens <root>/.toolfs-api/<name>, making it (and PrivateDir)
// with mode 0700 when create is set. Without create, a missing folder is
// (nil, nil), so a read-only root is never written. name is one component
// other than PrivateDir's own parts (locks, tmp).
func (l *Local) PrivateFolder(name string, create bool) (*Folder, error) {
	if !oneComponent(name) || name == privateLocks || name == privateTmp || name == privateGitignore {
		return nil, fmt.Errorf("fs: %q cannot be a private folder", name)
	}
	p, err := l.private.get(create)
	if err != nil || p == nil {
		return nil, err
	}
	return openFolder(p.dir, name, PrivateDir+"/"+name, create)
}

// Folder opens the folder name inside f, with the same checks, making it
// (0700) when create is set; without create a missing one is (nil, nil).
func (f *Folder) Folder(name string, create bool) (*Folder, error) {
	if !oneComponent(name) {
		return nil, fmt.Errorf("fs: %q is not one path component", name)
	}
	return openFolder(f.fd, name, f.shown+"/"+name, create)
}

func openFolder(dir int, name, shown string, create bool) (*Folder, error) {
	fd, err := ownFolder(dir, name, shown, create)
	if err != nil || fd < 0 {
		return nil, err
	}
	return &Folder{fd: fd, shown: shown}, nil
}

// Fd is the folder's descriptor, valid until Close.
func (f *Folder) Fd() int { return f.fd }

// Sync fsyncs the folder, so the entries made or removed in it are durable.
func (f *Folder) Sync() error { return syncDir(f.fd) }

// Lock takes a flock on the lock file name in the folder (made 0600 when
// missing, never followed): shared or exclusive, waiting for ctx. The
// unlock releases it. Like every flock it excludes other open files, so
// two callers in one process exclude each other too; it is no Go
// synchronization, so callers in one process also need their own.
func (f *Folder) Lock(ctx context.Context, name string, shared bool) (unlock func(), err error) {
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	return lockFileAt(ctx, f.fd, name, how)
}

// Close releases the descriptor.
func (f *Folder) Close() error { return unix.Close(f.fd) }

// String is the folder's path below the root.
func (f *Folder) String() string { return f.shown }

func oneComponent(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}
