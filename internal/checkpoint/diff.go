package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// A revert's diffs are bounded twice (docs/checkpoints.md, "The answer"):
// a file is read as text and diffed only when both its sides are below
// DiffMaxBytes, one file at a time, and the diffs one answer shows hold at
// most DiffBudgetBytes in all. So what a revert holds, and what it
// answers, does not grow with its files: the contents themselves are only
// ever streamed (readCurrent, blobFill).

// msgNoDiff stands in for a file's diff in a dry run when either side is
// not text or is at or above max bytes.
func msgNoDiff(path string, max int64) string {
	return "(The diff of " + path + " is not shown: its content before or after is not UTF-8 text, or is " + sizeText(max) + " or larger.)"
}

// msgOverBudget stands in for a file's diff in a dry run when the diffs
// shown before it left too little of the answer's budget.
func msgOverBudget(path string, budget int64) string {
	return "(The diff of " + path + " is not shown: a revert shows at most " + sizeText(budget) + " of diffs in all.)"
}

// msgDiffsNotShown is the line a revert's text gains when its metadata
// leaves out the diffs of some files, naming them in history order.
func msgDiffsNotShown(paths []string, max, budget int64) string {
	return "Diffs not shown for " + strconv.Itoa(len(paths)) + " file(s) (not UTF-8 text, " + sizeText(max) +
		" or larger, or past the " + sizeText(budget) + " of diffs a revert shows in all): " + strings.Join(paths, ", ")
}

// sizeText is n bytes as the texts say it: "1 MiB", "64 KiB", "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// diffsNotShown is "\n" and msgDiffsNotShown when some file's diff is left
// out, else "".
func (s *Store) diffsNotShown(files []*filePlan) string {
	var paths []string
	for _, f := range files {
		if f.omitted {
			paths = append(paths, f.path)
		}
	}
	if len(paths) == 0 {
		return ""
	}
	return "\n" + msgDiffsNotShown(paths, s.opt.DiffMaxBytes, s.opt.DiffBudgetBytes)
}

// diffFiles computes each file's diff and line counts, in history order,
// one file at a time, every lock held; for a dry run also its unified diff
// or the note standing in for it. The hunks kept are copied out of the
// texts, so only they outlive their file. A dry run also checks, streamed,
// the kept content of each file it did not read, as the revert itself
// would: a damaged one refuses it.
func (s *Store) diffFiles(ctx context.Context, d *folders, lk fs.LockedTargets, files []*filePlan, dryRun bool) error {
	budget := s.opt.DiffBudgetBytes
	for _, f := range files {
		f.diffs = []render.Diff{}
		cur, err := s.currentText(ctx, lk, f)
		if err != nil {
			return err
		}
		restore, err := s.restoredText(ctx, d, f, dryRun)
		if err != nil {
			return err
		}
		if cur == nil || restore == nil {
			f.omitted, f.unified = true, msgNoDiff(f.path, s.opt.DiffMaxBytes)
			continue
		}
		diffs, added, removed := render.DiffsCounted(f.path, *cur, *restore)
		f.added, f.removed = &added, &removed
		n := diffBytes(diffs)
		if n > budget {
			f.omitted, f.unified = true, msgOverBudget(f.path, s.opt.DiffBudgetBytes)
			continue
		}
		budget -= n
		f.diffs = cloneDiffs(diffs)
		if dryRun {
			f.unified = render.UnifiedDiff(f.path, *cur, *restore)
		}
	}
	return nil
}

// currentText is the text the file holds now ("" when absent), read again
// under the revert's locks and checked against the hash readCurrent found;
// nil when it is not text, is at or above DiffMaxBytes, or is no longer
// those bytes (a writer outside the locks: the revert's publication will
// refuse it).
func (s *Store) currentText(ctx context.Context, lk fs.LockedTargets, f *filePlan) (*string, error) {
	if f.cur.state == nil {
		empty := ""
		return &empty, nil
	}
	if f.cur.state.Bytes >= s.opt.DiffMaxBytes {
		return nil, nil
	}
	r, _, err := lk.Open(ctx, f.ft.t)
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if err != nil || r == nil {
		return nil, nil // gone or changed since the check: no diff, and the publication refuses it
	}
	defer r.Close()
	b, ok, err := s.readBelow(ctx, r, f.cur.state.Bytes, f.cur.state.SHA256)
	if err != nil || !ok {
		return nil, err
	}
	return textOf(b), nil
}

// restoredText is the text the file gets back ("" for a removal), read
// from its kept content; nil when it is not text or is at or above
// DiffMaxBytes. A kept content that no longer has its hash refuses the
// revert (damaged); a dry run checks, streamed, even those it does not
// read.
func (s *Store) restoredText(ctx context.Context, d *folders, f *filePlan, dryRun bool) (*string, error) {
	if f.restore == nil {
		empty := ""
		return &empty, nil
	}
	var b []byte
	var err error
	ok := false
	if f.restore.Bytes >= s.opt.DiffMaxBytes {
		if dryRun {
			err = s.copyKept(ctx, d, f.restore.SHA256, io.Discard)
		}
	} else {
		var r io.ReadCloser
		if r, err = s.openKept(d, f.restore.SHA256); err == nil {
			b, ok, err = s.readBelow(ctx, r, f.restore.Bytes, f.restore.SHA256)
			r.Close()
			if err == nil && !ok {
				err = errDamaged
			}
		}
	}
	switch {
	case errors.Is(err, errDamaged):
		return nil, damaged(f.changes[0], err)
	case err != nil:
		return nil, err
	case !ok:
		return nil, nil
	}
	return textOf(b), nil
}

// readBelow reads r whole (size bytes, as recorded) if it is below
// DiffMaxBytes; ok when it was and its SHA-256 is sum.
func (s *Store) readBelow(ctx context.Context, r io.Reader, size int64, sum string) (b []byte, ok bool, err error) {
	var buf bytes.Buffer
	buf.Grow(int(min(size, s.opt.DiffMaxBytes)))
	h := sha256.New()
	n, err := copyChunks(ctx, io.MultiWriter(&buf, h), io.LimitReader(r, s.opt.DiffMaxBytes))
	if err != nil || n >= s.opt.DiffMaxBytes || hex.EncodeToString(h.Sum(nil)) != sum {
		return nil, false, err
	}
	return buf.Bytes(), true, nil
}

// textOf is b as LF-normalized text, nil when it is not UTF-8 text.
func textOf(b []byte) *string {
	if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return nil
	}
	s := fs.NormalizeLF(string(b))
	return &s
}

// diffBytes is what diffs cost of the answer's budget: their texts and
// paths (a lower bound of their JSON, as the change feed counts them).
func diffBytes(diffs []render.Diff) int64 {
	var n int64
	for _, d := range diffs {
		n += int64(len(d.Path) + len(d.NewText))
		if d.OldText != nil {
			n += int64(len(*d.OldText))
		}
	}
	return n
}

// cloneDiffs copies the hunks' texts, which are substrings of the whole
// texts, so that those can be freed.
func cloneDiffs(diffs []render.Diff) []render.Diff {
	out := make([]render.Diff, len(diffs))
	for i, d := range diffs {
		out[i] = render.Diff{Path: d.Path, NewText: strings.Clone(d.NewText)}
		if d.OldText != nil {
			old := strings.Clone(*d.OldText)
			out[i].OldText = &old
		}
	}
	return out
}
