package tools

import (
	"encoding/binary"
	"errors"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/journal"
)

// The workspace's journal (SPEC §28, docs/journal.md): a change of one
// file puts its records (the content its checkpoint keeps, its history
// lines, its audit line) in one entry, written without a sync to their
// own files, and commits the entry, one fdatasync shared with concurrent
// changes, before it is answered; a file's move puts both files' records
// in one entry. A journaled change of several files and a revert sync
// their own records, as before.

// The answers of a change the journal could not take.
const (
	// msgJournalRefused: the reservation failed, so nothing was changed.
	msgJournalRefused = "the workspace's journal of checkpoints and audit records cannot be written, so nothing was changed; retry shortly"
	// msgJournalLost: the change happened, its records are not durable.
	msgJournalLost = "the change was applied, but its checkpoint and audit records could not be made durable; it is logged as an error"
)

// journaling is one change's entry and its room in the journal; a nil
// *journaling (no journal) does nothing.
type journaling struct {
	res   *journal.Reservation
	entry journal.Entry
	// early: the entry is committed as soon as the change line is in it
	// (no audit line comes after the publication), beside the
	// publication's own syncs; done has the commit's result.
	early bool
	// atEnd: the entry holds the records of two files (a file's move), so
	// it is committed only once both are in it.
	atEnd   bool
	started bool
	done    chan error
	err     error
}

// reserveJournal takes room for ch's entry before anything changes: nil
// without a journal, for a change that records nothing, and for one that
// journals itself (several files, a revert). A file's move (oneSeq) puts
// both files' records in one entry. Its failure refuses the change as a
// full audit log does (503 AUDIT_UNAVAILABLE with the audit log on).
func (x *Executor) reserveJournal(c Call, ch *change) (*journaling, *fault.Error) {
	if x.wal == nil || ch.journaled() || (x.audit == nil && (x.ckpt == nil || c.Session == "")) {
		return nil, nil
	}
	r, err := x.wal.Reserve()
	if errors.Is(err, journal.ErrNoFolder) {
		return nil, nil // each record synced in its own file, which refuses as before
	}
	if err != nil {
		x.log.Error("journal unavailable: mutation refused", "tool", ch.tool, "err", err)
		code := fault.CodeIO
		if x.audit != nil {
			code = fault.CodeAuditUnavailable
		}
		return nil, &fault.Error{Code: code, Message: msgJournalRefused, Err: err}
	}
	return &journaling{res: r, early: x.audit == nil && !ch.oneSeq, atEnd: ch.oneSeq}, nil
}

// keeper hands k (a checkpoint's Recording) the entry.
func (j *journaling) keeper(k fs.Keeper) fs.Keeper {
	if r, ok := k.(*checkpoint.Recording); ok && j != nil {
		var prepared func()
		if j.early {
			prepared = j.start
		}
		r.JournalTo(&j.entry, prepared)
	}
	return k
}

// starter is what starts the entry's commit once the audit record, its
// last record, is in it (nil: no journal, or no audit log, whose entry
// starts at the change line).
func (j *journaling) starter() func() {
	if j == nil || j.early || j.atEnd {
		return nil
	}
	return j.start
}

// start commits the entry in the background, once.
func (j *journaling) start() {
	if j.started {
		return
	}
	j.started, j.done = true, make(chan error, 1)
	go func() { j.done <- j.res.Commit(&j.entry) }()
}

// wait is the result of a started commit.
func (j *journaling) wait() error {
	if j.done != nil {
		j.err, j.done = <-j.done, nil
	}
	return j.err
}

// entryOf is the entry the audit line goes to (nil: none).
func (j *journaling) entryOf() *journal.Entry {
	if j == nil {
		return nil
	}
	return &j.entry
}

// commit puts the entry on disk; its error is the change's, which
// happened (msgJournalLost).
func (x *Executor) commitJournal(j *journaling) *fault.Error {
	if j == nil {
		return nil
	}
	var err error
	if j.started {
		err = j.wait()
	} else {
		err = j.res.Commit(&j.entry)
	}
	if err != nil {
		code := fault.CodeIO
		if x.audit != nil {
			code = fault.CodeAuditUnavailable
		}
		return &fault.Error{Code: code, Message: msgJournalLost, Err: err}
	}
	return nil
}

// cancel gives the room back when the change did not happen; deferrable.
func (j *journaling) cancel() {
	if j == nil {
		return
	}
	if j.started {
		_ = j.wait() // a change that failed after its line: the entry is harmless (docs/journal.md)
		return
	}
	j.res.Cancel()
}

// addAudit puts an audit line Write wrote in e.
func addAudit(e *journal.Entry, w audit.Written) {
	var n [24]byte
	binary.LittleEndian.PutUint64(n[0:], w.Dev)
	binary.LittleEndian.PutUint64(n[8:], w.Ino)
	binary.LittleEndian.PutUint64(n[16:], uint64(w.Offset))
	e.Add(journal.KindAudit, []byte(w.Path), n[:], w.Line)
}

// AuditLinesOf are the audit lines of a journal's records, by the path of
// their log, for audit.Replay.
func AuditLinesOf(recs []journal.Record) map[string][]audit.Written {
	out := map[string][]audit.Written{}
	for _, r := range recs {
		if r.Kind != journal.KindAudit || len(r.Parts) != 3 || len(r.Parts[1]) != 24 {
			continue
		}
		n := r.Parts[1]
		w := audit.Written{Path: string(r.Parts[0]), Dev: binary.LittleEndian.Uint64(n), Ino: binary.LittleEndian.Uint64(n[8:]),
			Offset: int64(binary.LittleEndian.Uint64(n[16:])), Line: r.Parts[2]}
		out[w.Path] = append(out[w.Path], w)
	}
	return out
}
