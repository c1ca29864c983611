package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Result is a revert's answer (docs/checkpoints.md): the model text and
// the metadata, and for the caller (the change feed, the policy) what it
// did to each file.
type Result struct {
	Output   string
	Metadata RevertMetadata
	// Seq is the seq of the revert's own changes; 0 for a dry run, or when
	// there was nothing to revert.
	Seq int64
	// Files is what it did to each file; for a dry run, what it would do
	// (no new Version nor Hash).
	Files []RevertedFile
	// Plan is the change it made or would make, file by file: a dry run's
	// Plan pins the revert a person approves (RevertOptions.Pin).
	Plan Plan
	// folders are the folder changes to undo once the files' locks are
	// let go (folders.go).
	folders []*change
}

// Plan is what a revert does to each file: a fingerprint of the file as
// it is (version and SHA-256, or absent), what it gets back and the
// session's changes undone, by path.
type Plan map[string]string

// RevertOptions are a revert's options besides its range (Store.RevertWith).
type RevertOptions struct {
	// DryRun does every check and computes the diffs, writing nothing.
	DryRun bool
	// Fence, when set, is asked about each file the revert would restore,
	// resolved anew under the revert's locks, before any is checked or
	// kept: its error refuses the whole revert and nothing is written (the
	// sandbox mode, docs/sandbox.md). A path that no longer leads to its
	// file is not asked: the revert refuses it as changed.
	Fence func(fs.Target) error
	// Pin, when not nil, is the Plan of the dry run a person approved: the
	// revert runs only while it makes exactly that change, else
	// FS_STALE_VERSION names the files that differ (docs/sandbox.md).
	Pin Plan
}

// RevertMetadata is a revert's metadata: one entry per file, in the order
// of the text.
type RevertMetadata struct {
	Restored []Restored `json:"restored"`
}

// Restored is one file of a revert: its path (root-relative) and the hunks
// from what it held to what the revert put back. When they are not shown
// (either side is not text or is at or above DiffMaxBytes, or the answer's
// DiffBudgetBytes is spent), Diffs is empty and DiffsOmitted true.
type Restored struct {
	Path string `json:"path"`
	// PathBytes is the name's exact bytes when Path cannot say them, as
	// in the history (Change.PathBytes).
	PathBytes    []byte        `json:"path_bytes,omitempty"`
	Diffs        []render.Diff `json:"diffs"`
	DiffsOmitted bool          `json:"diffsOmitted,omitempty"`
}

// RevertedFile is what a revert did to one file: its new version and hash
// ("" when it removed it), and its state before and after (nil: absent),
// after's version being the new one.
type RevertedFile struct {
	Path          string
	Target        fs.Target
	Version       fs.Version
	Hash          fs.Hash
	Diffs         []render.Diff
	Before, After *State
}

// RevertedOutput is the model text of a revert: the changes undone (a
// revert's own changes count one per file), the files and their
// root-relative paths in history order (each file where its oldest undone
// change is), joined by ", ". A revert whose metadata leaves some diffs out
// adds a line naming those files (diffsNotShown).
func RevertedOutput(changes int, paths []string) string {
	if len(paths) == 0 {
		return "Reverted " + strconv.Itoa(changes) + " change(s) in 0 file(s)."
	}
	return "Reverted " + strconv.Itoa(changes) + " change(s) in " + strconv.Itoa(len(paths)) + " file(s): " + strings.Join(paths, ", ")
}

// DryRunOutput is the model text of a dry run: what a revert would undo,
// then, for each file, a newline and the change as a unified diff (or a
// note saying why it is not shown: msgNoDiff, msgOverBudget).
func DryRunOutput(changes int, paths []string, diffs []string) string {
	var b strings.Builder
	b.WriteString("Dry run: no changes were written. Reverting would undo " + strconv.Itoa(changes) + " change(s) in " + strconv.Itoa(len(paths)) + " file(s)")
	if len(paths) == 0 {
		b.WriteString(".")
		return b.String()
	}
	b.WriteString(": " + strings.Join(paths, ", "))
	for _, d := range diffs {
		b.WriteString("\n" + d)
	}
	return b.String()
}

// StaleMessage is the refusal of a revert over files that changed since the
// session's last change to them.
func StaleMessage(paths []string) string {
	return "cannot revert: these files changed since this session's last change to them: " + strings.Join(paths, ", ")
}

func notRevertible(c *change) *fault.Error {
	return refused(fault.CodeNotRevertible, fmt.Sprintf("cannot revert change %d (%s): %s", c.seq, c.path, c.reason()),
		&Refusal{Seq: c.seq, Path: c.path})
}

func damaged(c *change, err error) *fault.Error {
	return refused(fault.CodeNotRevertible, fmt.Sprintf("cannot revert change %d (%s): the content it replaced is damaged or missing in the checkpoint store", c.seq, c.path),
		&Refusal{Seq: c.seq, Path: c.path, Err: err})
}

func stale(paths []string) *fault.Error {
	return refused(fault.CodeStaleVersion, StaleMessage(paths), &Refusal{Paths: paths})
}

// maxAttempts bounds how often a revert starts again because the session
// recorded a change of a file it had not locked meanwhile.
const maxAttempts = 8

// Revert undoes every change session made after seq to (0: all), newest
// first, as one operation over every file involved: it locks them all
// (LockTargets), checks that each is still exactly as the session's last
// change left it (its version, or its bytes' SHA-256) and that no change of
// another hand lies between two of the session's changes of a file, and
// only then restores each file's content from before the oldest undone
// change (a file that change created is removed). A file that changed is
// FS_STALE_VERSION listing every such file; a change that is not revertible
// is FS_NOT_REVERTIBLE naming it (the newest such); either way nothing is
// written. The revert is journaled in the session's log (synced) before the
// first file is published, and recorded there as changes of its own (one
// per file, one seq, tool "revert"), so it can be reverted; a revert a crash
// interrupted is finished by Open. A dry run does every check and computes
// the diffs, and writes nothing.
func (s *Store) Revert(ctx context.Context, session string, to int64, dryRun bool) (*Result, error) {
	return s.RevertWith(ctx, session, to, RevertOptions{DryRun: dryRun})
}

// RevertWith is Revert with a fence and a pin (RevertOptions).
func (s *Store) RevertWith(ctx context.Context, session string, to int64, opts RevertOptions) (*Result, error) {
	if to < 0 {
		return nil, fault.New(fault.CodeInvalidArgument, "to must be a non-negative integer")
	}
	d, err := s.folders(false)
	if err != nil {
		return nil, ioErr("revert", err)
	}
	if d == nil {
		return nothing(opts)
	}
	s.Touch(session)
	var paths []string
	for range maxAttempts {
		more, err := s.pathsAfter(ctx, d, session, to)
		if err != nil {
			return nil, ioErr("revert", err)
		}
		paths = union(paths, more)
		res, again, err := s.revertOnce(ctx, d, session, to, opts, paths)
		if !again {
			if err == nil && !opts.DryRun && len(res.folders) > 0 {
				// The folder operations take the targets' locks themselves.
				err = s.revertFolders(ctx, res.folders)
			}
			return res, err
		}
	}
	return nil, ioErr("revert", errBusy)
}

// nothing is the answer of a revert with nothing to undo; stale when a
// person approved a change.
func nothing(opts RevertOptions) (*Result, error) {
	if err := opts.Pin.check(Plan{}, nil); err != nil {
		return nil, err
	}
	if opts.DryRun {
		return &Result{Output: DryRunOutput(0, nil, nil), Metadata: RevertMetadata{Restored: []Restored{}}, Plan: Plan{}}, nil
	}
	return &Result{Output: RevertedOutput(0, nil), Metadata: RevertMetadata{Restored: []Restored{}}, Plan: Plan{}}, nil
}

// check refuses plan (its files in order) unless it is pin's change; a
// nil pin pins nothing. The files that differ are named in plan's order,
// then those only pin has, sorted.
func (pin Plan) check(plan Plan, order []string) error {
	if pin == nil {
		return nil
	}
	var differ []string
	for _, p := range order {
		if pin[p] != plan[p] {
			differ = append(differ, p)
		}
	}
	var gone []string
	for p := range pin {
		if _, ok := plan[p]; !ok {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	if differ = append(differ, gone...); len(differ) > 0 {
		return stale(differ)
	}
	return nil
}

// planOf is the fingerprint of each file of a revert.
func planOf(files []*filePlan) Plan {
	state := func(st *State) string {
		if st == nil {
			return "absent"
		}
		return st.Version + " " + st.SHA256
	}
	plan := make(Plan, len(files))
	for _, f := range files {
		var b strings.Builder
		b.WriteString(state(f.cur.state) + " -> " + state(f.restore))
		for _, c := range f.changes {
			b.WriteString(" " + strconv.FormatInt(c.seq, 10))
		}
		plan[f.path] = b.String()
	}
	return plan
}

// pathsAfter lists the files of session's changes after to, pending ones
// included.
func (s *Store) pathsAfter(ctx context.Context, d *folders, session string, to int64) ([]string, error) {
	var paths []string
	err := s.withLog(ctx, d, session, func(lg *sessionLog) error {
		for _, c := range lg.h.changes {
			if c.seq > to && c.state != dropped && c.folder == "" {
				paths = append(paths, c.path)
			}
		}
		return nil
	})
	return paths, err
}

func union(a, b []string) []string {
	seen := make(map[string]bool, len(a))
	for _, p := range a {
		seen[p] = true
	}
	for _, p := range b {
		if !seen[p] {
			seen[p] = true
			a = append(a, p)
		}
	}
	return a
}

// fileTarget is a recorded path resolved again: bad when it no longer
// leads to the file it named (it leaves the root, a folder on the way is a
// file now, or a link on the way changed).
type fileTarget struct {
	t   fs.Target
	bad bool
}

// targets resolves the recorded paths.
func (s *Store) targets(ctx context.Context, paths []string) (map[string]*fileTarget, []fs.Target, error) {
	m := make(map[string]*fileTarget, len(paths))
	var list []fs.Target
	for _, p := range paths {
		t, err := s.fs.Resolve(ctx, "revert", p, "")
		switch code := fault.CodeOf(err); {
		case err == nil && s.fs.RealPath(t) == p:
			m[p] = &fileTarget{t: t}
			list = append(list, t)
		case err == nil, code == fault.CodeSandboxDenied, code == fault.CodeNotFound:
			m[p] = &fileTarget{bad: true}
		default:
			return nil, nil, err
		}
	}
	return m, list, nil
}

// filePlan is one file of a revert.
type filePlan struct {
	path           string
	ft             *fileTarget
	changes        []*change // the undone ones, oldest first
	cur            current   // the file now
	restore        *State    // what it gets back; nil: removed
	diffs          []render.Diff
	unified        string // a dry run's unified diff, or the note standing in for it
	omitted        bool   // the diff is not shown (unified says why)
	added, removed *int
	// fill writes the file's new content (a revert's: the kept content it
	// restores); nil with restore nil removes the file.
	fill      func(io.Writer) error
	mode      uint32 // for a file the change creates (0: a new file's)
	pf        fs.PendingFile
	published bool
	version   fs.Version
	hash      fs.Hash
}

// revertOnce is one attempt of Revert with paths locked; again when the
// session's changes after to turned out to touch a file not among them.
func (s *Store) revertOnce(ctx context.Context, d *folders, session string, to int64, opts RevertOptions, paths []string) (res *Result, again bool, err error) {
	targets, list, err := s.targets(ctx, paths)
	if err != nil {
		return nil, false, ioErr("revert", err)
	}
	lk, err := s.fs.LockTargets(ctx, list)
	if err != nil {
		return nil, false, ioErr("revert", err)
	}
	defer lk.Unlock()
	if !opts.DryRun {
		release, err := s.gc.rlock(ctx, d)
		if err != nil {
			return nil, false, ioErr("revert", err)
		}
		defer release()
	}
	err = s.withLog(ctx, d, session, func(lg *sessionLog) error {
		if _, err := s.settleLocked(ctx, d, lg, lk, targets); err != nil {
			return err
		}
		var sel []*change
		for _, c := range lg.h.changes {
			if c.seq <= to || c.state == dropped {
				continue
			}
			if c.folder != "" {
				sel = append(sel, c) // not locked: folders.go
				continue
			}
			if targets[c.path] == nil || c.state == pending {
				again = true // a file not locked, or a change of it still in flight
				return nil
			}
			sel = append(sel, c)
		}
		res, err = s.revertLocked(ctx, d, lg, lk, targets, to, sel, opts)
		return err
	})
	if err != nil {
		return nil, false, ioErr("revert", err)
	}
	return res, again, nil
}

// revertLocked is the revert itself, every lock held: check, then (unless
// a dry run) keep what the files hold now, stage what they get back,
// journal, publish, and note it done.
func (s *Store) revertLocked(ctx context.Context, d *folders, lg *sessionLog, lk fs.LockedTargets, targets map[string]*fileTarget, to int64, sel []*change, opts RevertOptions) (*Result, error) {
	dryRun := opts.DryRun
	if to < lg.h.floor {
		return nil, refused(fault.CodeNotRevertible, fmt.Sprintf("cannot revert to change %d: the changes up to %d are no longer kept", to, lg.h.floor),
			&Refusal{Seq: lg.h.floor})
	}
	if len(sel) == 0 {
		return nothing(opts)
	}
	for i := len(sel) - 1; i >= 0; i-- {
		if !sel[i].revertible() {
			return nil, notRevertible(sel[i])
		}
	}
	fileSel, folders := splitFolders(sel)
	if err := fence(opts.Fence, targets, fileSel); err != nil {
		return nil, err
	}
	if err := s.fenceFolders(ctx, opts.Fence, folders); err != nil {
		return nil, err
	}
	if changed := s.checkFolders(ctx, folders); len(changed) > 0 {
		return nil, stale(changed)
	}
	files, err := s.checkFiles(ctx, d, lk, targets, fileSel, !dryRun)
	if err != nil {
		return nil, err
	}
	if err := s.diffFiles(ctx, d, lk, files, dryRun); err != nil {
		return nil, err
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	for _, c := range folders {
		paths = append(paths, c.path)
	}
	plan := planOf(files)
	for _, c := range folders {
		plan[c.path] = "folder " + c.folder + " " + c.to + " " + strconv.FormatInt(c.seq, 10)
	}
	if err := opts.Pin.check(plan, paths); err != nil {
		return nil, err
	}
	if dryRun {
		var diffs []string
		res := &Result{Metadata: metadataOf(files), Plan: plan}
		for _, f := range files {
			diffs = append(diffs, f.unified)
			res.Files = append(res.Files, RevertedFile{Path: f.path, Target: f.ft.t, Diffs: f.diffs, Before: f.cur.state, After: f.restore})
		}
		for _, c := range folders {
			diffs = append(diffs, folderNote(c))
			res.Metadata.Restored = append(res.Metadata.Restored, Restored{Path: c.path, Diffs: []render.Diff{}})
		}
		res.Output = DryRunOutput(len(sel), paths, diffs)
		return res, nil
	}
	for _, f := range files {
		if f.restore != nil {
			f.fill = s.blobFill(ctx, d, f.restore.SHA256)
		}
	}
	var seq int64
	if len(files) > 0 {
		if seq, err = s.journalLocked(ctx, d, lg, lk, ToolRevert, files); err != nil {
			return nil, err
		}
	}
	res := &Result{Output: RevertedOutput(len(sel), paths) + s.diffsNotShown(files), Metadata: metadataOf(files), Seq: seq, Plan: plan, folders: folders}
	for _, c := range folders {
		res.Metadata.Restored = append(res.Metadata.Restored, Restored{Path: c.path, Diffs: []render.Diff{}})
	}
	for _, f := range files {
		rf := RevertedFile{Path: f.path, Target: f.ft.t, Version: f.version, Hash: f.hash, Diffs: f.diffs, Before: f.cur.state}
		if f.restore != nil {
			rf.After = &State{Version: string(f.version), SHA256: f.restore.SHA256, Bytes: f.restore.Bytes, Mode: f.restore.Mode}
		}
		res.Files = append(res.Files, rf)
	}
	return res, nil
}

// fence asks allow about the file of each selected change once, in
// history order; a path that no longer leads to its file is left to the
// check of the files, which refuses it as changed.
func fence(allow func(fs.Target) error, targets map[string]*fileTarget, sel []*change) error {
	if allow == nil {
		return nil
	}
	asked := map[string]bool{}
	for _, c := range sel {
		ft := targets[c.path]
		if asked[c.path] || ft.bad {
			continue
		}
		asked[c.path] = true
		if err := allow(ft.t); err != nil {
			return err
		}
	}
	return nil
}

// checkFiles groups the selected changes by file (in history order) and
// checks each file: no other hand between two of the session's changes of
// it, and the file now as the newest one left it. With keep, what each file
// holds now is kept in blobs/ (the revert's own before). Every file that
// changed is listed in one FS_STALE_VERSION. No content is held: each file
// is streamed through its hash.
func (s *Store) checkFiles(ctx context.Context, d *folders, lk fs.LockedTargets, targets map[string]*fileTarget, sel []*change, keep bool) ([]*filePlan, error) {
	var files []*filePlan
	byPath := map[string]*filePlan{}
	for _, c := range sel {
		f := byPath[c.path]
		if f == nil {
			f = &filePlan{path: c.path, ft: targets[c.path]}
			byPath[c.path] = f
			files = append(files, f)
		}
		f.changes = append(f.changes, c)
	}
	var changed []string
	for _, f := range files {
		ok := !f.ft.bad
		for i := 1; ok && i < len(f.changes); i++ {
			ok = matches(f.changes[i].before, f.changes[i-1].after)
		}
		if ok {
			var err error
			if f.cur, ok, err = s.readCurrent(ctx, d, lk, f.ft.t, keep); err != nil {
				return nil, err
			}
			ok = ok && matches(f.cur.state, f.changes[len(f.changes)-1].after)
		}
		if !ok {
			changed = append(changed, f.path)
		}
	}
	if len(changed) > 0 {
		return nil, stale(changed)
	}
	for _, f := range files {
		f.restore = f.changes[0].before
	}
	return files, nil
}

// matches reports whether a file in state now (nil: absent) is in state
// want (nil: absent): the same version, or the same bytes (docs/edits.md,
// "No false staleness").
func matches(now, want *State) bool {
	if now == nil || want == nil {
		return now == nil && want == nil
	}
	return want.Version != "" && now.Version == want.Version || want.SHA256 != "" && now.SHA256 == want.SHA256
}

// current is a file as a revert finds it.
type current struct {
	info  fs.Info
	state *State // nil: absent
	kept  bool   // its content is in blobs/ now
	why   string // why not, when it exists
}

// readCurrent reads the file under the revert's locks, streamed in chunks:
// its SHA-256 and a copy in blobs/ (with keep, when at most MaxFileBytes).
// ok is false when the file is no longer a regular file.
func (s *Store) readCurrent(ctx context.Context, d *folders, lk fs.LockedTargets, t fs.Target, keep bool) (cur current, ok bool, err error) {
	r, info, err := lk.Open(ctx, t)
	switch fault.CodeOf(err) {
	case "":
	case fault.CodeNotRegularFile, fault.CodeNotFound, fault.CodeSandboxDenied, fault.CodeStaleVersion: // moved since resolved
		return cur, false, nil
	default:
		return cur, false, err
	}
	cur.info = info
	if info.Type == fs.TypeMissing {
		return cur, true, nil
	}
	defer r.Close()
	src := io.Reader(r)
	st := &State{Version: string(info.Version), Mode: info.Mode}
	if keep && info.Size <= s.opt.MaxFileBytes {
		if st.SHA256, st.Bytes, err = s.putBlob(ctx, d, src); err != nil {
			return cur, false, err
		}
		cur.kept = true
		s.bytes.Add(st.Bytes)
	} else {
		if st.SHA256, st.Bytes, err = hashOnly(ctx, src); err != nil {
			return cur, false, err
		}
		if keep {
			cur.why = whyTooLarge(st.Bytes, s.opt.MaxFileBytes)
		}
	}
	cur.state = st
	return cur, true, nil
}

// blobFill is a Stage fill that copies the kept content sum, checking its
// bytes.
func (s *Store) blobFill(ctx context.Context, d *folders, sum string) func(io.Writer) error {
	return func(w io.Writer) error { return s.copyKept(ctx, d, sum, w) }
}

// publish puts one file's restored content in place, or removes it, if it
// is still at the version checked.
func (s *Store) publish(ctx context.Context, lk fs.LockedTargets, f *filePlan) error {
	if f.restore == nil {
		if err := lk.Remove(ctx, f.ft.t, f.cur.info.Version); err != nil {
			return err
		}
	} else {
		v, h, err := f.pf.Publish(f.cur.info.Version)
		f.pf = nil
		if err != nil {
			return err
		}
		f.version, f.hash = v, h
	}
	f.published = true
	return nil
}

// rollBack undoes the files a failed revert published, each one still as
// the revert left it, from what the revert kept of it, and notes the
// revert: dropped when every file is back, else done for the files that
// could not be put back (their content before was too large to keep, or
// they changed again) and dropped for the others.
func (s *Store) rollBack(ctx context.Context, d *folders, lg *sessionLog, lk fs.LockedTargets, seq int64, published, rest []*filePlan) {
	var es []entry
	for _, f := range published {
		if err := s.putBack(ctx, d, lk, f.ft.t, f.cur, f.version); err != nil {
			s.log.Warn("checkpoints: a failed revert could not put a file back", "path", f.path, "err", err)
			es = append(es, entry{T: tDone, Seq: seq, Path: f.path, Version: string(f.version)})
			continue
		}
		es = append(es, entry{T: tDrop, Seq: seq, Path: f.path})
	}
	for _, f := range rest {
		es = append(es, entry{T: tDrop, Seq: seq, Path: f.path})
	}
	if err := lg.append(true, es...); err != nil {
		s.log.Warn("checkpoints: cannot note a failed revert", "err", err)
	}
}

// putBack gives a file the content cur had (absent: removes it), if it is
// at version now ("" : absent).
func (s *Store) putBack(ctx context.Context, d *folders, lk fs.LockedTargets, t fs.Target, cur current, now fs.Version) error {
	switch {
	case cur.state == nil:
		return lk.Remove(ctx, t, now)
	case !cur.kept:
		return errors.New(cur.why)
	}
	pf, err := lk.Stage(ctx, t, cur.state.Mode, s.blobFill(ctx, d, cur.state.SHA256))
	if err != nil {
		return err
	}
	defer pf.Discard()
	_, _, err = pf.Publish(now)
	return err
}

func metadataOf(files []*filePlan) RevertMetadata {
	m := RevertMetadata{Restored: make([]Restored, len(files))}
	for i, f := range files {
		m.Restored[i] = Restored{Path: f.path, PathBytes: exactBytes(f.path), Diffs: f.diffs, DiffsOmitted: f.omitted}
	}
	return m
}
