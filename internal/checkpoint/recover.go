package checkpoint

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// A change stays pending in its log when its process died between the
// record (synced before publishing) and the outcome. Whoever next holds
// the locks of all its files settles it (Open does it for every log; a
// revert and the next change of the same file do it for theirs): no writer
// can be in between then.
//   - A change of one file (a write, edit, upload or delete) was published
//     if the file holds its new bytes, or is gone for a delete (done, at
//     the version now), else it was not (dropped).
//   - A journaled change of several files (a revert, or Journal's) is
//     finished (rolled forward: every file not yet changed is changed) when
//     each of its files is either as the change found it or as it leaves
//     it, and every new content not yet published is at hand in blobs/ (a
//     revert's always is: it restores kept contents). Otherwise (a file
//     changed since in another way, or a new content that was only staged)
//     the files it changed are put back (rolled back) instead, so it
//     happened entirely or not at all; a file that cannot be put back (its
//     content before was too large to keep, or it changed too) is left and
//     named in the log.

// group is the pending changes of one seq.
type group []*change

// pendingGroups lists h's pending changes by seq, oldest first.
func pendingGroups(h *history) []group {
	var out []group
	at := map[int64]int{}
	for _, c := range h.changes {
		if c.state != pending {
			continue
		}
		i, ok := at[c.seq]
		if !ok {
			i = len(out)
			at[c.seq] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c)
	}
	return out
}

// settled counts what settleLocked did.
type settled struct {
	changes, forward, back int
	failed                 []int64
}

// settleLocked settles every pending change of lg whose files are all
// among targets (locked in lk, resolved). It writes the outcome lines.
func (s *Store) settleLocked(ctx context.Context, d *folders, lg *sessionLog, lk fs.LockedTargets, targets map[string]*fileTarget) (settled, error) {
	var out settled
	for _, g := range pendingGroups(lg.h) {
		if !slices.ContainsFunc(g, func(c *change) bool { return targets[c.path] == nil }) {
			var es []entry
			var err error
			if g[0].journaled() {
				var how string
				es, how, err = s.finishJournal(ctx, d, lk, targets, g)
				switch how {
				case "forward":
					out.forward++
				case "back":
					out.back++
				case "failed":
					out.failed = append(out.failed, g[0].seq)
				}
			} else {
				es, err = s.settleChanges(ctx, d, lk, targets, g)
				out.changes += len(g)
			}
			if err != nil {
				return out, err
			}
			if err := lg.append(true, es...); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// settleChanges settles pending writes and edits by looking at each file.
func (s *Store) settleChanges(ctx context.Context, d *folders, lk fs.LockedTargets, targets map[string]*fileTarget, g group) ([]entry, error) {
	var es []entry
	for _, c := range g {
		if targets[c.path].bad {
			es = append(es, entry{T: tDrop, Seq: c.seq, Path: c.path})
			continue
		}
		cur, ok, err := s.readCurrent(ctx, d, lk, targets[c.path].t, false)
		if err != nil {
			return nil, err
		}
		if ok && left(cur.state, c.after) {
			es = append(es, entry{T: tDone, Seq: c.seq, Path: c.path, Version: string(cur.info.Version)})
		} else {
			es = append(es, entry{T: tDrop, Seq: c.seq, Path: c.path})
		}
	}
	return es, nil
}

// finishJournal finishes or undoes an interrupted journaled change (see
// above) and returns its outcome lines and which it did: "forward", "back"
// or "failed".
func (s *Store) finishJournal(ctx context.Context, d *folders, lk fs.LockedTargets, targets map[string]*fileTarget, g group) ([]entry, string, error) {
	curs := make([]current, len(g))
	restored := make([]bool, len(g)) // the file holds what the revert restores
	foreign := false
	for i, c := range g {
		if targets[c.path].bad || c.lossy {
			foreign = true // its path leads elsewhere now, or may: left alone
			continue
		}
		cur, ok, err := s.readCurrent(ctx, d, lk, targets[c.path].t, false)
		if err != nil {
			return nil, "", err
		}
		curs[i] = cur
		switch {
		case ok && left(cur.state, c.after):
			restored[i] = true
		case ok && matches(cur.state, c.before) && (c.after == nil || hasBlob(d, c.after.SHA256)):
		default:
			foreign = true // or its new content is not at hand: rolled back
		}
	}
	es := make([]entry, len(g))
	if !foreign {
		for i, c := range g {
			version := curs[i].info.Version
			if !restored[i] {
				f := &filePlan{path: c.path, ft: targets[c.path], cur: curs[i], restore: c.after}
				if c.after != nil {
					pf, err := lk.Stage(ctx, f.ft.t, c.after.Mode, s.blobFill(ctx, d, c.after.SHA256))
					if err != nil {
						return nil, "", err
					}
					f.pf = pf
				}
				err := s.publish(ctx, lk, f)
				if f.pf != nil {
					f.pf.Discard()
				}
				if err != nil {
					return nil, "", err
				}
				version = f.version
			}
			es[i] = entry{T: tDone, Seq: c.seq, Path: c.path, Version: string(version)}
		}
		return es, "forward", nil
	}
	how := "back"
	for i, c := range g {
		es[i] = entry{T: tDrop, Seq: c.seq, Path: c.path}
		if !restored[i] || matches(curs[i].state, c.before) {
			continue // as the revert found it (or changed by another hand: left alone)
		}
		// What the revert kept of the file before is in blobs/ when c.kept.
		prev := current{state: c.before, kept: c.kept, why: c.why}
		if err := s.putBack(ctx, d, lk, targets[c.path].t, prev, curs[i].info.Version); err != nil {
			s.log.Warn("checkpoints: an interrupted revert could not be undone for a file", "path", c.path, "err", err)
			es[i] = entry{T: tDone, Seq: c.seq, Path: c.path, Version: string(curs[i].info.Version)}
			how = "failed"
		}
	}
	return es, how, nil
}

// recoverAll settles what a crash left pending in every log (Open).
func (s *Store) recoverAll(ctx context.Context) Recovery {
	var rec Recovery
	d, err := s.folders(false)
	if err != nil || d == nil {
		return rec
	}
	names, err := listNames(d.sessions.Fd())
	if err != nil {
		s.log.Warn("checkpoints: cannot list the sessions' logs", "err", err)
		return rec
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		var paths []string
		if err := s.withLogNamed(ctx, d, name, "", func(lg *sessionLog) error {
			for _, g := range pendingGroups(lg.h) {
				for _, c := range g {
					paths = append(paths, c.path)
				}
			}
			return nil
		}); err != nil {
			s.log.Warn("checkpoints: cannot read a session's log", "log", name, "err", err)
			continue
		}
		if len(paths) > 0 {
			out, err := s.settleLog(ctx, d, name, paths)
			if err != nil {
				s.log.Warn("checkpoints: cannot settle what a crash left in a session's log", "log", name, "err", err)
			}
			rec.Settled += out.changes
			rec.RolledForward += out.forward
			rec.RolledBack += out.back
			for _, seq := range out.failed {
				rec.Failed = append(rec.Failed, name+":"+strconv.FormatInt(seq, 10))
			}
		}
		if s.opt.JournalOnly { // a settled journal is history, which this store does not keep
			_ = s.withLogNamed(ctx, d, name, "", func(lg *sessionLog) error {
				if hasPending(lg.h) {
					return nil
				}
				return lg.remove()
			})
		}
	}
	if rec.Settled+rec.RolledForward+rec.RolledBack+len(rec.Failed) > 0 {
		s.log.Info("checkpoints: settled what a crash left", "changes", rec.Settled, "reverts_finished", rec.RolledForward,
			"reverts_undone", rec.RolledBack, "reverts_failed", rec.Failed)
	}
	return rec
}

// settleLog locks the files of a log's pending changes and settles them.
func (s *Store) settleLog(ctx context.Context, d *folders, name string, paths []string) (settled, error) {
	targets, list, err := s.targets(ctx, paths)
	if err != nil {
		return settled{}, err
	}
	lk, err := s.fs.LockTargets(ctx, list)
	if err != nil {
		return settled{}, err
	}
	defer lk.Unlock()
	var out settled
	err = s.withLogNamed(ctx, d, name, "", func(lg *sessionLog) error {
		var err error
		out, err = s.settleLocked(ctx, d, lg, lk, targets)
		return err
	})
	return out, err
}
