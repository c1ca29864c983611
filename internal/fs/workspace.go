package fs

import (
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Workspace is what the rest of the server may ask the provider about its
// workspace besides the file tools: where a target lies, which names are
// the provider's own, and folders held by descriptor. A TargetKey stays
// opaque: these are the questions to ask of it instead of parsing it
// (docs/architecture.md, "The provider seam").
type Workspace interface {
	// Root is the workspace root as every Display path starts with it.
	Root() string

	// RealRoot is the root as the kernel names it (the local provider's,
	// with symlinks resolved), for recognising the root in a child
	// program's messages; never a path to open.
	RealRoot() string

	// Within reports whether t is folder or lies below it, judged by where
	// both really are, not by how their paths were spelled: a symlink under
	// folder to a file elsewhere is not within it. A mutation happens at its
	// Target or fails, so what Within judged is what changes
	// (docs/sandbox.md). Targets not resolved by this provider are never
	// within anything.
	Within(t, folder Target) bool

	// Rel is where t really is, relative to the root: "/"-separated, ""
	// for the root itself. ok is false for a Target this provider did not
	// resolve.
	Rel(t Target) (rel string, ok bool)

	// IsPrivate reports whether rel (relative to the root, "/"-separated)
	// is one of the provider's own files, which no tool lists or reaches:
	// its private folder or anything in it, or a temporary file it staged.
	IsPrivate(rel string) bool

	// PrivateGlobs are the names IsPrivate reports, as globs relative to
	// the root in ripgrep's --glob syntax.
	PrivateGlobs() []string

	// OpenBeneath opens rel (relative to the root, as Rel gives it; "" for
	// the root) as OpenBeneath does: no symlink followed in any component,
	// never leaving the root. The descriptor is the caller's to close.
	// Paths in the private folder are refused (EACCES).
	OpenBeneath(rel string, flags int) (int, error)
}

var _ Workspace = (*Local)(nil)

// tempGlob matches the names of the temporary files a write or edit stages
// before publishing them (".<name>.toolfs-<id>.tmp").
const tempGlob = ".*.toolfs-*.tmp"

// Root is the workspace root as every Display path starts with it.
func (l *Local) Root() string { return l.rootAbs }

// RealRoot is the root with symlinks resolved: every Key starts with it.
func (l *Local) RealRoot() string { return l.rootReal }

// Within compares real root-relative paths component by component: a Key is
// the real location the kernel-checked walk of Resolve found.
func (l *Local) Within(t, folder Target) bool {
	tr, ok := l.Rel(t)
	if !ok {
		return false
	}
	fr, ok := l.Rel(folder)
	if !ok {
		return false
	}
	_, in := within(fr, tr)
	return in || fr == ""
}

// Rel is t's Key relative to the real root.
func (l *Local) Rel(t Target) (string, bool) {
	if t.Key == "" {
		return "", false
	}
	return within(l.rootReal, string(t.Key))
}

// IsPrivate reports PrivateDir (directly under the root) and what is in it,
// and temporary files wherever they are.
func (l *Local) IsPrivate(rel string) bool { return privateRel(rel) }

func privateRel(rel string) bool {
	if first, _, _ := strings.Cut(rel, "/"); first == PrivateDir {
		return true
	}
	m, _ := path.Match(tempGlob, path.Base(rel))
	return m
}

// PrivateGlobs are PrivateDir, what is in it, and temporary files at any
// depth.
func (l *Local) PrivateGlobs() []string {
	return []string{PrivateDir, PrivateDir + "/**", "**/" + tempGlob}
}

// OpenBeneath opens rel beneath the root's descriptor (OpenBeneath).
func (l *Local) OpenBeneath(rel string, flags int) (int, error) {
	if first, _, _ := strings.Cut(rel, "/"); first == PrivateDir {
		return -1, unix.EACCES
	}
	return OpenBeneath(l.rootFd, rel, flags)
}
