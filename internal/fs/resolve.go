package fs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

const (
	// maxSymlinkHops bounds the symlinks followed in one resolution (Linux's
	// own limit is 40).
	maxSymlinkHops = 40
	// maxWalkSteps bounds the components processed in one resolution, so a
	// hostile chain of links full of ".." cannot make a walk arbitrarily long.
	maxWalkSteps = 4096
	// maxRetries bounds how often one walk looks again at a name that
	// changed under it, so churn ends in an answer, not a loop.
	maxRetries = 64
)

var (
	errEscape = errors.New("path leaves the workspace root")
	errLoop   = errors.New("too many symbolic links or path components")
	errNotDir = errors.New("a parent path segment is not a directory")
	// errMoved: a mutation's walk of a Key no longer ends at the real path
	// the Key names (walkKey).
	errMoved = errors.New("the path leads elsewhere than when it was resolved")
)

// Resolve turns path into a Target; see FileSystem.Resolve. A relative cwd
// is relative to the root. Display is made absolute and cleaned lexically
// (as Node's path.resolve); the walk then follows symlinks component by
// component through the root descriptor, so only the kernel's view decides.
func (l *Local) Resolve(ctx context.Context, op, path, cwd string) (Target, error) {
	t, _, err := l.resolve(ctx, op, path, cwd)
	return t, err
}

// ResolveStat is Resolve and then Stat of its Target, from the one walk
// (ResolveStater): what that walk found at the end is what Stat would find
// walking the Target's real path again.
func (l *Local) ResolveStat(ctx context.Context, op, path, cwd string) (Target, Info, error) {
	t, w, err := l.resolve(ctx, op, path, cwd)
	if err != nil {
		return Target{}, Info{}, err
	}
	if w.kind != walkFound {
		return t, Info{Type: TypeMissing, Size: -1}, nil
	}
	return t, infoOf(&w.st), nil
}

func (l *Local) resolve(ctx context.Context, op, path, cwd string) (Target, walked, error) {
	if err := ctx.Err(); err != nil {
		return Target{}, walked{}, &fault.Error{Code: fault.CodeAborted, Message: "resolve aborted", Err: err}
	}
	if strings.TrimSpace(path) == "" {
		return Target{}, walked{}, fault.New(fault.CodeNotFound, "file_path must be a non-empty string")
	}
	display := l.display(path, cwd)
	if strings.IndexByte(path, 0) >= 0 || strings.IndexByte(cwd, 0) >= 0 {
		return Target{}, walked{}, fault.New(fault.CodeNotFound, fmt.Sprintf(`cannot resolve "%s": invalid path`, strings.ReplaceAll(display, "\x00", `\x00`)))
	}
	rel, ok := l.relOfAbs(display)
	if !ok {
		return Target{}, walked{}, l.fail(op, display, errEscape)
	}
	w, err := l.walk(rel, false)
	if err != nil {
		return Target{}, walked{}, l.fail(op, display, err)
	}
	w.close(l)
	if err := ctx.Err(); err != nil {
		return Target{}, walked{}, &fault.Error{Code: fault.CodeAborted, Message: "resolve aborted", Err: err}
	}
	key := l.keyFor(w.rel)
	// We walk one component at a time, so we could reach (and create) paths
	// longer than PATH_MAX; no other program could open them, and one such
	// file makes ripgrep fail every search of the root.
	if len(display) >= unix.PathMax || len(key) >= unix.PathMax {
		return Target{}, walked{}, l.fail(op, display, unix.ENAMETOOLONG)
	}
	return Target{Key: key, Display: display}, w, nil
}

// display is the absolute, lexically cleaned path the model sees.
func (l *Local) display(path, cwd string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	base := l.rootAbs
	switch {
	case filepath.IsAbs(cwd):
		base = cwd
	case cwd != "":
		base = filepath.Join(l.rootAbs, cwd)
	}
	return filepath.Join(base, path)
}

// relOfAbs returns the root-relative form of a clean absolute path that is
// lexically inside the root, as given or canonical.
func (l *Local) relOfAbs(p string) (string, bool) {
	if rel, ok := within(l.rootAbs, p); ok {
		return rel, true
	}
	return within(l.rootReal, p)
}

// within reports p relative to base when p is base or below it.
func within(base, p string) (string, bool) {
	if p == base {
		return "", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	rel, ok := strings.CutPrefix(p, prefix)
	return rel, ok
}

// keyFor is the Key of a real root-relative path.
func (l *Local) keyFor(rel string) TargetKey {
	return TargetKey(joinRel(l.rootReal, rel))
}

func joinRel(dir, name string) string {
	if name == "" {
		return dir
	}
	if dir == "" {
		return name
	}
	return filepath.Join(dir, name)
}

// walkTarget walks the real path held in t.Key again, now: whatever changed
// since Resolve (a folder swapped for a symlink, say) is judged afresh.
func (l *Local) walkTarget(t Target, create bool) (walked, error) {
	rel, ok := within(l.rootReal, string(t.Key))
	if !ok || (rel != "" && filepath.Clean("/"+rel) != "/"+rel) {
		return walked{dir: -1}, errEscape // not a Key this provider made
	}
	return l.walk(rel, create)
}

// walkKey is walkTarget for a mutation: the walk must end at the very real
// path t.Key names. A Key is a real path, so walking it meets no symlink
// unless a name on the way was swapped for one since Resolve; following it
// would mutate another file than the one judged (by the fence, by
// an approval: docs/sandbox.md) and locked. Such a walk is errMoved: a
// mutation lands at its Key or nowhere. A swap that leaves the root is
// refused by the walk itself, as before.
func (l *Local) walkKey(t Target, create bool) (walked, error) {
	w, err := l.walkTarget(t, create)
	if err != nil {
		return w, err
	}
	if rel, _ := within(l.rootReal, string(t.Key)); w.rel != rel {
		w.close(l)
		return walked{dir: -1}, errMoved
	}
	return w, nil
}

// walkKind says what a walk found at its end.
type walkKind int

const (
	walkFound    walkKind = iota // st describes the (followed) entry
	walkMissing                  // the entry (or an ancestor) does not exist
	walkDangling                 // the final component is a symlink to nothing
)

// walked is the end of a walk. When found, or missing with an existing
// parent, dir is an open descriptor of the parent folder and name a single
// component in it, so callers act with *at syscalls and never re-resolve a
// path string. The root itself is dir = root, name ".".
type walked struct {
	kind walkKind
	rel  string // real root-relative path; for dangling, the link's own path
	dir  int    // -1 when none
	name string
	st   unix.Stat_t
}

func (w *walked) close(l *Local) {
	if w.dir >= 0 && w.dir != l.rootFd {
		unix.Close(w.dir)
	}
	w.dir = -1
}

// walk resolves a root-relative path from the root descriptor, one
// component at a time: lstat, then follow symlinks by reading them (an
// absolute target must land inside the root), open folders with O_NOFOLLOW,
// and handle ".." by popping the stack of folders entered, so a ".." costs
// no opens (docs/decisions-fs.md). With create, missing parent folders are
// made (mode 0777, less the umask) on the way. A name that changes between
// its lstat and the next step (a folder swapped for a symlink, say) is looked
// at again, at most maxRetries times per walk. No walk enters PrivateDir.
func (l *Local) walk(rel string, create bool) (w walked, err error) {
	if w, ok := l.walkFast(rel); ok {
		return w, nil
	}
	w.dir = -1
	parts := splitPath(rel)
	s := dirStack{l: l}
	defer s.close()
	if l.hooks.walkOpens != nil {
		defer func() { l.hooks.walkOpens(s.opens) }()
	}
	var link []string // the path's own final symlink, for dangling reports
	hops, steps, retries := 0, 0, 0
	again := func(c string) error {
		if retries++; retries > maxRetries {
			return errLoop
		}
		parts = append([]string{c}, parts...)
		return nil
	}
	for len(parts) > 0 {
		if steps++; steps > maxWalkSteps {
			return w, errLoop
		}
		c := parts[0]
		parts = parts[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(s.names) == 0 {
				return w, errEscape
			}
			if err := s.pop(); err != nil {
				return w, err
			}
			continue
		}
		if len(s.names) == 0 && c == PrivateDir {
			return w, errPrivate
		}
		dir := s.top()
		var st unix.Stat_t
		err := unix.Fstatat(dir, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.ENOENT {
			if create && len(parts) > 0 {
				if err := unix.Mkdirat(dir, c, 0o777); err != nil && err != unix.EEXIST {
					return w, err
				}
				parts = append([]string{c}, parts...)
				continue
			}
			return l.missing(s.take(), s.names, c, parts, link)
		}
		if err != nil {
			return w, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := readlinkat(dir, c)
			if err == unix.ENOENT || err == unix.EINVAL { // changed since the lstat: look again
				if err := again(c); err != nil {
					return w, err
				}
				continue
			}
			if err != nil {
				return w, err
			}
			if hops++; hops > maxSymlinkHops {
				return w, errLoop
			}
			if len(parts) == 0 && link == nil {
				link = append(append([]string{}, s.names...), c)
			}
			if filepath.IsAbs(target) {
				r, ok := l.relOfAbs(filepath.Clean(target))
				if !ok {
					return w, errEscape
				}
				s.reset()
				target = r
			}
			parts = append(splitPath(target), parts...)
		case unix.S_IFDIR:
			if len(parts) == 0 {
				return l.found(s.take(), s.names, c, st), nil
			}
			s.opens++
			fd, err := unix.Openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			switch err {
			case nil:
			case unix.ELOOP, unix.ENOTDIR, unix.ENOENT: // changed since the lstat: look again
				if err := again(c); err != nil {
					return w, err
				}
				continue
			default:
				return w, err
			}
			s.push(c, fd)
		default:
			if len(parts) > 0 {
				return w, errNotDir
			}
			return l.found(s.take(), s.names, c, st), nil
		}
	}
	// The path ended on a folder already entered: the root, or a ".." or
	// symlink that ended on a folder. Describe it from its parent.
	if len(s.names) == 0 {
		var st unix.Stat_t
		if err := unix.Fstatat(l.rootFd, ".", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return w, err
		}
		return walked{kind: walkFound, rel: "", dir: l.rootFd, name: ".", st: st}, nil
	}
	name := s.names[len(s.names)-1]
	if err := s.pop(); err != nil {
		return w, err
	}
	dir := s.take()
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		l.closeDir(dir)
		if err == unix.ENOENT { // moved away since we entered it
			return w, errNotDir
		}
		return w, err
	}
	return l.found(dir, s.names, name, st), nil
}

// maxKeptDirs bounds the folder descriptors one walk keeps open. Deeper
// paths keep the deepest ones; a ".." that pops below them reopens half a
// window from the root at once, so each open is paid for by many pops.
const maxKeptDirs = 256

// dirStack is the chain of folders a walk has entered below the root, each
// with its descriptor: ".." pops to the folder actually come through rather
// than re-walking the path from the root, which let a crafted tree of
// symlinks full of "a/.." cost seconds of CPU (docs/reliability-hostile.md).
type dirStack struct {
	l     *Local
	names []string // the real root-relative components of the current folder
	fds   []int    // fds[i] is the folder names[:i+1], or -1 once evicted
	low   int      // fds[:low] are evicted
	opens int      // folders opened so far (for tests)
}

// top is the current folder's descriptor.
func (s *dirStack) top() int {
	if len(s.fds) == 0 {
		return s.l.rootFd
	}
	return s.fds[len(s.fds)-1]
}

// push enters name, whose open descriptor fd the stack now owns.
func (s *dirStack) push(name string, fd int) {
	s.names = append(s.names, name)
	s.fds = append(s.fds, fd)
	if len(s.fds)-s.low > maxKeptDirs {
		unix.Close(s.fds[s.low])
		s.fds[s.low] = -1
		s.low++
	}
}

// pop leaves the current folder for its parent, reopening the parent (and
// the half window below it) when it was evicted.
func (s *dirStack) pop() error {
	n := len(s.fds)
	s.l.closeDir(s.fds[n-1])
	s.names, s.fds = s.names[:n-1], s.fds[:n-1]
	n--
	if n == 0 || s.fds[n-1] >= 0 {
		if s.low > n {
			s.low = n
		}
		return nil
	}
	keepFrom := max(0, n-maxKeptDirs/2)
	dir := s.l.rootFd
	for i := range n {
		s.opens++
		fd, err := unix.Openat(dir, s.names[i], unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != s.l.rootFd && i-1 < keepFrom {
			unix.Close(dir)
		}
		if err != nil {
			s.fds = s.fds[:i] // the rest are -1 or already closed
			if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
				return errNotDir // moved or swapped since we entered it
			}
			return err
		}
		if i >= keepFrom {
			s.fds[i] = fd
		}
		dir = fd
	}
	s.low = keepFrom
	return nil
}

// take hands the current folder's descriptor to the caller (who closes it
// unless it is the root).
func (s *dirStack) take() int {
	if len(s.fds) == 0 {
		return s.l.rootFd
	}
	fd := s.fds[len(s.fds)-1]
	s.fds[len(s.fds)-1] = -1
	return fd
}

// reset goes back to the root (an absolute symlink target).
func (s *dirStack) reset() {
	s.close()
	s.names, s.fds, s.low = s.names[:0:0], s.fds[:0], 0
}

func (s *dirStack) close() {
	for _, fd := range s.fds {
		s.l.closeDir(fd)
	}
	s.fds = s.fds[:0]
}

// noOpenat2 is set once openat2 turns out to be missing (Linux < 5.6).
var noOpenat2 atomic.Bool

// walkFast is the common case in three syscalls: the parent folder opened
// by openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS (the kernel refuses
// any symlink or escape on the way), then an lstat of the final name. It
// declines (ok false) whenever a symlink, an error or anything unusual is
// met, leaving it to the full walk.
func (l *Local) walkFast(rel string) (walked, bool) {
	if rel == "" || noOpenat2.Load() || rel == PrivateDir || strings.HasPrefix(rel, PrivateDir+"/") {
		return walked{}, false
	}
	dir, name := l.rootFd, rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		fd, err := unix.Openat2(l.rootFd, rel[:i], &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			if err == unix.ENOSYS {
				noOpenat2.Store(true)
			}
			return walked{}, false
		}
		dir, name = fd, rel[i+1:]
	}
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT != unix.S_IFLNK:
		return walked{kind: walkFound, rel: rel, dir: dir, name: name, st: st}, true
	case err == unix.ENOENT && name != ".." && name != ".":
		return walked{kind: walkMissing, rel: rel, dir: dir, name: name}, true
	}
	l.closeDir(dir)
	return walked{}, false
}

func (l *Local) found(dir int, resolved []string, name string, st unix.Stat_t) walked {
	return walked{kind: walkFound, rel: filepath.Join(append(resolved, name)...), dir: dir, name: name, st: st}
}

// missing ends a walk at a component that does not exist. The Key is the
// real path of the deepest existing folder plus the rest, cleaned lexically
// (which must stay inside the root); a dangling final symlink is reported
// as itself.
func (l *Local) missing(dir int, resolved []string, c string, rest, link []string) (walked, error) {
	rel := filepath.Clean(filepath.Join(append(append(append([]string{}, resolved...), c), rest...)...))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return walked{dir: -1}, errEscape
	}
	if link != nil {
		l.closeDir(dir)
		return walked{kind: walkDangling, rel: filepath.Join(link...), dir: -1}, nil
	}
	if len(rest) > 0 {
		l.closeDir(dir)
		dir = -1
	}
	return walked{kind: walkMissing, rel: rel, dir: dir, name: c}, nil
}

func (l *Local) closeDir(fd int) {
	if fd >= 0 && fd != l.rootFd {
		unix.Close(fd)
	}
}

// readlinkat reads a symlink's target, growing the buffer as needed.
func readlinkat(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}

// splitPath splits on "/" without cleaning: ".." must be applied to the
// folders actually reached, not lexically.
func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
