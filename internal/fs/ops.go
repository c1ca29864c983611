package fs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// The folder-aware operations of SPEC §26 (docs/files.md, "Move, delete
// and mkdir"): a move (a rename, never a copy), the delete of an empty
// folder, the making of a folder. Each acts with *at syscalls on the
// descriptors of a kernel-checked walk, so it stays beneath the root, and
// refuses the root itself and the private folder (the walk never enters
// it).

// Ops is the provider's side of move, delete of a folder, and mkdir.
type Ops interface {
	Move(ctx context.Context, from, to Target, opts MoveOptions) (MoveOutcome, error)
	RemoveFolder(ctx context.Context, t Target, opts FolderOptions) (Info, error)
	MakeFolder(ctx context.Context, t Target, opts FolderOptions) (MadeFolder, error)
}

var _ Ops = (*Local)(nil)

// MoveOptions are a move's guards and its keepers.
type MoveOptions struct {
	// From is the version the source must be at (nil: any).
	From *Version
	// To is what the destination must be: nil with Overwrite false, absent
	// (the kernel's no-replace rename); with Overwrite, ToAbsent or the
	// version *To (nil and not ToAbsent: any file).
	To        *Version
	ToAbsent  bool
	Overwrite bool
	// FromKeeper and ToKeeper record a file move (the source removed, the
	// destination made), as a delete and a write do; a folder's move calls
	// neither.
	FromKeeper, ToKeeper Keeper
	DryRun               bool
}

// MoveOutcome is what a move did (or, for a dry run, would do): the
// source's type and version before, the destination's version after (a
// dry run's: before, "" when absent), whether it replaced a file.
type MoveOutcome struct {
	Type     FileType
	From     Version
	To       Version
	Replaced bool
	Size     int64
}

// FolderOptions are the options of a folder's removal or making.
type FolderOptions struct {
	// Expect is the version the folder must be at (nil: any).
	Expect *Version
	DryRun bool
}

// MadeFolder is what MakeFolder did: the folders it made (real,
// root-relative, outermost first; none when the folder existed) and the
// folder's version.
type MadeFolder struct {
	Made    []string
	Version Version
}

func moveExists(to Target) *fault.Error {
	return fault.New(fault.CodeAlreadyExists, `cannot move to "`+to.Display+`": it exists; pass overwrite: true after reading it`)
}

func theRoot(op, display string) *fault.Error {
	return fault.New(fault.CodeInvalidArgument, `cannot `+op+` "`+display+`": it is the workspace root`)
}

// Move renames from to to under both targets' locks (a file or a folder):
// renameat2 with RENAME_NOREPLACE unless Overwrite, so a file created at
// the destination meanwhile is never replaced (FS_ALREADY_EXISTS);
// with Overwrite, only a file replaces a file, at the version the guard
// names. Missing parent folders of the destination are made.
func (l *Local) Move(ctx context.Context, from, to Target, opts MoveOptions) (MoveOutcome, error) {
	lk, err := l.LockTargetsFor(ctx, "move", []Target{from, to})
	if err != nil {
		return MoveOutcome{}, err
	}
	defer lk.Unlock()
	if err := ctx.Err(); err != nil {
		return MoveOutcome{}, aborted("move", err)
	}
	src, err := l.walkKey(from, false)
	if errors.Is(err, errNotDir) {
		return MoveOutcome{}, notFoundErr("move", from.Display)
	}
	if err != nil {
		return MoveOutcome{}, l.fail("move", from.Display, err)
	}
	defer src.close(l)
	switch {
	case src.kind != walkFound:
		return MoveOutcome{}, notFoundErr("move", from.Display)
	case src.name == "." || src.rel == "":
		return MoveOutcome{}, theRoot("move", from.Display)
	}
	isDir := src.st.Mode&unix.S_IFMT == unix.S_IFDIR
	if !isDir && !isRegular(&src.st) {
		return MoveOutcome{}, notRegular("move", from.Display)
	}
	out := MoveOutcome{Type: TypeFile, From: versionOf(&src.st), Size: src.st.Size}
	if isDir {
		out.Type = TypeDirectory
	}
	if opts.From != nil && out.From != *opts.From {
		return MoveOutcome{}, StaleError("move", from.Display)
	}
	if isDir && within2(src.rel, l.relOf(to)) {
		return MoveOutcome{}, fault.New(fault.CodeInvalidArgument, `cannot move "`+from.Display+`" into itself ("`+to.Display+`")`)
	}
	dst, err := l.walkKey(to, !opts.DryRun)
	if errors.Is(err, errNotDir) {
		return MoveOutcome{}, l.fail("move", to.Display, err)
	}
	if err != nil {
		return MoveOutcome{}, l.fail("move", to.Display, err)
	}
	defer dst.close(l)
	if dst.rel == "" || dst.name == "." {
		return MoveOutcome{}, moveExists(to)
	}
	exists := dst.kind != walkMissing
	switch {
	case exists && !opts.Overwrite:
		return MoveOutcome{}, moveExists(to)
	case exists && (isDir || dst.kind != walkFound || !isRegular(&dst.st)):
		return MoveOutcome{}, fault.New(fault.CodeNotRegularFile, `cannot move to "`+to.Display+`": overwrite replaces a file with a file, never a folder`)
	case exists && opts.ToAbsent:
		return MoveOutcome{}, NotObservedError(to.Display)
	case exists && opts.To != nil && versionOf(&dst.st) != *opts.To:
		return MoveOutcome{}, StaleError("move", to.Display)
	case !exists && opts.To != nil:
		return MoveOutcome{}, StaleError("move", to.Display)
	}
	if exists {
		out.To, out.Replaced = versionOf(&dst.st), true
	}
	if opts.DryRun {
		return out, nil
	}
	if dst.dir < 0 {
		return MoveOutcome{}, notFoundErr("move", to.Display)
	}
	var ks []*keeping
	if !isDir && (opts.FromKeeper != nil || opts.ToKeeper != nil) {
		old, rep := l.replacedAt(src, from, true, out.From)
		defer old.close()
		sum, err := sha256At(ctx, old)
		if err != nil {
			return MoveOutcome{}, l.fail("move", from.Display, err)
		}
		var dold *oldFile
		var drep Replaced
		if exists {
			dold, drep = l.replacedAt(dst, to, true, out.To)
			defer dold.close()
		} else {
			drep = Replaced{Path: l.relOf(to)}
		}
		ks = append(ks, startKeeping(ctx, opts.FromKeeper, rep), startKeeping(ctx, opts.ToKeeper, drep))
		// Before the files close: Keep reads them.
		defer ks[0].abandon()
		defer ks[1].abandon()
		if err := ks[0].prepare(ctx, "move", from.Display, nil); err != nil {
			// A writer outside our locks rewrote the source while it was kept.
			if cur, ok := statAt(src.dir, src.name); !ok || versionOf(&cur) != out.From {
				return MoveOutcome{}, StaleError("move", from.Display)
			}
			return MoveOutcome{}, err
		}
		if err := ks[1].prepare(ctx, "move", to.Display, sum); err != nil {
			return MoveOutcome{}, err
		}
		// Keeping took a while: both must still be the ones kept.
		if cur, ok := statAt(src.dir, src.name); !ok || versionOf(&cur) != out.From {
			return MoveOutcome{}, StaleError("move", from.Display)
		}
	}
	if opts.Overwrite && exists {
		err = unix.Renameat(src.dir, src.name, dst.dir, dst.name)
	} else {
		err = unix.Renameat2(src.dir, src.name, dst.dir, dst.name, unix.RENAME_NOREPLACE)
	}
	switch {
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		return MoveOutcome{}, moveExists(to)
	case errors.Is(err, unix.EINVAL) && isDir:
		return MoveOutcome{}, fault.New(fault.CodeInvalidArgument, `cannot move "`+from.Display+`" into itself ("`+to.Display+`")`)
	case err != nil:
		return MoveOutcome{}, l.fail("move", from.Display, err)
	}
	var st unix.Stat_t
	if unix.Fstatat(dst.dir, dst.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		out.To = versionOf(&st)
	}
	for i, kp := range ks {
		if i == 0 {
			kp.published(&Published{})
		} else {
			kp.published(&Published{Version: out.To})
		}
	}
	if err := syncDir(src.dir); err != nil {
		return out, l.fail("move", from.Display, err)
	}
	if err := syncDir(dst.dir); err != nil {
		return out, l.fail("move", to.Display, err)
	}
	return out, nil
}

// within2 reports whether rel b is a or lies inside it.
func within2(a, b string) bool {
	return b == a || len(b) > len(a) && b[:len(a)] == a && b[len(a)] == '/'
}

// sha256At hashes an old file (nil: unreadable, no sum).
func sha256At(ctx context.Context, o *oldFile) (*[32]byte, error) {
	if o == nil {
		return nil, nil
	}
	h := sha256.New()
	buf := make([]byte, 256<<10)
	r := io.NewSectionReader(o, 0, o.size)
	for {
		if err := ctx.Err(); err != nil {
			return nil, aborted("move", err)
		}
		n, err := r.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return &sum, nil
}

// RemoveFolder removes an empty folder (never the root, never a file:
// DeleteFile removes files) under its lock.
func (l *Local) RemoveFolder(ctx context.Context, t Target, opts FolderOptions) (Info, error) {
	unlock, err := l.lockTarget(ctx, t.Key)
	if err != nil {
		return Info{}, l.lockErr("delete", t.Display, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return Info{}, aborted("delete", err)
	}
	w, err := l.walkKey(t, false)
	if errors.Is(err, errNotDir) {
		return Info{}, notFoundErr("delete", t.Display)
	}
	if err != nil {
		return Info{}, l.fail("delete", t.Display, err)
	}
	defer w.close(l)
	switch {
	case w.kind != walkFound:
		return Info{}, notFoundErr("delete", t.Display)
	case w.rel == "" || w.name == ".":
		return Info{}, theRoot("delete", t.Display)
	case w.st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return Info{}, StaleError("delete", t.Display)
	case opts.Expect != nil && versionOf(&w.st) != *opts.Expect:
		return Info{}, StaleError("delete", t.Display)
	}
	info := infoOf(&w.st)
	if opts.DryRun {
		if !emptyFolder(w.dir, w.name) {
			return Info{}, notEmpty(t.Display)
		}
		return info, nil
	}
	err = unix.Unlinkat(w.dir, w.name, unix.AT_REMOVEDIR)
	switch {
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return Info{}, notEmpty(t.Display)
	case err != nil:
		return Info{}, l.fail("delete", t.Display, err)
	}
	if err := syncDir(w.dir); err != nil {
		return Info{}, l.fail("delete", t.Display, err)
	}
	return info, nil
}

func notEmpty(display string) *fault.Error {
	return fault.New(fault.CodeNotEmpty, `cannot delete "`+display+`": the folder is not empty`)
}

// emptyFolder reports whether dir/name holds no entry.
func emptyFolder(dir int, name string) bool {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			return err == nil
		}
		if _, _, names := unix.ParseDirent(buf[:n], 1, nil); len(names) > 0 {
			return false
		}
	}
}

// MakeFolder makes the folder t and any missing parents (0777 less the
// umask, as a write's parents are); an existing folder is fine. Something
// else in the way is FS_NOT_DIRECTORY.
func (l *Local) MakeFolder(ctx context.Context, t Target, opts FolderOptions) (MadeFolder, error) {
	unlock, err := l.lockTarget(ctx, t.Key)
	if err != nil {
		return MadeFolder{}, l.lockErr("mkdir", t.Display, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return MadeFolder{}, aborted("mkdir", err)
	}
	rel := l.relOf(t)
	var made []string
	if !opts.DryRun {
		// The folders missing on the way, outermost first, so a revert
		// knows which it may remove (docs/files.md).
		for i := 0; i <= len(rel); i++ {
			if i < len(rel) && rel[i] != '/' {
				continue
			}
			if pw, err := l.walk(rel[:i], false); err == nil {
				missing := pw.kind == walkMissing
				pw.close(l)
				if missing {
					made = append(made, rel[:i])
				}
			}
		}
	}
	w, err := l.walkKey(t, !opts.DryRun)
	if errors.Is(err, errNotDir) {
		return MadeFolder{}, notAFolder(t.Display)
	}
	if err != nil {
		return MadeFolder{}, l.fail("mkdir", t.Display, err)
	}
	defer w.close(l)
	switch {
	case w.kind == walkFound && w.st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return MadeFolder{Version: versionOf(&w.st)}, nil
	case w.kind != walkMissing:
		return MadeFolder{}, notAFolder(t.Display)
	case opts.DryRun:
		return MadeFolder{}, nil
	case w.dir < 0:
		return MadeFolder{}, notFoundErr("mkdir", t.Display)
	}
	if err := unix.Mkdirat(w.dir, w.name, 0o777); err != nil && !errors.Is(err, unix.EEXIST) {
		return MadeFolder{}, l.fail("mkdir", t.Display, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(w.dir, w.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return MadeFolder{}, l.fail("mkdir", t.Display, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return MadeFolder{}, notAFolder(t.Display)
	}
	if err := syncDir(w.dir); err != nil {
		return MadeFolder{}, l.fail("mkdir", t.Display, err)
	}
	return MadeFolder{Made: made, Version: versionOf(&st)}, nil
}

func notAFolder(display string) *fault.Error {
	return fault.New(fault.CodeNotDirectory, fmt.Sprintf(`cannot create folder "%s": a file is in the way`, display))
}
