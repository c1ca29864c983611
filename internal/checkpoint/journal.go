package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// A journaled change is one change of several files, made all or nothing
// across a crash (SPEC §24, docs/checkpoints.md "Journaled changes"): a
// revert, and any change the executor's pipeline makes of several files
// (Journal). Every file is locked (in one global order), checked and
// staged before anything is published; the change is journaled in the
// session's log (one seq, one line per file, synced) before its first
// file is published; then each file is published only over the version
// checked, and the change noted done. A publication that fails midway
// puts back the files already published; a process that dies midway
// leaves the journal, which whoever next holds the files' locks (Open, at
// the latest) completes, when every file's new content is at hand, or
// rolls back (recover.go).

// FileChange is one file of a journaled change (Store.Journal).
type FileChange struct {
	Target fs.Target
	// Expect is the version the file must be at ("": absent), as the
	// caller checked it under the locks.
	Expect fs.Version
	// Fill writes the file's new content, from scratch on each call; nil
	// removes the file.
	Fill func(io.Writer) error
	// Mode is the permission bits a file the change creates gets (0: a new
	// file's); a file replaced keeps its own.
	Mode uint32
}

// Journaled is what a journaled change did to one file: its path (real,
// root-relative), its new version and hash ("" when removed), and its
// states before and after (nil: absent).
type Journaled struct {
	Path          string
	Target        fs.Target
	Version       fs.Version
	Hash          fs.Hash
	Before, After *State
}

// Journal makes the change of files, every target locked in lk, as one
// journaled change of session's history under tool: it keeps what each
// file holds now (so the change can be reverted, and rolled back), stages
// each new content, journals, publishes and notes it done (see above). A
// file no longer at its expected version is FS_STALE_VERSION and nothing
// is published.
func (s *Store) Journal(ctx context.Context, session, tool string, lk fs.LockedTargets, files []FileChange) ([]Journaled, error) {
	d, err := s.folders(true)
	if err != nil {
		return nil, ioErr("record", err)
	}
	if err := s.waitBounds(ctx); err != nil {
		return nil, ioErr("record", err)
	}
	release, err := s.gc.rlock(ctx, d)
	if err != nil {
		return nil, ioErr("record", err)
	}
	defer release()
	targets := make(map[string]*fileTarget, len(files))
	plans := make([]*filePlan, len(files))
	for i, fc := range files {
		p := s.fs.RealPath(fc.Target)
		targets[p] = &fileTarget{t: fc.Target}
		plans[i] = &filePlan{path: p, ft: targets[p], fill: fc.Fill, mode: fc.Mode}
	}
	var out []Journaled
	err = s.withLog(ctx, d, session, func(lg *sessionLog) error {
		if _, err := s.settleLocked(ctx, d, lg, lk, targets); err != nil {
			return err
		}
		for i, f := range plans {
			cur, ok, err := s.readCurrent(ctx, d, lk, f.ft.t, true)
			if err != nil {
				return err
			}
			if !ok || cur.info.Version != files[i].Expect {
				return fs.StaleError(tool, f.ft.t.Display)
			}
			f.cur = cur
		}
		if _, err := s.journalLocked(ctx, d, lg, lk, tool, plans); err != nil {
			return err
		}
		if s.opt.JournalOnly {
			s.forgetDone(lg)
		}
		out = make([]Journaled, len(plans))
		for i, f := range plans {
			out[i] = Journaled{Path: f.path, Target: f.ft.t, Version: f.version, Hash: f.hash, Before: f.cur.state}
			if f.restore != nil {
				after := *f.restore
				after.Version = string(f.version)
				out[i].After = &after
			}
		}
		return nil
	})
	if err != nil {
		return nil, ioErr("record", err)
	}
	return out, nil
}

// journalLocked is the second half of every journaled change, every lock
// held and every file checked (f.cur): stage each new content (f.fill;
// its state becomes f.restore), journal, publish, note it done. It
// returns the change's seq.
func (s *Store) journalLocked(ctx context.Context, d *folders, lg *sessionLog, lk fs.LockedTargets, tool string, files []*filePlan) (int64, error) {
	defer func() {
		for _, f := range files {
			if f.pf != nil {
				f.pf.Discard()
			}
		}
	}()
	for _, f := range files {
		if f.fill == nil {
			continue
		}
		var err error
		if f.restore != nil { // a revert's: its state is known
			if f.pf, err = lk.Stage(ctx, f.ft.t, f.restore.Mode, f.fill); err != nil {
				if errors.Is(err, errDamaged) && len(f.changes) > 0 {
					return 0, damaged(f.changes[0], err)
				}
				return 0, err
			}
			continue
		}
		h := &hashedFill{fill: f.fill, sum: sha256.New()}
		if f.pf, err = lk.Stage(ctx, f.ft.t, f.mode, h.run); err != nil {
			return 0, err
		}
		f.restore = &State{SHA256: hex.EncodeToString(h.sum.Sum(nil)), Bytes: h.n, Mode: f.mode}
	}
	seq := lg.h.lastSeq + 1
	journal := make([]entry, len(files))
	for i, f := range files {
		journal[i] = entry{T: tChange, Seq: seq, Time: s.now().Format(timeFormat), Tool: tool, Path: f.path, Journal: tool != ToolRevert,
			Before: f.cur.state, After: f.restore, Kept: f.cur.kept, Why: f.cur.why}
	}
	if err := lg.append(true, journal...); err != nil {
		return 0, err
	}
	s.changes.Add(int64(len(files)))
	if s.hooks.journaled != nil {
		s.hooks.journaled()
	}
	for i, f := range files {
		if s.hooks.published != nil && i > 0 {
			s.hooks.published(i - 1)
		}
		if err := s.publish(ctx, lk, f); err != nil {
			s.rollBack(ctx, d, lg, lk, seq, files[:i], files[i:])
			if fault.CodeOf(err) == fault.CodeStaleVersion {
				return 0, stale([]string{f.path})
			}
			return 0, err
		}
	}
	outcome := make([]entry, len(files))
	for i, f := range files {
		outcome[i] = entry{T: tDone, Seq: seq, Path: f.path, Version: string(f.version), Added: f.added, Removed: f.removed}
	}
	if err := lg.append(false, outcome...); err != nil {
		s.log.Warn("checkpoints: cannot note a journaled change done", "tool", tool, "err", err) // settled on the next look
	}
	s.afterChange()
	return seq, nil
}

// forgetDone removes, in a journal-only store, the log of a session whose
// change is done: every file is published, so nothing is left to settle,
// and its kept contents go with the next collection. A failure leaves a
// log of done changes, which the session's next change or the next start
// removes.
func (s *Store) forgetDone(lg *sessionLog) {
	live := lg.h.live
	if err := lg.remove(); err != nil {
		s.log.Warn("checkpoints: cannot remove a done journal", "err", err)
		return
	}
	s.changes.Add(-int64(live))
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// hashedFill runs a fill through SHA-256, from scratch on each call.
type hashedFill struct {
	fill func(io.Writer) error
	sum  hash.Hash
	n    int64
}

func (h *hashedFill) run(w io.Writer) error {
	h.sum.Reset()
	c := &countingWriter{w: io.MultiWriter(w, h.sum)}
	err := h.fill(c)
	h.n = c.n
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// hasBlob reports whether the content sum is kept in blobs/.
func hasBlob(d *folders, sum string) bool {
	var st unix.Stat_t
	return sum != "" && unix.Fstatat(d.blobs.Fd(), sum, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}
