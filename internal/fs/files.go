package fs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Files is a FileSystem that also serves a user interface's file
// operations (docs/files.md): listings, downloads of any regular file,
// streamed uploads and deletes, under the same resolution, locks and
// atomic publication as the tools. Messages use the verbs "list",
// "download", "upload" and "delete".
type Files interface {
	// List lists the folder t (followed, as Stat follows it) to opts.Depth
	// levels, symlinks below it listed and never followed.
	List(ctx context.Context, t Target, opts ListOptions) (Listing, error)
	// OpenFile opens t's regular file for a download: a folder, FIFO,
	// socket or device is fault.CodeNotRegularFile and never opened for
	// reading. The file is the caller's to close; Info describes it.
	OpenFile(ctx context.Context, t Target) (*os.File, Info, error)
	// PutFile stores body as t's whole content (see PutOptions).
	PutFile(ctx context.Context, t Target, body io.Reader, opts PutOptions) (PutOutcome, error)
	// DeleteFile removes t's regular file while it is at version expect;
	// a non-nil Keeper keeps it first (docs/checkpoints.md).
	DeleteFile(ctx context.Context, t Target, expect Version, k Keeper) error
}

var _ Files = (*Local)(nil)

// EntryType is what a listed entry is, without following it.
type EntryType string

// The listed entry types.
const (
	EntryFile    EntryType = "file"
	EntryDir     EntryType = "dir"
	EntrySymlink EntryType = "symlink"
	EntryOther   EntryType = "other"
)

// ListOptions shape a listing. Depth is 1..8 (the caller checks it);
// MaxEntries bounds the entries (at least 1); GitIgnore applies the
// .gitignore files found inside the root, from the root down.
type ListOptions struct {
	Depth      int
	MaxEntries int
	GitIgnore  bool
}

// Entry is one listed entry. Path is relative to the root, '/'-separated.
// Size is the lstat size (a symlink's is its target's length); Version is
// a regular file's version, "" for anything else.
type Entry struct {
	Path     string
	Type     EntryType
	Size     int64
	Modified time.Time
	Version  Version
}

// Listing is a folder's entries sorted by path (byte order). Truncated
// says entries were left out past MaxEntries: then every level is listed
// before the next one starts, so what is there is the shallowest part.
type Listing struct {
	Entries   []Entry
	Truncated bool
}

// ListMaxDepth is the deepest listing.
const ListMaxDepth = 8

// gitignoreMaxBytes bounds a .gitignore read for a listing; a larger one is
// skipped whole (rg reads it, but no real one is this large).
const gitignoreMaxBytes = 1 << 20

// listBatch is how many names one getdents round reads.
const listBatch = 1024

// List lists the folder t: breadth first, each folder opened beneath the
// listed one with RESOLVE_BENEATH and no symlink (OpenBeneath), every
// entry lstat'ed relative to its folder's descriptor, so nothing is
// followed and nothing leaves the root. The private folder and the staged
// temporary files are never listed.
func (l *Local) List(ctx context.Context, t Target, opts ListOptions) (Listing, error) {
	if err := ctx.Err(); err != nil {
		return Listing{}, aborted("list", err)
	}
	w, err := l.walkTarget(t, false)
	if errors.Is(err, errNotDir) {
		return Listing{}, notFoundErr("list", t.Display)
	}
	if err != nil {
		return Listing{}, l.fail("list", t.Display, err)
	}
	defer w.close(l)
	switch {
	case w.kind != walkFound:
		return Listing{}, notFoundErr("list", t.Display)
	case w.st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return Listing{}, fault.New(fault.CodeNotDirectory, fmt.Sprintf(`cannot list "%s": not a folder`, t.Display))
	}
	top, err := openatRetry(w.dir, w.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return Listing{}, l.fail("list", t.Display, err)
	}
	defer unix.Close(top)
	ls := lister{l: l, ctx: ctx, top: top, base: w.rel, max: opts.MaxEntries}
	if opts.GitIgnore {
		ls.ignore = &ignores{l: l, byDir: map[string][]gitignore.Pattern{}}
	}
	if err := ls.run(opts.Depth); err != nil {
		return Listing{}, l.fail("list", t.Display, err)
	}
	slices.SortFunc(ls.out.Entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return ls.out, nil
}

// lister is one listing's state.
type lister struct {
	l      *Local
	ctx    context.Context
	top    int    // the listed folder
	base   string // its real path relative to the root
	max    int
	ignore *ignores // nil: no gitignore rules
	out    Listing
}

// run lists level after level: level holds the folders (relative to top)
// whose entries make the next level.
func (ls *lister) run(depth int) error {
	level := []string{""}
	for d := 0; d < depth && len(level) > 0; d++ {
		var next []string
		for _, dir := range level {
			if err := ls.ctx.Err(); err != nil {
				return aborted("list", err)
			}
			sub, err := ls.folder(dir, d+1 < depth)
			if err != nil {
				return err
			}
			if ls.out.Truncated {
				return nil
			}
			next = append(next, sub...)
		}
		level = next
	}
	return nil
}

// folder lists one folder (dir relative to top) and returns its subfolders
// when deeper levels are wanted. A folder that vanished or was swapped for a
// symlink since its parent was read is skipped.
func (ls *lister) folder(dir string, deeper bool) ([]string, error) {
	fd := ls.top
	if dir != "" {
		var err error
		fd, err = OpenBeneath(ls.top, dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return nil, nil
		}
		defer unix.Close(fd)
	}
	names, more, err := ls.names(fd)
	if err != nil {
		return nil, err
	}
	var subs []string
	for _, name := range names {
		rel := joinRel(dir, name)
		full := joinRel(ls.base, rel)
		if full == PrivateDir || isTempName(name) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since the directory was read
		}
		e := Entry{Path: full, Size: st.Size, Modified: time.Unix(st.Mtim.Unix())}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type, e.Version = EntryFile, versionOf(&st)
		case unix.S_IFDIR:
			e.Type = EntryDir
		case unix.S_IFLNK:
			e.Type = EntrySymlink
		default:
			e.Type = EntryOther
		}
		if ls.ignore != nil && ls.ignore.ignored(full, e.Type == EntryDir) {
			continue
		}
		if len(ls.out.Entries) >= ls.max {
			ls.out.Truncated = true
			return nil, nil
		}
		ls.out.Entries = append(ls.out.Entries, e)
		if e.Type == EntryDir && deeper {
			subs = append(subs, rel)
		}
	}
	if more {
		ls.out.Truncated = true
	}
	return subs, nil
}

// names reads a folder's names, sorted, keeping at most what the listing
// can still take (plus one, to know there was more) so a huge folder costs
// bounded memory; more reports that names were dropped.
func (ls *lister) names(fd int) (names []string, more bool, err error) {
	dfd, err := unix.Dup(fd)
	if err != nil {
		return nil, false, err
	}
	f := os.NewFile(uintptr(dfd), "folder")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, false, err
	}
	// Ignored and hidden names do not count, so keep a margin beyond the
	// room left; a folder larger than that is cut in name order.
	keep := 2*(ls.max-len(ls.out.Entries)) + listBatch
	for {
		batch, err := f.Readdirnames(listBatch)
		names = append(names, batch...)
		if len(names) > keep {
			slices.Sort(names)
			names, more = names[:keep], true
		}
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if err := ls.ctx.Err(); err != nil {
			return nil, false, aborted("list", err)
		}
	}
	slices.Sort(names)
	return names, more, nil
}

// isTempName matches TempGlob (".<name>.toolfs-<id>.tmp").
func isTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") && strings.Contains(name, ".toolfs-")
}

// ignores are the .gitignore rules of a listing, read from inside the root
// only (each file opened beneath the root, never through a symlink), as rg
// applies them: the rules of every folder from the root down to an entry's
// folder, later (deeper) ones winning. The folder .git itself is left out.
type ignores struct {
	l     *Local
	byDir map[string][]gitignore.Pattern // folder (root-relative) → its own patterns
}

func (g *ignores) ignored(rel string, isDir bool) bool {
	parts := strings.Split(rel, "/")
	if parts[len(parts)-1] == ".git" && isDir {
		return true
	}
	var ps []gitignore.Pattern
	for i := range parts {
		ps = append(ps, g.patterns(parts[:i])...)
	}
	return len(ps) > 0 && gitignore.NewMatcher(ps).Match(parts, isDir)
}

// patterns are the rules of the folder dir (its components), read once.
func (g *ignores) patterns(dir []string) []gitignore.Pattern {
	key := strings.Join(dir, "/")
	if ps, ok := g.byDir[key]; ok {
		return ps
	}
	var ps []gitignore.Pattern
	if b, ok := g.l.readSmall(joinRel(key, ".gitignore"), gitignoreMaxBytes); ok {
		for line := range strings.SplitSeq(string(b), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
				continue
			}
			ps = append(ps, gitignore.ParsePattern(line, slices.Clone(dir)))
		}
	}
	g.byDir[key] = ps
	return ps
}

// readSmall reads the regular file rel (relative to the root, no symlink
// on the way) when it is at most max bytes.
func (l *Local) readSmall(rel string, max int64) ([]byte, bool) {
	fd, err := OpenBeneath(l.rootFd, rel, readFlags)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	return b, err == nil && int64(len(b)) <= max
}

// OpenFile opens the target for a download as OpenText opens it for a
// read: never blocking on a FIFO, never opening a device, the type checked
// before the open and again on the open descriptor.
func (l *Local) OpenFile(ctx context.Context, t Target) (*os.File, Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, Info{}, aborted("download", err)
	}
	o, err := l.openRegular(t, "download", false)
	if err == errMissing {
		return nil, Info{}, notFoundErr("download", t.Display)
	}
	if err != nil {
		return nil, Info{}, err
	}
	o.w.close(l)
	return o.f, infoOf(&o.st), nil
}

// PutOptions are an upload's precondition and bound. With IfMatch set the
// target must be a regular file at that version; with IfNoneMatch it must
// be absent; with neither it must be absent too, and an existing file is
// fault.CodePreconditionRequired (no blind overwrite, docs/files.md).
// MaxBytes bounds the body (fault.CodeBodyTooLarge past it). Keeper, when
// set, keeps what the upload replaces (docs/checkpoints.md).
type PutOptions struct {
	IfMatch     Version
	IfNoneMatch bool
	MaxBytes    int64
	Keeper      Keeper
}

// PutOutcome is a published upload.
type PutOutcome struct {
	Created bool
	Version Version
	Size    int64
}

// uploadBuffers are the copy buffers of uploads: large enough that the
// disk, not the loop, sets the pace; pooled so RSS stays flat.
var uploadBuffers = sync.Pool{New: func() any { return new([1 << 20]byte) }}

// errUploadRestage is the one case an upload cannot stage twice: the body
// is a stream, read once.
var errUploadRestage = errors.New("the upload's folder is on another filesystem than its staging folder")

// PutFile streams body into a temporary file staged and synced as a write
// stages it, without any lock (a slow upload holds no one up), after a
// first look at the precondition so a refused upload reads no body. Then,
// under the target's locks: the target is walked again (missing parent
// folders made now, so a failed upload leaves none), the precondition
// checked on what is there now, the Keeper given the file it replaces, and
// the file published atomically as a write publishes it:
// renameat2(RENAME_NOREPLACE) for a create, a rename only over the version
// checked for a replace. A body cut short, past MaxBytes, or a refused
// precondition leaves nothing behind.
func (l *Local) PutFile(ctx context.Context, t Target, body io.Reader, opts PutOptions) (PutOutcome, error) {
	if err := ctx.Err(); err != nil {
		return PutOutcome{}, aborted("upload", err)
	}
	w, err := l.checkUploadTarget(t)
	if err != nil {
		return PutOutcome{}, err
	}
	exists := w.kind == walkFound
	if err := checkPut(opts, exists, versionOf(&w.st), t.Display); err != nil {
		w.close(l)
		return PutOutcome{}, err
	}
	mode, owner := l.newMode, (*unix.Stat_t)(nil)
	if exists {
		st := w.st
		mode, owner = keptMode(&st), &st
	}
	dir := w.dir
	if dir < 0 {
		dir = l.rootFd // parents are missing: stage by the root's filesystem
	}
	var size int64
	filled := false
	var sum hash.Hash // the new content's SHA-256, for a Keeper
	if opts.Keeper != nil {
		sum = sha256.New()
	}
	tmp, err := l.stage(dir, lastName(t), mode, owner, func(f io.Writer) error {
		if filled {
			return errUploadRestage
		}
		filled = true
		buf := uploadBuffers.Get().(*[1 << 20]byte)
		defer uploadBuffers.Put(buf)
		var to io.Writer = writerOnly{f}
		if sum != nil {
			to = io.MultiWriter(f, sum)
		}
		n, cerr := io.CopyBuffer(to, &ctxBody{ctx: ctx, r: io.LimitReader(body, opts.MaxBytes+1)}, buf[:])
		size = n
		if cerr == nil && n > opts.MaxBytes {
			cerr = errTooLarge
		}
		return cerr
	})
	// The first walk's folder stays open: a file staged beside the target
	// lives in it until published.
	first := w
	defer first.close(l)
	if err != nil {
		return PutOutcome{}, l.uploadErr(t, opts, err)
	}
	defer tmp.discard()

	unlock, err := l.lockTarget(ctx, t.Key)
	if err != nil {
		return PutOutcome{}, l.lockErr("upload", t.Display, err)
	}
	defer unlock()
	if w, err = l.checkUploadTarget(t); err != nil {
		return PutOutcome{}, err
	}
	defer func() {
		if w.dir != first.dir {
			w.close(l)
		}
	}()
	exists = w.kind == walkFound
	version := versionOf(&w.st)
	if err := checkPut(opts, exists, version, t.Display); err != nil {
		return PutOutcome{}, err
	}
	if w.dir < 0 {
		w.close(l)
		if w, err = l.walkKey(t, true); err != nil {
			return PutOutcome{}, l.fail("upload", t.Display, err)
		}
		if w.kind != walkMissing || w.dir < 0 {
			return PutOutcome{}, staleUpload(t.Display)
		}
	}
	if err := ctx.Err(); err != nil {
		return PutOutcome{}, aborted("upload", err)
	}
	var kp *keeping
	if opts.Keeper != nil {
		old, rep := l.replacedAt(w, t, exists, version)
		defer old.close()
		if exists && old != nil && old.version != version {
			return PutOutcome{}, staleUpload(t.Display) // replaced between the walk and the open
		}
		kp = startKeeping(ctx, opts.Keeper, rep)
		defer kp.abandon() // before old.close: Keep reads the old file
		var s [32]byte
		copy(s[:], sum.Sum(nil))
		if err := kp.prepare(ctx, "upload", t.Display, &s); err != nil {
			return PutOutcome{}, err
		}
	}
	tmp.dir, tmp.name = w.dir, w.name
	if exists {
		if cur, ok := statAt(w.dir, w.name); !ok || versionOf(&cur) != version {
			return PutOutcome{}, staleUpload(t.Display)
		}
		err = tmp.publish()
	} else {
		err = tmp.publishNew()
		if errors.Is(err, unix.EEXIST) {
			return PutOutcome{}, staleUpload(t.Display)
		}
	}
	switch {
	case errors.Is(err, errUploadRestage):
		return PutOutcome{}, &fault.Error{Code: fault.CodeIO, Message: fmt.Sprintf(`cannot upload "%s": its folder is on another filesystem than the root; upload into an existing folder`, t.Display), Err: err}
	case errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENOTEMPTY):
		return PutOutcome{}, notRegular("upload", t.Display)
	case err != nil:
		return PutOutcome{}, l.fail("upload", t.Display, err)
	}
	v, err := tmp.commit()
	if kp != nil {
		p := &Published{Version: v} // published, even when the folder's sync failed
		if err != nil {
			p.Version = ""
		}
		kp.published(p)
	}
	if err != nil {
		return PutOutcome{}, l.fail("upload", t.Display, err)
	}
	return PutOutcome{Created: !exists, Version: v, Size: size}, nil
}

// replacedAt is the file an upload or delete replaces at w (opened, so its
// Keeper can read it; nil when absent or unreadable), as a Keeper hears
// of it.
func (l *Local) replacedAt(w walked, t Target, exists bool, version Version) (*oldFile, Replaced) {
	rep := Replaced{Path: l.relOf(t)}
	if !exists {
		return nil, rep
	}
	rep.Exists, rep.Version, rep.Size, rep.Mode = true, version, w.st.Size, keptMode(&w.st)
	old := openOld(w.dir, w.name)
	if old != nil {
		rep.Content = old
	}
	return old, rep
}

// checkUploadTarget walks to the target now: missing (its parents may be
// missing too) or a regular file.
func (l *Local) checkUploadTarget(t Target) (walked, error) {
	w, err := l.walkKey(t, false)
	if errors.Is(err, errNotDir) {
		return w, l.fail("upload", t.Display, err)
	}
	if err != nil {
		return w, l.fail("upload", t.Display, err)
	}
	if w.kind == walkDangling || w.kind == walkFound && !isRegular(&w.st) {
		w.close(l)
		return w, notRegular("upload", t.Display)
	}
	return w, nil
}

// checkPut checks an upload's precondition against what is there.
func checkPut(opts PutOptions, exists bool, version Version, display string) error {
	switch {
	case opts.IfMatch != "" && !exists:
		return fault.New(fault.CodeStaleVersion, fmt.Sprintf(`cannot upload "%s": file no longer exists`, display))
	case opts.IfMatch != "" && version != opts.IfMatch:
		return staleUpload(display)
	case opts.IfMatch == "" && exists && opts.IfNoneMatch:
		return fault.New(fault.CodeStaleVersion, fmt.Sprintf(`cannot upload "%s": file already exists`, display))
	case opts.IfMatch == "" && exists:
		return fault.New(fault.CodePreconditionRequired, fmt.Sprintf(`cannot upload "%s": file exists; send If-Match with its ETag to replace it`, display))
	}
	return nil
}

func staleUpload(display string) *fault.Error { return StaleError("upload", display) }

// errTooLarge is a body past PutOptions.MaxBytes.
var errTooLarge = errors.New("upload larger than its limit")

// uploadErr maps a failure while staging an upload's body.
func (l *Local) uploadErr(t Target, opts PutOptions, err error) error {
	var fe *fault.Error
	switch {
	case errors.Is(err, errTooLarge):
		return fault.New(fault.CodeBodyTooLarge, fmt.Sprintf(`cannot upload "%s": the body is larger than the %d-byte limit`, t.Display, opts.MaxBytes))
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return aborted("upload", err)
	case errors.Is(err, io.ErrUnexpectedEOF), isBodyError(err):
		return &fault.Error{Code: fault.CodeAborted, Message: fmt.Sprintf(`cannot upload "%s": the request body ended early`, t.Display), Err: err}
	}
	return l.fail("upload", t.Display, err)
}

// bodyError marks a failure reading the request body, as opposed to writing
// the temporary file.
type bodyError struct{ err error }

func (e bodyError) Error() string { return "reading the body: " + e.err.Error() }
func (e bodyError) Unwrap() error { return e.err }

func isBodyError(err error) bool {
	var be bodyError
	return errors.As(err, &be)
}

// ctxBody reads the body, checking ctx between reads and marking its
// failures as the body's.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = bodyError{err}
	}
	return n, err
}

// writerOnly hides the file's ReadFrom, so io.CopyBuffer uses our buffer.
type writerOnly struct{ io.Writer }

// lastName is the target's final name, for the temporary file's name.
func lastName(t Target) string {
	name := string(t.Key)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// DeleteFile removes the target's regular file under its locks, only at
// version expect, and syncs its folder; with a Keeper, the file is kept
// first and its version checked a last time after. A folder is never
// removed.
func (l *Local) DeleteFile(ctx context.Context, t Target, expect Version, k Keeper) error {
	unlock, err := l.lockTarget(ctx, t.Key)
	if err != nil {
		return l.lockErr("delete", t.Display, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return aborted("delete", err)
	}
	w, err := l.walkKey(t, false)
	if errors.Is(err, errNotDir) {
		return notFoundErr("delete", t.Display)
	}
	if err != nil {
		return l.fail("delete", t.Display, err)
	}
	defer w.close(l)
	switch {
	case w.kind != walkFound:
		return notFoundErr("delete", t.Display)
	case !isRegular(&w.st):
		return notRegular("delete", t.Display)
	case versionOf(&w.st) != expect:
		return StaleError("delete", t.Display)
	}
	var kp *keeping
	if k != nil {
		old, rep := l.replacedAt(w, t, true, expect)
		defer old.close()
		if old != nil && old.version != expect {
			return StaleError("delete", t.Display)
		}
		kp = startKeeping(ctx, k, rep)
		defer kp.abandon() // before old.close: Keep reads the file
		if err := kp.prepare(ctx, "delete", t.Display, nil); err != nil {
			return err
		}
		// Keeping took a while: the file must still be the one kept.
		if cur, ok := statAt(w.dir, w.name); !ok || !isRegular(&cur) || versionOf(&cur) != expect {
			return StaleError("delete", t.Display)
		}
	}
	if err := unix.Unlinkat(w.dir, w.name, 0); err != nil {
		return l.fail("delete", t.Display, err)
	}
	kp.published(&Published{}) // removed, even when the folder's sync fails
	if err := syncDir(w.dir); err != nil {
		return l.fail("delete", t.Display, err)
	}
	return nil
}

func notFoundErr(op, display string) *fault.Error {
	return fault.New(fault.CodeNotFound, fmt.Sprintf(`cannot %s "%s": not found`, op, display))
}
