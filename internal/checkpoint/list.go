package checkpoint

import (
	"context"
	"time"
)

// Change is one change of a session's history as it is listed (GET
// /sessions/{id}/changes): before is the file before it (null: it did not
// exist), after the file it left (null: it removed it); revertible, and
// reason when not; the lines it added and removed (null when either side
// was not text or at or above the diff limit).
type Change struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Tool string    `json:"tool"`
	Path string    `json:"path"`
	// PathBytes is the name's exact bytes when Path cannot say them: it
	// is not valid UTF-8 (Path shows U+FFFD for each bad byte) or holds
	// U+FFFD itself (docs/checkpoints.md, "Names that are not UTF-8").
	PathBytes  []byte  `json:"path_bytes,omitempty"`
	Before     *Before `json:"before"`
	After      *After  `json:"after"`
	Revertible bool    `json:"revertible"`
	Reason     string  `json:"reason,omitempty"`
	Added      *int    `json:"added"`
	Removed    *int    `json:"removed"`
	// Folder and To describe a change of folders (folders.go): "made" or
	// "moved", and the folder asked for or the destination.
	Folder string `json:"folder,omitempty"`
	To     string `json:"to,omitempty"`
}

// Before is a file before a change.
type Before struct {
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	Bytes   int64  `json:"bytes"`
}

// After is a file after a change.
type After struct {
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
}

// Changes lists session's changes, newest first (a revert's changes in the
// order of its text), leaving out the ones not known to be published yet.
// A session without a history has none.
func (s *Store) Changes(ctx context.Context, session string) ([]Change, error) {
	out := []Change{}
	d, err := s.folders(false)
	if err != nil {
		return nil, ioErr("list", err)
	}
	if d == nil {
		return out, nil
	}
	s.Touch(session)
	err = s.withLog(ctx, d, session, func(lg *sessionLog) error {
		cs := lg.h.changes
		for i := len(cs) - 1; i >= 0; i-- {
			// Changes of one seq are adjacent: list each group in log order.
			j := i
			for j > 0 && cs[j-1].seq == cs[i].seq {
				j--
			}
			for _, c := range cs[j : i+1] {
				if c.state == done {
					out = append(out, listed(c))
				}
			}
			i = j
		}
		return nil
	})
	if err != nil {
		return nil, ioErr("list", err)
	}
	return out, nil
}

func listed(c *change) Change {
	l := Change{Seq: c.seq, Time: c.time, Tool: c.tool, Path: c.path, Revertible: c.revertible(), Added: c.added, Removed: c.removed, Folder: c.folder, To: c.to}
	if !c.lossy {
		l.PathBytes = exactBytes(c.path)
	}
	if !l.Revertible {
		l.Reason = c.reason()
	}
	if c.before != nil {
		l.Before = &Before{Version: c.before.Version, SHA256: c.before.SHA256, Bytes: c.before.Bytes}
	}
	if c.after != nil {
		l.After = &After{Version: c.after.Version, SHA256: c.after.SHA256}
	}
	return l
}
