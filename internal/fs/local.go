package fs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultDiffBasisMaxBytes is the diff-basis limit used when
// LocalOptions.DiffBasisMaxBytes is zero.
const DefaultDiffBasisMaxBytes = 10 << 20

// LocalOptions configures a Local provider. The zero value is valid.
type LocalOptions struct {
	// DiffBasisMaxBytes is the size (in bytes) at and above which writes and
	// edits return no diff basis. Zero means DefaultDiffBasisMaxBytes; a
	// negative value is an error.
	DiffBasisMaxBytes int64
	// LockDir, when set, makes every mutation also hold an exclusive flock on
	// one of a fixed set of lock files in this folder, so several processes
	// serving the same root never lose an update. "" means in-process locks
	// only. See DefaultLockDir.
	LockDir string
}

// Local is the FileSystem over one workspace root on a local (Linux)
// filesystem. Every path is walked one component at a time from a directory
// descriptor pinned on the root, never through a host path string, so the
// kernel confines each operation to the root even when symlinks change under
// it. Local is safe for concurrent use; Close must not race other calls.
type Local struct {
	root      *os.Root
	rootDir   *os.File // pins the root; its descriptor starts every walk
	rootFd    int
	rootReal  string // canonical root (symlinks resolved): the prefix of every Key
	rootAbs   string // root as given, made absolute: the base of Display paths
	diffMax   int64
	newMode   uint32 // 0666 &^ umask
	locks     keyLocks
	lockFiles *bucketLocks
	hooks     testHooks
}

// testHooks let tests reach the windows that only races reach otherwise.
type testHooks struct {
	beforePublish func() // after the temporary file is staged
	beforeRename  func() // after the last check, just before publication
	linkOnly      bool   // publish create-only by link+unlink, as without renameat2
}

var _ FileSystem = (*Local)(nil)

// NewLocal opens a provider on root, which must exist and be a directory. The
// root is canonicalized once; moving it later is not followed.
func NewLocal(root string, opts LocalOptions) (*Local, error) {
	if opts.DiffBasisMaxBytes < 0 {
		return nil, fmt.Errorf("fs: DiffBasisMaxBytes must not be negative, got %d", opts.DiffBasisMaxBytes)
	}
	if opts.DiffBasisMaxBytes == 0 {
		opts.DiffBasisMaxBytes = DefaultDiffBasisMaxBytes
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fs: workspace root %q: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("fs: workspace root %q: %w", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("fs: workspace root %q: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("fs: workspace root %q is not a directory", root)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("fs: workspace root %q: %w", root, err)
	}
	dir, err := r.Open(".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("fs: workspace root %q: %w", root, err)
	}
	l := &Local{
		root:     r,
		rootDir:  dir,
		rootFd:   int(dir.Fd()),
		rootReal: real,
		rootAbs:  abs,
		diffMax:  opts.DiffBasisMaxBytes,
		newMode:  0o666 &^ processUmask(),
		locks:    keyLocks{m: map[TargetKey]*keyLock{}},
	}
	if opts.LockDir != "" {
		b, err := newBucketLocks(opts.LockDir)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.lockFiles = b
	}
	return l, nil
}

// DefaultLockDir returns os.TempDir()/toolfs-locks/<short sha256 of the
// canonical root>, creating it 0700 (best effort: NewLocal reports a folder
// it cannot use). Every process serving the same root as the same user gets
// the same folder.
func DefaultLockDir(root string) string {
	canon, err := filepath.Abs(root)
	if err == nil {
		if real, err := filepath.EvalSymlinks(canon); err == nil {
			canon = real
		}
	}
	sum := sha256.Sum256([]byte(canon))
	dir := filepath.Join(os.TempDir(), "toolfs-locks", hex.EncodeToString(sum[:8]))
	_ = os.MkdirAll(dir, 0o700)
	return dir
}

// Close releases the root descriptors. The provider must not be used after.
func (l *Local) Close() error {
	return errors.Join(l.rootDir.Close(), l.root.Close())
}

// Stat reports the target's type, size and version, following symlinks
// inside the root. It reports errors with the verb "read", since the tools
// stat only to read.
func (l *Local) Stat(ctx context.Context, t Target) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, &Error{Code: CodeAborted, Message: "stat aborted", Err: err}
	}
	w, err := l.walkTarget(t, false)
	if err != nil {
		if errors.Is(err, errNotDir) {
			return Info{Type: TypeMissing, Size: -1}, nil
		}
		return Info{}, l.fail("read", t.Display, err)
	}
	w.close(l)
	if err := ctx.Err(); err != nil {
		return Info{}, &Error{Code: CodeAborted, Message: "stat aborted", Err: err}
	}
	if w.kind != walkFound {
		return Info{Type: TypeMissing, Size: -1}, nil
	}
	return infoOf(&w.st), nil
}

// OpenText opens the target for reading without ever blocking on a FIFO or
// opening a device, and reports the Info of the opened descriptor. The reader
// checks ctx before every Read (CodeAborted "read aborted").
func (l *Local) OpenText(ctx context.Context, t Target) (io.ReadCloser, Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, Info{}, &Error{Code: CodeAborted, Message: "read aborted", Err: err}
	}
	f, st, err := l.openRegular(t, "read")
	if err != nil {
		return nil, Info{}, err
	}
	return &ctxReader{ctx: ctx, f: f, display: t.Display}, infoOf(&st), nil
}

// openRegular opens the followed target read-only and checks it is a regular
// file both before opening (so devices are never opened) and on the open
// descriptor (so a swap in between is caught).
func (l *Local) openRegular(t Target, op string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	w, err := l.walkTarget(t, false)
	if err != nil {
		if errors.Is(err, errNotDir) {
			return nil, st, NewError(CodeNotFound, fmt.Sprintf(`cannot %s "%s": not found`, op, t.Display))
		}
		return nil, st, l.fail(op, t.Display, err)
	}
	defer w.close(l)
	if w.kind != walkFound {
		return nil, st, NewError(CodeNotFound, fmt.Sprintf(`cannot %s "%s": not found`, op, t.Display))
	}
	if !isRegular(&w.st) {
		return nil, st, notRegular(op, t.Display)
	}
	fd, err := unix.Openat(w.dir, w.name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NOCTTY, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, st, NewError(CodeNotFound, fmt.Sprintf(`cannot %s "%s": not found`, op, t.Display))
		}
		if err == unix.ELOOP { // swapped for a symlink since the walk
			return nil, st, notRegular(op, t.Display)
		}
		return nil, st, l.fail(op, t.Display, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, l.fail(op, t.Display, err)
	}
	if !isRegular(&st) {
		unix.Close(fd)
		return nil, st, notRegular(op, t.Display)
	}
	return os.NewFile(uintptr(fd), w.name), st, nil
}

// ctxReader is the reader OpenText returns: cancellable between reads, with
// errors mapped to *Error.
type ctxReader struct {
	ctx     context.Context
	f       *os.File
	display string
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, &Error{Code: CodeAborted, Message: "read aborted", Err: err}
	}
	n, err := r.f.Read(p)
	if err != nil && err != io.EOF {
		return n, ioError("read", r.display, err)
	}
	return n, err
}

func (r *ctxReader) Close() error { return r.f.Close() }

// ListDir lists the direct children of a folder in byte order of their
// names. A child's Type follows symlinks inside the root; a symlink that is
// dangling or leaves the root is TypeOther.
func (l *Local) ListDir(ctx context.Context, t Target) ([]DirEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Code: CodeAborted, Message: "list aborted", Err: err}
	}
	w, err := l.walkTarget(t, false)
	if err != nil {
		if errors.Is(err, errNotDir) {
			return nil, NewError(CodeNotFound, fmt.Sprintf(`cannot list "%s": not found`, t.Display))
		}
		return nil, l.fail("list", t.Display, err)
	}
	defer w.close(l)
	if w.kind != walkFound {
		return nil, NewError(CodeNotFound, fmt.Sprintf(`cannot list "%s": not found`, t.Display))
	}
	if w.st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, NewError(CodeNotDirectory, fmt.Sprintf(`cannot list "%s": not a directory`, t.Display))
	}
	fd, err := unix.Openat(w.dir, w.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, l.fail("list", t.Display, err)
	}
	dir := os.NewFile(uintptr(fd), w.name)
	defer dir.Close()
	var names []string
	for {
		if err := ctx.Err(); err != nil {
			return nil, &Error{Code: CodeAborted, Message: "list aborted", Err: err}
		}
		batch, err := dir.Readdirnames(1024)
		names = append(names, batch...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, l.fail("list", t.Display, err)
		}
	}
	slices.Sort(names)
	entries := make([]DirEntry, 0, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, &Error{Code: CodeAborted, Message: "list aborted", Err: err}
		}
		e, err := l.child(fd, w.rel, t.Display, name)
		if err != nil {
			return nil, l.fail("list", t.Display, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// child describes one folder entry. A child that vanished, or a symlink that
// cannot be followed inside the root, is TypeOther, as the original does.
func (l *Local) child(dirFd int, dirRel, dirDisplay, name string) (DirEntry, error) {
	rel := joinRel(dirRel, name)
	e := DirEntry{Name: name, Type: TypeOther, Size: -1,
		Target: Target{Key: l.keyFor(rel), Display: filepath.Join(dirDisplay, name)}}
	var st unix.Stat_t
	err := unix.Fstatat(dirFd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return e, nil
	}
	if err != nil {
		return e, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		w, err := l.walk(rel, false)
		if err != nil {
			if errors.Is(err, errEscape) || errors.Is(err, errLoop) || errors.Is(err, errNotDir) || errors.Is(err, unix.ENOENT) {
				return e, nil
			}
			return e, err
		}
		w.close(l)
		if w.kind != walkFound {
			return e, nil
		}
		e.Target.Key = l.keyFor(w.rel)
		st = w.st
	}
	info := infoOf(&st)
	e.Type, e.Size = info.Type, info.Size
	return e, nil
}

// infoOf converts a followed stat into Info.
func infoOf(st *unix.Stat_t) Info {
	info := Info{Type: TypeOther, Size: -1, Version: versionOf(st)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		info.Type, info.Size = TypeFile, st.Size
	case unix.S_IFDIR:
		info.Type = TypeDirectory
	}
	return info
}

// versionOf formats dev:ino:size:mtime_ns:ctime_ns.
func versionOf(st *unix.Stat_t) Version {
	b := make([]byte, 0, 80)
	b = strconv.AppendUint(b, st.Dev, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, st.Ino, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Size, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Mtim.Sec*1e9+st.Mtim.Nsec, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Ctim.Sec*1e9+st.Ctim.Nsec, 10)
	return Version(b)
}

func isRegular(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }

func notRegular(op, display string) *Error {
	return NewError(CodeNotRegularFile, fmt.Sprintf(`cannot %s "%s": not a regular file`, op, display))
}

// fail maps a walk or syscall error to the contract's *Error for op on
// display. Messages never carry host paths; the cause stays in Err.
func (l *Local) fail(op, display string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, errEscape):
		return &Error{Code: CodeSandboxDenied, Message: fmt.Sprintf(`cannot %s "%s": outside the workspace root`, op, display), Err: err}
	case errors.Is(err, errLoop), errors.Is(err, unix.ELOOP):
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf(`cannot resolve "%s": too many levels of symbolic links`, display), Err: err}
	case errors.Is(err, errNotDir), errors.Is(err, unix.ENOTDIR):
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf(`cannot resolve "%s": a parent path segment is not a directory`, display), Err: err}
	case errors.Is(err, unix.ENAMETOOLONG):
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf(`cannot resolve "%s": file name too long`, display), Err: err}
	}
	return ioError(op, display, err)
}

// ioError maps EACCES/EPERM to CodePermission and anything else to CodeIO
// with the errno's short text.
func ioError(op, display string, err error) *Error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return &Error{Code: CodePermission, Message: fmt.Sprintf(`cannot %s "%s": permission denied`, op, display), Err: err}
	case errors.As(err, &errno):
		return &Error{Code: CodeIO, Message: fmt.Sprintf(`cannot %s "%s": %s`, op, display, errno.Error()), Err: err}
	}
	return &Error{Code: CodeIO, Message: fmt.Sprintf(`cannot %s "%s": i/o error`, op, display), Err: err}
}

// processUmask reads the umask without changing it when /proc allows, else by
// the set-and-restore round trip (done once, at construction).
func processUmask() uint32 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		s := bufio.NewScanner(bytes.NewReader(b))
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m) & 0o777
				}
			}
		}
	}
	old := unix.Umask(0o022)
	unix.Umask(old)
	return uint32(old) & 0o777
}
