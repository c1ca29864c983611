package fs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// WriteText atomically creates or replaces the target with content; see
// FileSystem.WriteText. Its steps, under the target's locks: look at the
// target (checkWriteTarget), check the intent (checkIntent), open the file
// it replaces (openOld) and start the side work (the hash and the diff
// basis, while the disk works: startWriteSide), start the intent's Keeper
// (startKeeping), make missing parents (enterParent), stage the content,
// join the side work, let the Keeper prepare, publish it as the intent
// allows (publishWrite), commit, tell the Keeper, and close the replaced
// file after returning (closeLater).
func (l *Local) WriteText(ctx context.Context, t Target, content string, intent *WriteIntent) (WriteOutcome, error) {
	unlock, err := l.lockTarget(ctx, t.Key)
	if err != nil {
		return WriteOutcome{}, l.lockErr("write", t.Display, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return WriteOutcome{}, aborted("write", err)
	}

	w, err := l.checkWriteTarget(t)
	if err != nil {
		return WriteOutcome{}, err
	}
	defer func() { w.close(l) }()
	exists := w.kind == walkFound
	var version Version
	if exists {
		version = versionOf(&w.st)
	}
	same := func() bool { return intent.Hash != "" && l.sameBytesAt(ctx, w.dir, w.name, version, intent.Hash) }
	if err := checkIntent(intent, exists, version, t.Display, same); err != nil {
		return WriteOutcome{}, err
	}

	var keeper Keeper
	if intent != nil && !intent.DryRun {
		keeper = intent.Keeper
	}
	out := WriteOutcome{Operation: OpCreate}
	mode, owner := l.newMode, (*unix.Stat_t)(nil)
	var old *oldFile
	if exists {
		out.Operation = OpUpdate
		mode, owner = keptMode(&w.st), &w.st
		old = openOld(w.dir, w.name)
		if keeper != nil && old != nil && old.version != version {
			old.close()
			return WriteOutcome{}, staleWrite(t.Display) // replaced between the walk and the open
		}
	}
	defer old.close()
	side := l.startWriteSide(old, content, keeper != nil)
	defer side.wait() // before old.close: it reads the old file
	if intent != nil && intent.DryRun {
		// Every check is done; missing parents are not made (docs/edits.md).
		side.wait().fill(&out)
		out.Version, out.Hash = version, ""
		return out, nil
	}
	replaced := Replaced{Path: l.relOf(t), Exists: exists, Version: version}
	if exists {
		replaced.Size, replaced.Mode = w.st.Size, keptMode(&w.st)
		if old != nil {
			replaced.Content = old
		}
	}
	kp := startKeeping(ctx, keeper, replaced)
	defer kp.abandon() // before old.close: Keep reads the old file
	if w.dir < 0 {
		w.close(l)
		if w, err = l.enterParent(t, intent, kp != nil); err != nil {
			return WriteOutcome{}, err
		}
	}

	stage := l.stage
	if kp != nil {
		stage = l.stageSyncing
	}
	tmp, err := stage(w.dir, w.name, mode, owner, func(f io.Writer) error {
		_, err := io.WriteString(f, content)
		return err
	})
	if err != nil {
		return WriteOutcome{}, l.fail("write", t.Display, err)
	}
	defer tmp.discard()
	side.wait().fill(&out)
	if err := kp.prepare(ctx, "write", t.Display, &side.sha256); err != nil {
		return WriteOutcome{}, err
	}
	if l.hooks.beforePublish != nil {
		l.hooks.beforePublish()
	}
	if err := ctx.Err(); err != nil {
		return WriteOutcome{}, aborted("write", err)
	}
	if err := l.publishWrite(tmp, w, t, intent, version, kp != nil); err != nil {
		return WriteOutcome{}, err
	}
	out.Version, err = tmp.commitFor(kp)
	if kp != nil {
		// Published, even when the folder's sync failed.
		kp.published(writtenFor(out, err))
	}
	if err != nil {
		return WriteOutcome{}, l.fail("write", t.Display, err)
	}
	old.closeLater()
	return out, nil
}

// writtenFor is what a Keeper hears of a published write: a create's diff
// basis is "" and the new text, when it is below the limit.
func writtenFor(out WriteOutcome, commitErr error) *Published {
	p := &Published{Version: out.Version, Before: out.Before}
	if commitErr != nil {
		p.Version = ""
	}
	switch {
	case out.Before != nil:
		after := out.After
		p.After = &after
	case out.Operation == OpCreate && out.AfterRaw != nil:
		before, after := "", NormalizeLF(*out.AfterRaw)
		p.Before, p.After = &before, &after
	}
	return p
}

// sameBytesAt reports whether the file at dir/name, still at version,
// holds the bytes whose hash is seen.
func (l *Local) sameBytesAt(ctx context.Context, dir int, name string, version Version, seen Hash) bool {
	f, st, err := openAt(dir, name)
	if err != nil {
		return false
	}
	defer f.Close()
	return isRegular(&st) && versionOf(&st) == version && sameBytes(ctx, f, seen)
}

// checkWriteTarget walks to the target now: it may be missing or a regular
// file (followed), nothing else.
func (l *Local) checkWriteTarget(t Target) (walked, error) {
	w, err := l.walkKey(t, false)
	if err != nil {
		return w, l.fail("write", t.Display, err)
	}
	if w.kind == walkDangling || w.kind == walkFound && !isRegular(&w.st) {
		w.close(l)
		return w, notRegular("write", t.Display)
	}
	return w, nil
}

// checkIntent checks the write's precondition against what the target is
// now. A nil intent is unconditional. same reports whether a target at
// another version still holds the bytes the session saw (not stale).
func checkIntent(intent *WriteIntent, exists bool, version Version, display string, same func() bool) error {
	if intent == nil {
		return nil
	}
	switch intent.Kind {
	case 0: // unconditional
	case ReplaceIfVersion:
		if !exists {
			return fault.New(fault.CodeStaleVersion, fmt.Sprintf(`cannot write "%s": file no longer exists`, display))
		}
		if version != intent.Version && !same() {
			return staleWrite(display)
		}
	case CreateIfAbsent:
		if exists {
			return notObserved(display)
		}
	default:
		return fmt.Errorf("fs: unknown write intent %d", intent.Kind)
	}
	return nil
}

// enterParent makes the target's missing parent folders and stands in the
// parent, judging anything that appeared at the target meanwhile: an
// unconditional write replaces it like any file, unless a Keeper kept the
// target's absence (kept).
func (l *Local) enterParent(t Target, intent *WriteIntent, kept bool) (walked, error) {
	w, err := l.walkKey(t, true)
	if err != nil {
		return w, l.fail("write", t.Display, err)
	}
	unconditional := intent == nil || intent.Kind == 0
	switch {
	case w.kind == walkMissing && w.dir >= 0:
		return w, nil
	case w.kind == walkFound && isRegular(&w.st) && unconditional && !kept:
		return w, nil
	case w.kind == walkFound && isRegular(&w.st) && unconditional:
		err = staleWrite(t.Display)
	case w.kind == walkFound && isRegular(&w.st):
		err = notObserved(t.Display)
	default:
		err = notRegular("write", t.Display)
	}
	w.close(l)
	return w, err
}

// publishWrite puts the staged file in place as the intent allows: never
// over an entry for a create, only over the same version for a replace.
// With a Keeper (kept), only over what was kept, whatever the intent.
func (l *Local) publishWrite(tmp *staged, w walked, t Target, intent *WriteIntent, version Version, kept bool) error {
	var err error
	switch {
	case intent != nil && intent.Kind == CreateIfAbsent:
		err = tmp.publishNew()
		if errors.Is(err, unix.EEXIST) {
			return l.competitor(w.dir, w.name, t)
		}
	case kept && version == "": // an unconditional create
		err = tmp.publishNew()
		if errors.Is(err, unix.EEXIST) {
			return staleWrite(t.Display)
		}
	case intent != nil && intent.Kind == ReplaceIfVersion, kept:
		// The rename below replaces whatever the name holds now; a
		// writer outside our lock may have been quicker.
		if cur, ok := statAt(w.dir, w.name); !ok || versionOf(&cur) != version {
			return staleWrite(t.Display)
		}
		err = tmp.publish()
	default:
		err = tmp.publish()
	}
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) {
		return notRegular("write", t.Display)
	}
	if err != nil {
		return l.fail("write", t.Display, err)
	}
	return nil
}

// competitor explains a create-only publication that found an entry: a
// regular file (followed) was someone else's create; anything else is not a
// regular file.
func (l *Local) competitor(dir int, name string, t Target) error {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		w, werr := l.walkTarget(t, false)
		if werr == nil {
			w.close(l)
			if w.kind == walkFound {
				st = w.st
			}
		}
	}
	if err == nil && !isRegular(&st) {
		return notRegular("write", t.Display)
	}
	return notObserved(t.Display) // a regular file, or one already gone again
}

// oldFile is the file a replacement replaces, opened under the target's
// lock before anything is staged: its text is the diff basis, and holding
// it open across the rename keeps the rename from freeing its blocks. The
// kernel frees them when the last descriptor closes, which closeLater does
// after the answer, off the caller's path (docs/performance.md, section 5).
// A nil *oldFile has nothing open.
type oldFile struct {
	fd      int
	size    int64
	version Version
}

// openOld opens the regular file dir/name; nil when it cannot.
func openOld(dir int, name string) *oldFile {
	fd, err := unix.Openat(dir, name, readFlags, 0)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || !isRegular(&st) {
		unix.Close(fd)
		return nil
	}
	return &oldFile{fd: fd, size: st.Size, version: versionOf(&st)}
}

// close closes the file now, unless closeLater took it.
func (o *oldFile) close() {
	if o != nil && o.fd >= 0 {
		unix.Close(o.fd)
		o.fd = -1
	}
}

// closeLater closes the file on its own goroutine.
func (o *oldFile) closeLater() {
	if o != nil && o.fd >= 0 {
		go unix.Close(o.fd)
		o.fd = -1
	}
}

// raw is the old file's exact bytes when it still has the size it had
// when opened; else nil.
func (o *oldFile) raw() *string {
	c := chunks.Get().(*[editChunk]byte)
	defer chunks.Put(c)
	var b strings.Builder
	b.Grow(int(o.size))
	for int64(b.Len()) <= o.size {
		n, err := unix.Pread(o.fd, c[:], int64(b.Len()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil
		}
		if n == 0 {
			break
		}
		b.Write(c[:n])
	}
	s := b.String()
	if int64(len(s)) != o.size {
		return nil // changed size while we read
	}
	return &s
}

// textOf is raw bytes as a diff basis: CRLF as LF, when they are UTF-8
// without NUL; else nil.
func textOf(raw *string) *string {
	if raw == nil || strings.IndexByte(*raw, 0) >= 0 || !utf8.ValidString(*raw) {
		return nil
	}
	s := NormalizeLF(*raw)
	return &s
}

// writeSide is a write's work besides the disk: the content's hash and, for
// a replacement below the diff-basis limit, the diff basis (the old text
// and the new one, with CRLF as LF). It runs on its own goroutine while the
// content is staged and synced (docs/performance.md, section 5); wait joins
// it, which a write does before the rename, so the basis is the old file's
// text under the target's lock.
type writeSide struct {
	done   chan struct{}
	hash   Hash
	sha256 [32]byte // with a Keeper only
	before *string
	after  string
	raw    *string // the old file's exact bytes
	// content is what is written, when below the diff-basis limit.
	content *string
}

// startWriteSide starts the side work of writing content over old (nil for
// a create); with sum, the SHA-256 of the content too, for a Keeper.
func (l *Local) startWriteSide(old *oldFile, content string, sum bool) *writeSide {
	s := &writeSide{done: make(chan struct{})}
	if int64(len(content)) < l.diffMax {
		s.content = &content
	}
	basis := old != nil && old.size < l.diffMax && s.content != nil
	go func() {
		defer close(s.done)
		s.hash = HashString(content)
		if sum {
			s.sha256 = sha256.Sum256(unsafe.Slice(unsafe.StringData(content), len(content))) // read only: no copy
		}
		if basis {
			s.raw = old.raw()
			if s.before = textOf(s.raw); s.before != nil {
				s.after = NormalizeLF(content)
			}
		}
	}()
	return s
}

// wait returns s once its work is done; it may be called again.
func (s *writeSide) wait() *writeSide {
	<-s.done
	return s
}

// fill puts the hash and the diff basis into out.
func (s *writeSide) fill(out *WriteOutcome) {
	out.Hash, out.Before, out.After, out.BeforeRaw, out.AfterRaw = s.hash, s.before, s.after, s.raw, s.content
}

// NormalizeLF turns CRLF into LF (a lone CR stays); text without CR is
// returned as is. It is the one normalisation of diff bases: the
// provider's, the executor's create diff, the checkpoints' and the
// tolerant edit's LF level.
func NormalizeLF(s string) string {
	if strings.IndexByte(s, '\r') < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\r\n", "\n")
}

// keptMode is the permission bits a replaced file keeps. Setuid, setgid and
// sticky are dropped, as the kernel drops setuid/setgid when a file is
// written by anyone but a privileged process.
func keptMode(st *unix.Stat_t) uint32 { return st.Mode & 0o777 }

// staged is a temporary file written, synced and given its final mode, not
// yet published. It lives in the private tmp folder (so a sweep finds it by
// listing one folder) or, when the target's folder is on another filesystem,
// beside the target. Its own descriptor holds an exclusive flock from
// creation until it is published or removed, which is how a sweep tells a
// live writer's file from a dead one's (docs/decisions-fs.md#temporary-files).
type staged struct {
	l         *Local
	f         *os.File
	tmpDir    int // the folder holding the temporary file
	dir       int // the target's folder
	tmp, name string
	beside    bool
	published bool
	size      int64 // the staged file's size, once commit fstat'd it
	mode      uint32
	owner     *unix.Stat_t
	fill      func(io.Writer) error
	// syncing has the result of a sync stageSyncing started in the
	// background; nil when none is running.
	syncing chan error
}

// stage creates an exclusive temporary file named .<name>.toolfs-<random>.tmp
// (a name no user file plausibly has, created O_EXCL so it never replaces
// one), locks it, fills it, sets its owner (best effort) and mode, and syncs
// it. fill may run again (a publication that meets EXDEV stages beside the
// target), so it must start from scratch each time.
func (l *Local) stage(dir int, name string, mode uint32, owner *unix.Stat_t, fill func(io.Writer) error) (*staged, error) {
	return l.stageAt(dir, name, mode, owner, fill, false)
}

// stageSyncing is stage with the file's sync left running in the
// background, so that a Keeper prepares (and its journal entry's sync
// starts) beside it (docs/journal.md, "What a change pays"); every
// publication waits for the sync first and fails with its error.
func (l *Local) stageSyncing(dir int, name string, mode uint32, owner *unix.Stat_t, fill func(io.Writer) error) (*staged, error) {
	return l.stageAt(dir, name, mode, owner, fill, true)
}

func (l *Local) stageAt(dir int, name string, mode uint32, owner *unix.Stat_t, fill func(io.Writer) error, later bool) (*staged, error) {
	s := &staged{l: l, dir: dir, name: name, mode: mode, owner: owner, fill: fill, tmpDir: dir, beside: true}
	if p, err := l.private.get(true); err == nil {
		var st unix.Stat_t
		if unix.Fstat(dir, &st) == nil && st.Dev == p.tmpDev {
			s.tmpDir, s.beside = p.tmp, false
		}
	} else if !l.inProcessOnly {
		return nil, err // the lock needed it already: not reached in practice
	}
	if err := s.write(later); err != nil {
		return nil, err
	}
	return s, nil
}

// write creates, locks and fills the temporary file in s.tmpDir, and
// syncs it, or with later starts its sync (synced waits for it).
func (s *staged) write(later bool) error {
	fd, tmp, err := createLocked(s.tmpDir, s.name)
	if err != nil {
		return err
	}
	s.f, s.tmp, s.published = os.NewFile(uintptr(fd), tmp), tmp, false
	err = s.fill(s.f)
	if err == nil && s.owner != nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && (st.Uid != s.owner.Uid || st.Gid != s.owner.Gid) {
			_ = unix.Fchown(fd, int(s.owner.Uid), int(s.owner.Gid)) // keeps the group when allowed
		}
	}
	if err == nil {
		err = unix.Fchmod(fd, s.mode)
	}
	if err == nil && later {
		s.syncing = make(chan error, 1)
		go func(f *os.File) { s.syncing <- s.sync(f) }(s.f)
		return nil
	}
	if err == nil {
		err = s.sync(s.f)
	}
	if err != nil {
		s.discard()
		return err
	}
	return nil
}

// sync syncs the staged file f (the test hook first).
func (s *staged) sync(f *os.File) error {
	if s.l.hooks.stagedSync != nil {
		s.l.hooks.stagedSync()
	}
	return f.Sync()
}

// synced waits for the sync write started, if any, and returns its error.
func (s *staged) synced() error {
	if s.syncing == nil {
		return nil
	}
	err := <-s.syncing
	s.syncing = nil
	return err
}

// createLocked creates a new temporary file in dir and takes its flock. A
// sweep may have opened the name in the instant between the two and, finding
// it unlocked, removed it: then the link count is 0 and we start again.
func createLocked(dir int, name string) (fd int, tmp string, err error) {
	for range 8 {
		tmp = tempName(name)
		fd, err = unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return -1, "", err
		}
		if err = flockRetry(fd, unix.LOCK_EX); err != nil {
			unix.Close(fd)
			_ = unix.Unlinkat(dir, tmp, 0)
			return -1, "", err
		}
		var st unix.Stat_t
		if err = unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			_ = unix.Unlinkat(dir, tmp, 0)
			return -1, "", err
		}
		if st.Nlink > 0 {
			return fd, tmp, nil
		}
		unix.Close(fd) // swept before we held it
	}
	return -1, "", unix.EEXIST
}

// flockRetry is flock that retries on EINTR.
func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// tempName keeps the target's name recognizable but short enough that the
// temporary name never exceeds NAME_MAX.
func tempName(name string) string {
	const keep = 200
	if len(name) > keep {
		cut := keep
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut]
	}
	return "." + name + ".toolfs-" + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
}

// restageBeside is the answer to EXDEV: the target's folder is another mount
// of the filesystem, so the file is written again beside the target.
func (s *staged) restageBeside() error {
	if s.l.hooks.restaged != nil {
		s.l.hooks.restaged()
	}
	s.discard()
	s.tmpDir, s.beside = s.dir, true
	return s.write(false)
}

// publish renames the temporary file over the target.
func (s *staged) publish() error {
	if err := s.synced(); err != nil {
		return err
	}
	if s.l.hooks.beforeRename != nil {
		s.l.hooks.beforeRename()
	}
	err := unix.Renameat(s.tmpDir, s.tmp, s.dir, s.name)
	if err == unix.EXDEV && !s.beside {
		if err = s.restageBeside(); err == nil {
			err = unix.Renameat(s.tmpDir, s.tmp, s.dir, s.name)
		}
	}
	if err != nil {
		return err
	}
	s.published = true
	return nil
}

// publishNew publishes without ever replacing an entry (EEXIST if one is
// there): renameat2(RENAME_NOREPLACE), or link+unlink where the filesystem
// lacks it.
func (s *staged) publishNew() error {
	if err := s.synced(); err != nil {
		return err
	}
	if s.l.hooks.beforeRename != nil {
		s.l.hooks.beforeRename()
	}
	err := s.publishNewOnce()
	if err == unix.EXDEV && !s.beside {
		if err = s.restageBeside(); err == nil {
			err = s.publishNewOnce()
		}
	}
	return err
}

func (s *staged) publishNewOnce() error {
	var err error = unix.EINVAL
	if !s.l.hooks.linkOnly {
		err = unix.Renameat2(s.tmpDir, s.tmp, s.dir, s.name, unix.RENAME_NOREPLACE)
	}
	if err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP {
		if err = unix.Linkat(s.tmpDir, s.tmp, s.dir, s.name, 0); err == nil {
			s.published = true
			_ = unix.Unlinkat(s.tmpDir, s.tmp, 0) // the target is safe; a leftover is swept
			return nil
		}
	}
	if err != nil {
		return err
	}
	s.published = true
	return nil
}

// commit reports the published file's version and syncs the target's folder
// so the rename itself is durable.
func (s *staged) commit() (Version, error) { return s.commitFor(nil) }

// commitFor is commit telling kp's Keeper the version first, before the
// folder's sync (RenameNoter).
func (s *staged) commitFor(kp *keeping) (Version, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(s.f.Fd()), &st); err != nil {
		return "", err
	}
	s.size = st.Size
	v := versionOf(&st)
	kp.renamed(v, st.Size)
	if err := syncDir(s.dir); err != nil {
		return "", err
	}
	return v, nil
}

// discard removes the file unless it was published, then closes it (which
// drops its flock). A no-op after discard.
func (s *staged) discard() {
	_ = s.synced() // before the close
	if !s.published && s.f != nil {
		_ = unix.Unlinkat(s.tmpDir, s.tmp, 0)
	}
	s.published = true
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// statAt lstats one entry of dir.
func statAt(dir int, name string) (unix.Stat_t, bool) {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err == nil
}

func aborted(op string, err error) *fault.Error {
	return &fault.Error{Code: fault.CodeAborted, Message: op + " aborted", Err: err}
}

func staleWrite(display string) *fault.Error { return StaleError("write", display) }

func notObserved(display string) *fault.Error { return NotObservedError(display) }

// lockErr maps a failure to take a lock: cancellation, or the lock file.
func (l *Local) lockErr(op, display string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return aborted(op, err)
	}
	return l.fail(op, display, err)
}
