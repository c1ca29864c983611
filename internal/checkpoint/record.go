package checkpoint

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/journal"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The reasons a change is not revertible, as the listing and a refused
// revert say them.
const (
	whyEvicted    = "the content it replaced was dropped to keep the checkpoints within --checkpoint-bytes"
	whyUnreadable = "the content it replaced could not be read, so it was not kept"
	whyLossyName  = "its file name was recorded before names were kept byte for byte and holds U+FFFD, so which file it names is uncertain"
)

func whyTooLarge(size, max int64) string {
	return fmt.Sprintf("the content it replaced (%d bytes) is larger than --checkpoint-max-file-bytes (%d bytes), so it was not kept", size, max)
}

// ToolRevert is the tool of the changes a revert records.
const ToolRevert = "revert"

// Recording records one write or edit of a session: pass it as the
// mutation's fs.Keeper (fs.WriteIntent.Keeper, fs.EditRequest.Keeper). The
// provider calls it under the target's lock: Keep copies the replaced
// content into blobs/ (synced) while the new content is staged; Prepare
// appends the change to the session's log and syncs it, before the new
// content is published; Done appends that it was published, or that it
// was not. One Recording serves one call.
type Recording struct {
	s             *Store
	session, tool string

	d       *folders
	path    string
	before  *State
	kept    bool
	why     string
	release func() // the gc lock, from the blob until a synced line references it
	seq     int64
	logged  bool // the change line is in the log
	// entry is the change's journal entry (JournalTo): the kept content
	// and the lines go there instead of being synced; nil: synced.
	entry    *journal.Entry
	prepared func()
	// with is the Recording whose seq this one shares (Join), or nil.
	with *Recording
}

// Join makes r's change share first's seq: one change of two files made
// by one call (a move: its source removed, its destination made), each
// file recorded by its own Recording. first must be prepared before r.
func (r *Recording) Join(first *Recording) { r.with = first }

// Recording starts the record of a tool's call in session ("write",
// "edit", or the name of another tool that mutates one file).
func (s *Store) Recording(session, tool string) *Recording {
	return &Recording{s: s, session: session, tool: tool}
}

var _ fs.Keeper = (*Recording)(nil)

// Keep keeps the replaced content: in blobs/ when it is at most
// MaxFileBytes (else only its hash, and the change is not revertible).
func (r *Recording) Keep(ctx context.Context, rep fs.Replaced) error {
	r.path = rep.Path
	s := r.s
	if err := s.waitBounds(ctx); err != nil {
		return err
	}
	d, err := s.folders(true)
	if err != nil {
		return err
	}
	r.d = d
	if !rep.Exists {
		return nil
	}
	r.before = &State{Version: string(rep.Version), Bytes: rep.Size, Mode: rep.Mode}
	if rep.Content == nil {
		r.why = whyUnreadable
		return nil
	}
	src := io.NewSectionReader(rep.Content, 0, rep.Size)
	if rep.Size > s.opt.MaxFileBytes {
		r.why = whyTooLarge(rep.Size, s.opt.MaxFileBytes)
		r.before.SHA256, _, err = hashOnly(ctx, src)
		return err
	}
	if r.release, err = s.gc.rlock(ctx, d); err != nil {
		return err
	}
	if r.entry != nil && rep.Size <= journal.InlineBytes {
		return r.keepInline(ctx, d, src, rep.Size)
	}
	sum, n, err := s.putBlob(ctx, d, src)
	if err != nil {
		return err
	}
	r.before.SHA256, r.before.Bytes, r.kept = sum, n, true
	s.bytes.Add(n)
	return nil
}

// BeforeSHA256 is the SHA-256 (hex) Keep computed of the replaced
// content, "" before Keep, for a create, or when it could not be read: an
// audit record reuses it instead of reading the file again.
func (r *Recording) BeforeSHA256() string {
	if r.before == nil {
		return ""
	}
	return r.before.SHA256
}

// Prepare appends the change, synced, with the new content's SHA-256 (nil:
// the change removes the file). An older pending change of the same file
// in this session is settled first: the target's lock is ours, so its
// writer is gone.
func (r *Recording) Prepare(ctx context.Context, sha256 *[32]byte) error {
	defer r.releaseGC()
	var after *State
	if sha256 != nil {
		after = &State{SHA256: hex.EncodeToString(sha256[:])}
	}
	s := r.s
	return s.withLog(ctx, r.d, r.session, func(lg *sessionLog) error {
		settled := settleByBefore(lg.h, r.path, r.before)
		r.seq = lg.h.lastSeq + 1
		if r.with != nil && r.with.logged && r.with.session == r.session {
			r.seq = r.with.seq
		}
		e := entry{T: tChange, Seq: r.seq, Time: s.now().Format(timeFormat), Tool: r.tool, Path: r.path,
			Before: r.before, After: after, Kept: r.kept, Why: r.why}
		buf, err := lg.appendBytes(r.entry == nil, append(settled, e)...)
		if err != nil {
			return err
		}
		if r.entry != nil {
			r.journalLines(lg, buf)
			if r.prepared != nil {
				defer r.prepared() // starts the commit, waits for nothing
			}
		}
		r.logged = true
		s.changes.Add(1)
		return nil
	})
}

// Done appends the outcome: done with the new version and line counts, or
// dropped. It cannot fail the call (it is published already, or not at
// all); a line it cannot write is settled on the next look at the file.
func (r *Recording) Done(p *fs.Published) {
	r.releaseGC()
	if !r.logged {
		return
	}
	e := entry{T: tDrop, Seq: r.seq, Path: r.path}
	if p != nil {
		e = entry{T: tDone, Seq: r.seq, Path: r.path, Version: string(p.Version)}
		if p.Before != nil && p.After != nil {
			added, removed := render.LineCounts(*p.Before, *p.After)
			e.Added, e.Removed = &added, &removed
		}
	}
	if err := r.s.withLog(context.Background(), r.d, r.session, func(lg *sessionLog) error {
		buf, err := lg.appendBytes(false, e)
		if err == nil && r.entry != nil {
			r.journalLines(lg, buf)
		}
		return err
	}); err != nil {
		r.s.log.Warn("checkpoints: cannot note the outcome of a change", "err", err)
	}
	r.s.afterChange()
}

func (r *Recording) releaseGC() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// timeFormat is how a change's time is written: RFC 3339 in UTC, to the
// nanosecond.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// settleByBefore settles the pending (not journaled) changes of path in
// h, knowing the file's state now (nil: absent), before a new change: a
// pending change that left what the file is now was published (done, at
// the version now), any other was not (dropped). It returns the lines.
func settleByBefore(h *history, path string, now *State) []entry {
	var out []entry
	for _, c := range h.changes {
		if c.state != pending || c.path != path || c.journaled() {
			continue
		}
		if left(now, c.after) {
			var version string
			if now != nil {
				version = now.Version
			}
			out = append(out, entry{T: tDone, Seq: c.seq, Path: c.path, Version: version})
		} else {
			out = append(out, entry{T: tDrop, Seq: c.seq, Path: c.path})
		}
	}
	return out
}

// left reports whether a file in state now (nil: absent) is what a change
// that left after (nil: it removed the file) left, by its bytes: a pending
// change's after has no version yet.
func left(now, after *State) bool {
	if now == nil || after == nil {
		return now == nil && after == nil
	}
	return now.SHA256 != "" && now.SHA256 == after.SHA256
}
