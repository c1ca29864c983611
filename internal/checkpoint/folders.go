package checkpoint

import (
	"context"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// Changes of folders (docs/files.md, "Move, delete and mkdir"): a folder
// mkdir made and a folder's move are recorded as changes with no content
// (Folder "made" or "moved"), and a revert undoes them after the files of
// its range, newest first: it removes what mkdir made, innermost first,
// each only while it is empty, and moves a folder back with the kernel's
// no-replace rename. The revert's own records are of files only, so a
// revert of a revert does not redo them.

// The kinds of a folder change.
const (
	FolderMade  = "made"
	FolderMoved = "moved"
)

// RecordFolder records a change of folders in session's history under
// tool, done: for FolderMade, path is the outermost folder made and to the
// folder asked for; for FolderMoved, path the source and to the
// destination (root-relative real paths).
func (s *Store) RecordFolder(ctx context.Context, session, tool, kind, path, to string) error {
	d, err := s.folders(true)
	if err != nil {
		return ioErr("record", err)
	}
	err = s.withLog(ctx, d, session, func(lg *sessionLog) error {
		e := entry{T: tChange, Seq: lg.h.lastSeq + 1, Time: s.now().Format(timeFormat), Tool: tool, Path: path, Folder: kind, To: to, Done: true}
		if err := lg.append(true, e); err != nil {
			return err
		}
		s.changes.Add(1)
		return nil
	})
	if err != nil {
		return ioErr("record", err)
	}
	s.afterChange()
	return nil
}

// folderOps is the provider's folder operations, which a revert of a
// folder change needs (fs.Local has them).
func (s *Store) folderOps() (fs.Ops, bool) {
	o, ok := s.fs.(fs.Ops)
	return o, ok
}

// splitFolders parts sel into the changes of files and of folders.
func splitFolders(sel []*change) (files, folders []*change) {
	for _, c := range sel {
		if c.folder != "" {
			folders = append(folders, c)
		} else {
			files = append(files, c)
		}
	}
	return files, folders
}

// checkFolders checks, before anything is written, that each folder a
// move would move back is still where the move left it and its old place
// is free (newest first, each as the ones after it leave things); a made
// folder needs nothing (it is removed only if it is empty then). It
// returns the paths that changed.
func (s *Store) checkFolders(ctx context.Context, folders []*change) []string {
	var changed []string
	moved := map[string]string{} // where a newer move back put a folder
	for i := len(folders) - 1; i >= 0; i-- {
		c := folders[i]
		if c.folder != FolderMoved {
			continue
		}
		here := s.typeAt(ctx, c.to)
		if p, ok := moved[c.to]; ok && p != "" {
			here = fs.TypeDirectory
		}
		if here != fs.TypeDirectory || s.typeAt(ctx, c.path) != fs.TypeMissing {
			changed = append(changed, c.path)
			continue
		}
		moved[c.path] = c.to
	}
	return changed
}

// typeAt is what a root-relative path holds now (TypeMissing when it does
// not resolve).
func (s *Store) typeAt(ctx context.Context, rel string) fs.FileType {
	t, err := s.fs.Resolve(ctx, "revert", rel, "")
	if err != nil {
		return fs.TypeMissing
	}
	st, ok := s.fs.(interface {
		Stat(context.Context, fs.Target) (fs.Info, error)
	})
	if !ok {
		return fs.TypeMissing
	}
	info, err := st.Stat(ctx, t)
	if err != nil {
		return fs.TypeMissing
	}
	return info.Type
}

// revertFolders undoes folder changes newest first, after the files: a
// made folder and its made parents removed while empty, a moved folder
// moved back. A move back that fails is FS_STALE_VERSION naming it (the
// files are restored by then).
func (s *Store) revertFolders(ctx context.Context, folders []*change) error {
	ops, ok := s.folderOps()
	if !ok {
		return nil
	}
	for i := len(folders) - 1; i >= 0; i-- {
		c := folders[i]
		switch c.folder {
		case FolderMade:
			for p := c.to; ; {
				t, err := s.fs.Resolve(ctx, "revert", p, "")
				if err != nil {
					break
				}
				if _, err := ops.RemoveFolder(ctx, t, fs.FolderOptions{}); err != nil {
					break // not empty, or gone: what it holds stays
				}
				if p == c.path || !strings.Contains(p, "/") {
					break
				}
				p = p[:strings.LastIndexByte(p, '/')]
			}
		case FolderMoved:
			from, err1 := s.fs.Resolve(ctx, "revert", c.to, "")
			to, err2 := s.fs.Resolve(ctx, "revert", c.path, "")
			if err1 != nil || err2 != nil {
				return stale([]string{c.path})
			}
			if _, err := ops.Move(ctx, from, to, fs.MoveOptions{}); err != nil {
				if fault.CodeOf(err) == fault.CodeAborted {
					return err
				}
				return stale([]string{c.path})
			}
		}
	}
	return nil
}

// folderNote is a folder change as a revert's dry run shows it.
func folderNote(c *change) string {
	if c.folder == FolderMade {
		return "(Removes the folder " + c.to + " and the folders made with it, each if empty.)"
	}
	return "(Moves the folder " + c.to + " back to " + c.path + ".)"
}

// fenceFolders asks allow about every folder a revert would remove or
// move (both places of a move).
func (s *Store) fenceFolders(ctx context.Context, allow func(fs.Target) error, folders []*change) error {
	if allow == nil {
		return nil
	}
	for _, c := range folders {
		for _, p := range []string{c.path, c.to} {
			t, err := s.fs.Resolve(ctx, "revert", p, "")
			if err != nil {
				continue
			}
			if err := allow(t); err != nil {
				return err
			}
		}
	}
	return nil
}
