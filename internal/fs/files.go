package fs

import (
	"container/list"
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
// .gitignore files found inside the root, from the root down, within the
// ignore bounds (docs/files.md, "Ignore rules").
type ListOptions struct {
	Depth      int
	MaxEntries int
	GitIgnore  bool
	// IgnoreMaxBytes bounds the bytes of .gitignore files one listing
	// applies, all together (0: DefaultIgnoreMaxBytes; at most 1 GiB): a
	// file that does not fit in what is left is not applied, and named in
	// IgnoreSkipped.
	IgnoreMaxBytes int64
	// IgnoreMaxRules bounds the rules of those files, all together (0:
	// DefaultIgnoreMaxRules), as IgnoreMaxBytes does.
	IgnoreMaxRules int
	// IgnoreMaxWork bounds the matching steps of one listing (0:
	// DefaultIgnoreMaxWork): past it the listing stops, TruncatedBy
	// CutIgnoreWork.
	IgnoreMaxWork int64
	// IgnoreCache keeps compiled .gitignore files by version for later
	// listings, once their change time is IgnoreRacyWindow old (a file
	// rewritten within one timestamp tick keeps its version).
	IgnoreCache      bool
	IgnoreRacyWindow time.Duration
}

// The ignore bounds' defaults (docs/files.md, "Ignore rules"): the work
// budget is 0.1–0.15 s of one core whatever the rules hold, the rules of
// 1 MiB hold a few MiB (TestListIgnoreBoundedChild).
const (
	DefaultIgnoreMaxBytes = 1 << 20
	DefaultIgnoreMaxRules = 1 << 17
	DefaultIgnoreMaxWork  = 50_000_000
)

// ListCut names the bound that cut a listing short.
type ListCut string

// The bounds that cut listings.
const (
	CutEntries    ListCut = "entries"     // MaxEntries, or a folder with more names than the listing can take
	CutIgnoreWork ListCut = "ignore_work" // IgnoreMaxWork
)

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
// says entries were left out, TruncatedBy which bound stopped it: the
// listing goes level by level, so what is there is the shallowest part.
// IgnoreSkipped are the .gitignore files (root-relative) a GitIgnore
// listing found and did not apply, past IgnoreMaxBytes or IgnoreMaxRules:
// entries below their folders may be ones they ignore.
type Listing struct {
	Entries       []Entry
	Truncated     bool
	TruncatedBy   ListCut
	IgnoreSkipped []string
}

// ListMaxDepth is the deepest listing.
const ListMaxDepth = 8

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
	var above *ruleChain
	if opts.GitIgnore {
		ls.ignore = newIgnoring(l, opts)
		var hidden bool
		if above, hidden = ls.ignore.above(w.rel); hidden || ls.ignore.work.exhausted() {
			// The folder is itself ignored (nothing in it is listed), or
			// the work ran out on the way to it.
			ls.cutByWork()
			ls.out.IgnoreSkipped = ls.ignore.skipped
			return ls.out, nil
		}
	}
	if err := ls.run(opts.Depth, above); err != nil {
		return Listing{}, l.fail("list", t.Display, err)
	}
	if ls.ignore != nil {
		ls.out.IgnoreSkipped = ls.ignore.skipped
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
	ignore *ignoring // nil: no gitignore rules
	out    Listing
}

// pending is a folder to list: relative to top, with the ignore rules of
// the folders above it.
type pending struct {
	dir   string
	rules *ruleChain
}

// cut marks the listing cut short by the bound by.
func (ls *lister) cut(by ListCut) {
	if !ls.out.Truncated {
		ls.out.Truncated, ls.out.TruncatedBy = true, by
	}
}

// cutByWork cuts the listing when the ignore work ran out.
func (ls *lister) cutByWork() {
	if ls.ignore != nil && ls.ignore.work.exhausted() {
		ls.cut(CutIgnoreWork)
	}
}

// run lists level after level: level holds the folders (relative to top)
// whose entries make the next level; above are the rules over top.
func (ls *lister) run(depth int, above *ruleChain) error {
	level := []pending{{rules: above}}
	for d := 0; d < depth && len(level) > 0; d++ {
		var next []pending
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

// folder lists one folder (p.dir relative to top) and returns its
// subfolders when deeper levels are wanted. A folder that vanished or was
// swapped for a symlink since its parent was read is skipped.
func (ls *lister) folder(p pending, deeper bool) ([]pending, error) {
	dir, fd := p.dir, ls.top
	if dir != "" {
		var err error
		fd, err = OpenBeneath(ls.top, dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return nil, nil
		}
		defer unix.Close(fd)
	}
	rules := p.rules
	if ls.ignore != nil {
		rules = ls.ignore.with(rules, joinRel(ls.base, dir), fd, ".gitignore")
	}
	names, more, err := ls.names(fd)
	if err != nil {
		return nil, err
	}
	var subs []pending
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
		if ls.ignore != nil {
			hide := ls.ignore.ignored(rules, full, e.Type == EntryDir)
			if ls.ignore.work.exhausted() {
				ls.cut(CutIgnoreWork)
				return nil, nil
			}
			if hide {
				continue
			}
		}
		if len(ls.out.Entries) >= ls.max {
			ls.cut(CutEntries)
			return nil, nil
		}
		ls.out.Entries = append(ls.out.Entries, e)
		if e.Type == EntryDir && deeper {
			subs = append(subs, pending{dir: rel, rules: rules})
		}
	}
	if more {
		ls.cut(CutEntries)
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

// ignoring is a GitIgnore listing's rules and bounds (docs/files.md,
// "Ignore rules"): each folder's .gitignore is read once, from inside the
// root only (opened beneath the folder, never through a symlink), and
// compiled once per version (Local.ignores keeps them for later listings);
// the rules of every folder from the root down to an entry's folder apply,
// a deeper file's winning. The folder .git itself is left out.
type ignoring struct {
	l         *Local
	bytesLeft int64
	rulesLeft int
	work      ignoreWork
	cache     bool
	racy      time.Duration
	skipped   []string
}

// ruleChain is the rules over a folder: its own .gitignore's (when it has
// rules) and then those of the folders above, up to the root.
type ruleChain struct {
	up    *ruleChain
	rules *ignoreRules
	dir   string // the folder of the .gitignore, root-relative ("" the root)
}

func newIgnoring(l *Local, opts ListOptions) *ignoring {
	g := &ignoring{l: l, bytesLeft: opts.IgnoreMaxBytes, rulesLeft: opts.IgnoreMaxRules, work: ignoreWork{left: opts.IgnoreMaxWork}, cache: opts.IgnoreCache, racy: opts.IgnoreRacyWindow}
	if g.bytesLeft <= 0 {
		g.bytesLeft = DefaultIgnoreMaxBytes
	}
	g.bytesLeft = min(g.bytesLeft, ignoreMaxBytesCeiling)
	if g.rulesLeft <= 0 {
		g.rulesLeft = DefaultIgnoreMaxRules
	}
	if g.work.left <= 0 {
		g.work.left = DefaultIgnoreMaxWork
	}
	return g
}

// above is the rules over the listed folder rel (root-relative), read from
// the root down; hidden says rel itself, or a folder on the way, is
// ignored (then nothing in it is listed, as git would list nothing).
func (g *ignoring) above(rel string) (chain *ruleChain, hidden bool) {
	if rel == "" {
		return nil, false
	}
	dir := ""
	for name := range strings.SplitSeq(rel, "/") {
		chain = g.with(chain, dir, g.l.rootFd, joinRel(dir, ".gitignore"))
		dir = joinRel(dir, name)
		if g.ignored(chain, dir, true) || g.work.exhausted() {
			return chain, true
		}
	}
	return chain, false
}

// with is up plus the rules of the folder dir (root-relative), whose
// .gitignore is name beneath dirfd.
func (g *ignoring) with(up *ruleChain, dir string, dirfd int, name string) *ruleChain {
	r := g.load(dirfd, name, dir)
	if r == nil || len(r.flags) == 0 {
		return up
	}
	return &ruleChain{up: up, rules: r, dir: dir}
}

// ignored says whether the rules ignore the entry full (root-relative).
// It spends from g.work; once that is exhausted its answer means nothing.
func (g *ignoring) ignored(chain *ruleChain, full string, isDir bool) bool {
	name := full[strings.LastIndexByte(full, '/')+1:]
	if isDir && name == ".git" {
		return true
	}
	for c := chain; c != nil; c = c.up {
		if !g.work.spend(1) {
			return false
		}
		rel := full
		if c.dir != "" {
			rel = full[len(c.dir)+1:]
		}
		if n := c.rules.match(rel, name, isDir, &g.work); n >= 0 {
			return c.rules.flags[n]&ruleNegate == 0
		}
	}
	return false
}

// load reads and compiles the .gitignore name beneath dirfd, the one of
// the folder dir, when it is a regular file that fits in what is left of
// the listing's budgets of bytes and rules; one that does not is named in
// skipped. A file counts whole, whether compiled now or found in the
// cache, so what a listing applies does not depend on the cache.
func (g *ignoring) load(dirfd int, name, dir string) *ignoreRules {
	fd, err := OpenBeneath(dirfd, name, readFlags)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size == 0 {
		return nil
	}
	skip := func() *ignoreRules {
		g.skipped = append(g.skipped, joinRel(dir, ".gitignore"))
		return nil
	}
	if st.Size > g.bytesLeft {
		return skip()
	}
	g.bytesLeft -= st.Size
	v := versionOf(&st)
	r := (*ignoreRules)(nil)
	if g.cache {
		r = g.l.ignores.get(v)
	}
	if r == nil {
		var text strings.Builder // its String is the text itself, not a copy
		text.Grow(int(st.Size))
		n, err := io.Copy(&text, io.LimitReader(f, st.Size))
		if err != nil {
			return nil
		}
		var ok bool
		if r, ok = compileIgnore(text.String(), g.rulesLeft); !ok {
			return skip()
		}
		if g.cache && n == st.Size && time.Since(time.Unix(st.Ctim.Unix())) >= g.racy {
			g.l.ignores.put(v, r)
		}
	}
	if len(r.flags) > g.rulesLeft {
		return skip()
	}
	g.rulesLeft -= len(r.flags)
	return r
}

// ignoreMaxBytesCeiling is the most IgnoreMaxBytes may be: compiled rules
// address their text with 32-bit offsets.
const ignoreMaxBytesCeiling = 1 << 30

// ignoreCacheBytes bounds the compiled .gitignore files a provider keeps.
const ignoreCacheBytes = 16 << 20

// ignoreCache keeps compiled .gitignore files by version, least recently
// used evicted first past ignoreCacheBytes. The zero value is ready.
type ignoreCache struct {
	mu   sync.Mutex
	used int64
	lru  list.List // of *ignoreCached, most recent first
	m    map[Version]*list.Element
}

type ignoreCached struct {
	v     Version
	rules *ignoreRules
}

func (c *ignoreCache) get(v Version) *ignoreRules {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[v]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*ignoreCached).rules
}

func (c *ignoreCache) put(v Version, r *ignoreRules) {
	if r.size > ignoreCacheBytes/4 {
		return // would evict most of the others for one file
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[Version]*list.Element)
	}
	if _, ok := c.m[v]; ok {
		return
	}
	c.m[v] = c.lru.PushFront(&ignoreCached{v: v, rules: r})
	c.used += r.size
	for c.used > ignoreCacheBytes {
		old := c.lru.Remove(c.lru.Back()).(*ignoreCached)
		delete(c.m, old.v)
		c.used -= old.rules.size
	}
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
	v, err := tmp.commitFor(kp)
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
// version expect ("": any, the delete tool with the policy off), and syncs
// its folder; with a Keeper, the file is kept first and its version checked
// a last time after. A folder is never removed.
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
	case expect == "":
		expect = versionOf(&w.st)
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
			// A writer outside our locks that rewrote the file while it was
			// kept made the copy fail: the file changed, which is the answer.
			if cur, ok := statAt(w.dir, w.name); !ok || !isRegular(&cur) || versionOf(&cur) != expect {
				return StaleError("delete", t.Display)
			}
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
