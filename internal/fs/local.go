package fs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/zeebo/xxh3"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
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
	// InProcessLocksOnly leaves out the cross-process lock files in
	// <root>/.toolfs-api/locks, so only goroutines of this process exclude
	// each other: two processes on one root can then lose updates. It exists
	// to show what the shared locks buy (docs/reliability.md).
	InProcessLocksOnly bool
	// SweepInterval is how often staged temporary files that no live process
	// is writing are removed (one bounded batch each time). Zero means
	// DefaultSweepInterval; a negative value leaves only the sweep NewLocal
	// does.
	SweepInterval time.Duration
}

// Local is the FileSystem over one workspace root on a local (Linux)
// filesystem. Every path is walked one component at a time from a directory
// descriptor pinned on the root, never through a host path string, so the
// kernel confines each operation to the root even when symlinks change under
// it. Local is safe for concurrent use; Close must not race other calls.
type Local struct {
	root          *os.Root
	rootDir       *os.File // pins the root; its descriptor starts every walk
	rootFd        int
	rootReal      string // canonical root (symlinks resolved): the prefix of every Key
	rootAbs       string // root as given, made absolute: the base of Display paths
	diffMax       int64
	newMode       uint32 // 0666 &^ umask
	locks         keyLocks
	inProcessOnly bool
	private       private
	stopSweep     chan struct{}
	swept         chan struct{} // closed when the sweeper has stopped
	startupSweep  SweepCounts
	ignores       ignoreCache // compiled .gitignore files of listings (files.go)
	hooks         testHooks
}

// testHooks let tests reach the windows that only races reach otherwise.
type testHooks struct {
	beforePublish func()      // after the temporary file is staged
	beforeRename  func()      // after the last check, just before publication
	linkOnly      bool        // publish create-only by link+unlink, as without renameat2
	walkOpens     func(n int) // after each full walk: the folders it opened
	restaged      func()      // a publication met EXDEV and staged beside the target
	stagedSync    func()      // just before a staged file's sync
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

		inProcessOnly: opts.InProcessLocksOnly,
		private:       private{rootFd: int(dir.Fd())},
	}
	// An existing private folder is checked now, so a hostile one stops
	// start-up; a missing one is made by the first mutation, so a read-only
	// root still serves reads.
	p, err := l.private.get(false)
	var pe *privateError
	if errors.As(err, &pe) && pe.hostile {
		l.closeRoot()
		return nil, err
	}
	if p != nil {
		l.startupSweep = l.sweep(p, sweepStartBatches)
	}
	l.startSweeper(opts.SweepInterval)
	return l, nil
}

// Close stops the sweeper and releases the descriptors. The provider must
// not be used after.
func (l *Local) Close() error {
	if l.stopSweep != nil {
		close(l.stopSweep)
		<-l.swept
		l.stopSweep = nil
	}
	return l.closeRoot()
}

func (l *Local) closeRoot() error {
	l.private.close()
	return errors.Join(l.rootDir.Close(), l.root.Close())
}

// Stat reports the target's type, size and version, following symlinks
// inside the root. It reports errors with the verb "read", since the tools
// stat only to read.
func (l *Local) Stat(ctx context.Context, t Target) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, &fault.Error{Code: fault.CodeAborted, Message: "stat aborted", Err: err}
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
		return Info{}, &fault.Error{Code: fault.CodeAborted, Message: "stat aborted", Err: err}
	}
	if w.kind != walkFound {
		return Info{Type: TypeMissing, Size: -1}, nil
	}
	return infoOf(&w.st), nil
}

// OpenText opens the target for reading without ever blocking on a FIFO or
// opening a device, and reports the Info of the opened descriptor. The reader
// checks ctx before every Read (fault.CodeAborted "read aborted").
func (l *Local) OpenText(ctx context.Context, t Target) (io.ReadCloser, Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, Info{}, &fault.Error{Code: fault.CodeAborted, Message: "read aborted", Err: err}
	}
	o, err := l.openRegular(t, "read", false)
	if err == errMissing {
		return nil, Info{}, fault.New(fault.CodeNotFound, fmt.Sprintf(`cannot read "%s": not found`, t.Display))
	}
	if err != nil {
		return nil, Info{}, err
	}
	o.w.close(l)
	return &ctxReader{ctx: ctx, f: o.f, display: t.Display, hash: xxh3.New()}, infoOf(&o.st), nil
}

// readFlags opens every target whose bytes we read (read, edit, the diff
// basis of a write): never blocking on a FIFO, never following a symlink
// swapped in after the walk, never taking a terminal.
const readFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NOCTTY

// errMissing is a target that is not there (or whose parent is not a
// folder): read words it "not found", edit "changed since it was read".
var errMissing = errors.New("target missing")

// opened is a regular file open for reading, with the walk that found it
// (whose folder descriptor an edit stages beside).
type opened struct {
	w  walked
	f  *os.File
	st unix.Stat_t // of the open descriptor
}

func (o *opened) close(l *Local) {
	if o.f != nil {
		o.f.Close()
	}
	o.w.close(l)
}

// closeFileLater closes the file on its own goroutine: an edit that
// replaced it answers without waiting for the kernel to free its blocks
// (see oldFile).
func (o *opened) closeFileLater() {
	f := o.f
	o.f = nil
	go f.Close()
}

// openRegular walks to the target and opens it with readFlags, checking it
// is a regular file both before opening (so a device is never opened) and
// on the open descriptor (so a swap in between is caught). A missing target
// is errMissing; every other failure is a *fault.Error for op. exact (for a
// mutation) walks with walkKey.
func (l *Local) openRegular(t Target, op string, exact bool) (*opened, error) {
	walk := l.walkTarget
	if exact {
		walk = l.walkKey
	}
	w, err := walk(t, false)
	if errors.Is(err, errNotDir) {
		return nil, errMissing
	}
	if err != nil {
		return nil, l.fail(op, t.Display, err)
	}
	if w.kind != walkFound {
		w.close(l)
		return nil, errMissing
	}
	if !isRegular(&w.st) {
		w.close(l)
		return nil, notRegular(op, t.Display)
	}
	f, st, err := openAt(w.dir, w.name)
	switch {
	case err == unix.ENOENT:
		err = errMissing
	case err == unix.ELOOP: // swapped for a symlink since the walk
		err = notRegular(op, t.Display)
	case err != nil:
		err = l.fail(op, t.Display, err)
	case !isRegular(&st):
		f.Close()
		err = notRegular(op, t.Display)
	}
	if err != nil {
		w.close(l)
		return nil, err
	}
	return &opened{w: w, f: f, st: st}, nil
}

// openAt opens name in dir with readFlags and stats the descriptor.
func openAt(dir int, name string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dir, name, readFlags, 0)
	if err != nil {
		return nil, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, err
	}
	return os.NewFile(uintptr(fd), name), st, nil
}

// ctxReader is the reader OpenText returns: cancellable between reads, with
// errors mapped to *fault.Error.
// It hashes what it reads (ContentHasher), so a read records the hash of
// the bytes it saw (docs/edits.md, "No false staleness").
type ctxReader struct {
	ctx     context.Context
	f       *os.File
	display string
	hash    *xxh3.Hasher
	eof     bool
}

var _ ContentHasher = (*ctxReader)(nil)

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, &fault.Error{Code: fault.CodeAborted, Message: "read aborted", Err: err}
	}
	n, err := r.f.Read(p)
	r.hash.Write(p[:n])
	if err == io.EOF {
		r.eof = true
	}
	if err != nil && err != io.EOF {
		return n, ioError("read", r.display, err)
	}
	return n, err
}

// ContentHash is the hash of every byte read, once the reader reached EOF.
func (r *ctxReader) ContentHash() (Hash, bool) {
	if !r.eof {
		return "", false
	}
	return hashOf(r.hash), true
}

// ReadAt reads at off without moving the reader (io.ReaderAt).
func (r *ctxReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, &fault.Error{Code: fault.CodeAborted, Message: "read aborted", Err: err}
	}
	n, err := r.f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, ioError("read", r.display, err)
	}
	return n, err
}

func (r *ctxReader) Close() error { return r.f.Close() }

// infoOf converts a followed stat into Info.
func infoOf(st *unix.Stat_t) Info {
	info := Info{Type: TypeOther, Size: -1, Version: versionOf(st), Changed: time.Unix(st.Ctim.Unix()), Mode: keptMode(st)}
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

func notRegular(op, display string) *fault.Error {
	return fault.New(fault.CodeNotRegularFile, fmt.Sprintf(`cannot %s "%s": not a regular file`, op, display))
}

// fail maps a walk or syscall error to the contract's *fault.Error for op on
// display. Messages never carry host paths; the cause stays in Err.
func (l *Local) fail(op, display string, err error) error {
	var e *fault.Error
	if errors.As(err, &e) {
		return e
	}
	var pe *privateError
	switch {
	case errors.As(err, &pe):
		return privateErr(op, display, err)
	case errors.Is(err, errEscape), errors.Is(err, errPrivate):
		return &fault.Error{Code: fault.CodeSandboxDenied, Message: fmt.Sprintf(`cannot %s "%s": outside the workspace root`, op, display), Err: err}
	case errors.Is(err, errMoved):
		e := StaleError(op, display)
		e.Err = err
		return e
	case errors.Is(err, errLoop), errors.Is(err, unix.ELOOP):
		return &fault.Error{Code: fault.CodeNotFound, Message: fmt.Sprintf(`cannot resolve "%s": too many levels of symbolic links`, display), Err: err}
	case errors.Is(err, errNotDir), errors.Is(err, unix.ENOTDIR):
		return &fault.Error{Code: fault.CodeNotFound, Message: fmt.Sprintf(`cannot resolve "%s": a parent path segment is not a directory`, display), Err: err}
	case errors.Is(err, unix.ENAMETOOLONG):
		return &fault.Error{Code: fault.CodeNotFound, Message: fmt.Sprintf(`cannot resolve "%s": file name too long`, display), Err: err}
	}
	return ioError(op, display, err)
}

// ioError maps EACCES/EPERM to fault.CodePermission and anything else to fault.CodeIO
// with the errno's short text.
func ioError(op, display string, err error) *fault.Error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return &fault.Error{Code: fault.CodePermission, Message: fmt.Sprintf(`cannot %s "%s": permission denied`, op, display), Err: err}
	case errors.As(err, &errno):
		return &fault.Error{Code: fault.CodeIO, Message: fmt.Sprintf(`cannot %s "%s": %s`, op, display, errno.Error()), Err: err}
	}
	return &fault.Error{Code: fault.CodeIO, Message: fmt.Sprintf(`cannot %s "%s": i/o error`, op, display), Err: err}
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
