package search

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// place is where one search runs: the workspace root (the one folder the
// sandbox lets rg read) and the session cwd below it. Everything it knows of
// the disk it asks the provider's Workspace (docs/architecture.md).
type place struct {
	tool   string
	fsys   fs.FileSystem
	arg    string    // the path argument as rg gets it, "" for none
	root   string    // the root as the provider shows it (Display paths start with it)
	real   string    // the root as the kernel names it (fs.Workspace.RealRoot), to recognise it in rg's messages
	cwd    fs.Target // the session cwd
	cwdRel string    // where the session cwd really is, relative to the root
}

func newPlace(ctx context.Context, tool string, fsys fs.FileSystem, cwd fs.Target) (place, error) {
	p := place{tool: tool, fsys: fsys, cwd: cwd}
	rel, ok := fsys.Rel(cwd)
	if !ok {
		// A zero cwd must never become the server's own working directory.
		return p, launchError(tool, errors.New("search: cwd is not a folder the provider resolved"))
	}
	if err := ctx.Err(); err != nil {
		return p, abortedError(tool, err)
	}
	p.cwdRel, p.root, p.real = rel, fsys.Root(), fsys.RealRoot()
	return p, nil
}

// display is the session cwd as the model sees it.
func (p place) display() string {
	if p.cwd.Display != "" {
		return p.cwd.Display
	}
	return filepath.Join(p.root, p.cwdRel)
}

// pinnedPlace holds the root and the session cwd open for the time of one
// rg run.
type pinnedPlace struct {
	root, cwd *os.File
}

func (p pinnedPlace) close() {
	p.root.Close()
	p.cwd.Close()
}

// pin opens the root, then the session cwd beneath it, through the
// provider (fs.Workspace.OpenBeneath: no symlink followed, never leaving
// the root), so rg starts in a folder inside the root even if the cwd's
// path was swapped for a symlink since it was resolved. A cwd that became
// a symlink is resolved again: one that now leads outside is
// FS_SANDBOX_DENIED, one inside is where rg starts.
func (p place) pin(ctx context.Context) (pinnedPlace, error) {
	const maxRepins = 8
	rootFD, err := p.fsys.OpenBeneath("", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return pinnedPlace{}, launchError(p.tool, err)
	}
	root := os.NewFile(uintptr(rootFD), p.real)
	cwdFD, err := p.openFolder(p.cwdRel)
	for tries := 0; errors.Is(err, unix.ELOOP); tries++ {
		if tries == maxRepins {
			err = unix.EXDEV // still swapped for a link: refused as one out
			break
		}
		var again fs.Target
		again, err = p.fsys.Resolve(ctx, "search", p.display(), "")
		if fault.CodeOf(err) == fault.CodeSandboxDenied {
			err = unix.EXDEV
			break
		}
		if err == nil {
			rel, ok := p.fsys.Rel(again)
			if !ok {
				err = errors.New("search: the provider resolved the cwd to no place of its own")
				break
			}
			cwdFD, err = p.openFolder(rel)
		}
	}
	if err != nil {
		root.Close()
		if errors.Is(err, unix.EXDEV) {
			return pinnedPlace{}, p.cwdOutside()
		}
		return pinnedPlace{}, launchError(p.tool, err)
	}
	return pinnedPlace{root: root, cwd: os.NewFile(uintptr(cwdFD), p.display())}, nil
}

// openFolder opens the folder at rel (O_PATH) through the provider: ELOOP
// when a symlink is on the way or at the end, ENOTDIR when it is not a
// folder.
func (p place) openFolder(rel string) (int, error) {
	fd, err := p.fsys.OpenBeneath(rel, unix.O_PATH)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fd, nil
	case unix.S_IFLNK:
		unix.Close(fd)
		return -1, unix.ELOOP
	}
	unix.Close(fd)
	return -1, unix.ENOTDIR
}

func (p place) cwdOutside() error {
	return fault.New(fault.CodeSandboxDenied, `cannot search "`+p.display()+`": outside the workspace root`)
}

// rg's complaint about a path names it, then the reason: "d: Permission
// denied (os error 13)", or from its walk "./d: IO error for operation on
// ./d: No such file or directory (os error 2)". ripgrep 14 prefixes "rg: ".
const (
	walkPrefix = "IO error for operation on "
	rgPrefix   = "rg: "
)

// The reasons rg's complaints end with, as the kernel's errors.
const (
	reasonDenied   = ": Permission denied (os error 13)"
	reasonNotFound = ": No such file or directory (os error 2)"
	reasonNotDir   = ": Not a directory (os error 20)"
	reasonLoop     = ": Too many levels of symbolic links (os error 40)"
)

// complaint is the path a line of rg's stderr names with reason, "" for
// another line.
func complaint(line, reason string) string {
	p, ok := strings.CutSuffix(line, reason)
	if !ok {
		return ""
	}
	if i := strings.LastIndex(p, walkPrefix); i >= 0 {
		p = p[i+len(walkPrefix):]
	}
	return strings.TrimPrefix(p, rgPrefix)
}

// deniedPath is the path a complaint of a refused open names, "" for
// another line.
func deniedPath(line string) string { return complaint(line, reasonDenied) }

// vanished reports whether a line of rg's stderr says that an entry its
// walk had listed was gone, or no longer a folder, when rg opened it: a
// path below the folder searched (the path argument, or the session cwd)
// that was not found, not a folder, or a symlink loop. The tree changed
// under the walk; the entry is left out of the result, as if the walk had
// started after the change. The path argument itself is never one: rg did
// not find it by listing a folder, so a missing path stays a failure
// (docs/search.md).
func (p place) vanished(line string) bool {
	for _, reason := range [...]string{reasonNotFound, reasonNotDir, reasonLoop} {
		if name := complaint(line, reason); name != "" {
			return p.below(name)
		}
	}
	return false
}

// below reports whether a path rg named lies strictly below the folder it
// searched.
func (p place) below(name string) bool {
	name = filepath.Clean(name)
	if p.arg == "" { // rg names entries relative to the cwd, "./d" or "d"
		return name != "." && name != ".." && !filepath.IsAbs(name) && !strings.HasPrefix(name, "../")
	}
	return strings.HasPrefix(name, strings.TrimSuffix(filepath.Clean(p.arg), "/")+"/")
}

// maxDenials bounds the complaints sortDenials looks into.
const maxDenials = 64

// sortDenials reads rg's stderr after a confined run. A path rg was refused
// that the server itself can open inside the root, or that now leads
// outside it, was outside the root when rg opened it: a folder swapped for a
// symlink during the search, refused by Landlock. Such complaints are
// dropped from rest: a folder that is a symlink out is not part of the tree,
// as rg's own walk, which never follows symlinks, would say. argOutside
// reports that the path argument itself (or the session cwd) was outside,
// which is FS_SANDBOX_DENIED, as for a path that leads outside at the start.
func (p place) sortDenials(ctx context.Context, stderr string) (rest string, argOutside bool) {
	var kept []string
	seen := 0
	for _, line := range strings.Split(stderr, "\n") {
		name := deniedPath(line)
		if name == "" || seen >= maxDenials {
			kept = append(kept, line)
			continue
		}
		seen++
		if !p.ledOutside(ctx, name) {
			kept = append(kept, line)
			continue
		}
		if arg := p.arg; filepath.Clean(name) == filepath.Clean(arg) || (arg == "" && filepath.Clean(name) == ".") {
			argOutside = true
		}
	}
	return strings.TrimSpace(strings.Join(kept, "\n")), argOutside
}

// ledOutside reports whether the path rg named was denied by the sandbox
// rather than by the file's own permissions.
func (p place) ledOutside(ctx context.Context, name string) bool {
	display := name
	if !filepath.IsAbs(name) {
		display = filepath.Join(p.display(), name)
	}
	t, err := p.fsys.Resolve(ctx, "search", display, "")
	if err != nil {
		return fault.CodeOf(err) == fault.CodeSandboxDenied
	}
	rel, ok := p.fsys.Rel(t)
	if !ok {
		return false
	}
	fd, err := p.fsys.OpenBeneath(rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		// A symlink (or a way out) where Resolve just found real folders:
		// the tree is being swapped under the walk, so what rg met may well
		// have led outside.
		return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV)
	}
	unix.Close(fd)
	return true
}

// argOutside is the refusal of a path argument (or cwd) that led outside
// the root while rg ran.
func (p place) argOutside() error {
	display := p.display()
	if p.arg != "" {
		display = p.arg
		if !filepath.IsAbs(p.arg) {
			display = filepath.Join(p.display(), p.arg)
		}
	}
	return fault.New(fault.CodeSandboxDenied, `cannot search "`+display+`": outside the workspace root`)
}

// absPath finds absolute paths in rg's messages.
var absPath = regexp.MustCompile(`(^|[\s'"(<\[])(/[^\s'"]*)`)

// redact replaces every absolute path outside the root in rg's stderr, so no
// message names a host path (docs/search.md).
func (p place) redact(text string) string {
	return absPath.ReplaceAllStringFunc(text, func(m string) string {
		i := strings.IndexByte(m, '/')
		path := strings.TrimRight(m[i:], ":,;)]>")
		if within(path, p.root) || within(path, p.real) {
			return m
		}
		return m[:i] + "(a path outside the workspace root)" + m[i+len(path):]
	})
}

func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// searchArg checks the optional path argument and returns it as rg should
// get it, spelled as the caller spelled it (docs/api.md: displayed paths keep
// symlinks unresolved):
//   - absolute: its cleaned absolute form, so rg names it as given;
//   - relative, below the cwd: relative to the cwd ("" for the cwd itself);
//   - relative, climbing with "..": as given when the kernel's ".." (from the
//     real cwd) reaches the folder the lexical one does; else the real path
//     relative to the real cwd, which is what the kernel walks.
//
// A path that is neither a regular file nor a folder is refused before rg
// runs (it would block on a FIFO). empty reports a path in the server's
// private folder or one of its temporary files: nothing to list.
func (p place) searchArg(ctx context.Context, fsys fs.FileSystem, path *string) (arg string, empty bool, err error) {
	if path == nil {
		return "", false, nil
	}
	t, err := fsys.Resolve(ctx, "search", *path, p.display())
	if err != nil {
		return "", false, err
	}
	tRel, ok := fsys.Rel(t)
	if !ok {
		return "", false, launchError(p.tool, errors.New("search: path is not one the provider resolved"))
	}
	if p.private(tRel) {
		return "", true, nil
	}
	if !p.fileOrFolder(tRel) {
		return "", false, fault.New(fault.CodeNotRegularFile, `cannot search "`+t.Display+`": not a regular file or folder`)
	}
	if filepath.IsAbs(*path) {
		return t.Display, false, nil
	}
	rel, err := filepath.Rel(p.display(), t.Display)
	if err != nil {
		return "", false, launchError(p.tool, err)
	}
	if rel != ".." && !strings.HasPrefix(rel, "../") {
		if rel == "." {
			return "", false, nil
		}
		return rel, false, nil
	}
	// The kernel takes ".." from the real cwd; the caller meant it from the
	// shown one. Both then walk the same rest, so they agree when the
	// folder the ".."s reach is the same.
	up := 0
	for _, seg := range strings.Split(rel, "/") {
		if seg != ".." {
			break
		}
		up++
	}
	// Both sides are where the provider says the folders really are,
	// relative to the root; climbing above it reaches no folder of ours.
	lexical, walked := p.display(), p.cwdRel
	reached := true
	for range up {
		if walked == "" {
			reached = false
		}
		lexical, walked = filepath.Dir(lexical), parentRel(walked)
	}
	if b, err := fsys.Resolve(ctx, "search", lexical, ""); err == nil && reached {
		if bRel, ok := fsys.Rel(b); ok && bRel == walked {
			return rel, false, nil
		}
	}
	rel, err = filepath.Rel("/"+p.cwdRel, "/"+tRel)
	if err != nil {
		return "", false, launchError(p.tool, err)
	}
	if rel == "." {
		return "", false, nil
	}
	return rel, false, nil
}

// parentRel is the folder above a root-relative path ("" above a name
// directly under the root, and above the root itself).
func parentRel(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// fileOrFolder reports whether rel (where a target really is, relative to
// the root) is a regular file or a folder, or is missing (rg then says so).
// It opens it with O_PATH only: a FIFO is looked at, never read.
func (p place) fileOrFolder(rel string) bool {
	fd, err := p.fsys.OpenBeneath(rel, unix.O_PATH)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return true
	}
	// A symlink: the path was swapped since it was resolved; rg, which
	// never follows one, says what it finds.
	mode := st.Mode & unix.S_IFMT
	return mode == unix.S_IFREG || mode == unix.S_IFDIR || mode == unix.S_IFLNK
}

// private reports whether rel (relative to the root) is one of the
// provider's own files, or would be for a root at any folder on its way
// (docs/search.md: never listed). rg matches the provider's globs relative
// to the folder it searches (privateGlobs), so they hide such names at
// every depth, and so does this.
func (p place) private(rel string) bool {
	for {
		if p.fsys.IsPrivate(rel) {
			return true
		}
		_, tail, ok := strings.Cut(rel, "/")
		if !ok {
			return false
		}
		rel = tail
	}
}

// shown makes a path rg printed relative to the session cwd when it lies
// inside it, as the original tool-fs did; anything else is returned unchanged.
func (p place) shown(rgPath string) string {
	return cwdRelative(rgPath, p.display())
}
