package server

import (
	"fmt"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/journal"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// walFolder is the journal's folder in the root's private folder.
const walFolder = "wal"

// openJournal opens this process's segment of the root's journal (docs/
// journal.md) when something is recorded and --journal is on, and returns
// the segments dead processes left, to replay before anything else
// touches the files their records describe.
func (s *Server) openJournal() ([]*journal.Orphan, error) {
	cfg := s.cfg
	if cfg.NoJournal || (!cfg.Checkpoints.Enabled && cfg.Audit.Path == "") {
		return nil, nil
	}
	// Made by the first change, so a root the server may not write starts.
	dir, err := s.local.PrivateFolder(walFolder, false)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	bound := int64(journal.DefaultSegmentBytes)
	if cfg.Checkpoints.Enabled && cfg.Checkpoints.Bytes > 0 {
		// A segment holds kept contents too: it is sealed, and they are
		// synced in blobs/, long before it could hold --checkpoint-bytes.
		bound = min(bound, max(cfg.Checkpoints.Bytes/4, 1<<20))
		// The contents a segment holds wait in memory for its seal
		// (checkpoint.HeldBytes): sealed at half, a seal in progress
		// leaves room for the next segment's.
		bound = min(bound, checkpoint.HeldBytes/2)
	}
	opts := journal.Options{SegmentBytes: bound, OnError: func(err error) { s.log.Error("journal", "err", err) },
		Make: func() (journal.Folder, error) { return s.local.PrivateFolder(walFolder, true) }}
	var folder journal.Folder
	if dir != nil { // a nil *fs.Folder is not a nil Folder
		folder = dir
	}
	j, orphans, err := journal.Open(folder, opts)
	if err != nil {
		if dir != nil {
			dir.Close()
		}
		return nil, fmt.Errorf("journal: %w", err)
	}
	s.wal = j
	return orphans, nil
}

// records are the orphans' records, in order.
func records(orphans []*journal.Orphan) []journal.Record {
	var out []journal.Record
	for _, o := range orphans {
		out = append(out, o.Records...)
	}
	return out
}

// replayAudit puts back the audit lines a crash took from their logs,
// before the log is opened for appending.
func (s *Server) replayAudit(orphans []*journal.Orphan) error {
	for path, ws := range tools.AuditLinesOf(records(orphans)) {
		n, err := audit.Replay(path, ws)
		if err != nil {
			return fmt.Errorf("journal: replaying the audit log %s: %w", path, err)
		}
		if n > 0 {
			s.log.Info("journal: audit lines a crash took put back", "path", path, "lines", n)
		}
	}
	return nil
}

// retireOrphans removes the replayed segments and registers what syncs
// the files this process's records describe when its segment is sealed.
func (s *Server) retireOrphans(orphans []*journal.Orphan) error {
	if s.wal == nil {
		return nil
	}
	if s.ckpt != nil {
		if r := s.ckpt.Replayed(); r.Blobs > 0 || r.Lines > 0 {
			s.log.Info("journal: checkpoint records a crash took put back", "blobs", r.Blobs, "lines", r.Lines)
		}
	}
	for _, o := range orphans {
		if err := s.wal.Retire(o); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	if s.ckpt != nil {
		s.wal.Seal(s.ckpt.Sealer())
	}
	if s.audit != nil {
		s.wal.Seal(func() func() error { return s.audit.Syncer() })
	}
	return nil
}
