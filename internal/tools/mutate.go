package tools

import (
	"context"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Mutation is a successful write or edit, as Options.OnMutation hears of
// it: the tool, the call's session ("" without one), the target, its new
// version, and the hunks of the answer's metadata.
type Mutation struct {
	Tool    string
	Session string
	// Subject is the call's verified subject ("" without one): who may
	// see the change on the feed (docs/identity.md).
	Subject string
	Target  fs.Target
	Version fs.Version
	Diffs   []render.Diff
}

// WriteMetadata is a write's metadata: a create has no diffs.
// Diagnostics is what the checkers found (diagnostics.Report.Metadata:
// one result or a list), absent when none ran (docs/diagnostics.md).
type WriteMetadata struct {
	Operation   fs.Operation  `json:"operation"`
	Diffs       []render.Diff `json:"diffs"`
	Diagnostics any           `json:"diagnostics,omitempty"`
}

// EditMetadata is an edit's metadata; Diagnostics as for a write.
// Match (one edit) or Matches (a batch) say where an edit found its place
// at a tolerant level (docs/edits.md, "Tolerant edits").
type EditMetadata struct {
	Diffs       []render.Diff      `json:"diffs"`
	Match       *render.EditMatch  `json:"match,omitempty"`
	Matches     []render.EditMatch `json:"matches,omitempty"`
	Diagnostics any                `json:"diagnostics,omitempty"`
}

// msgNoSession is the refusal of a write or edit without a session while
// the policy is on; it says how to send one (docs/api.md, "Sessions").
const msgNoSession = "write and edit need a session while the read-before-write policy is on: " +
	"send the X-Session-ID header (1-128 characters of A-Za-z0-9._:-) and read the file in that session first; " +
	"operators can name a frontend's own id header with --session-headers or set --default-session"

// Write creates or replaces a file with content, byte for byte, under the
// policy's intent: a change of one file, whose step is the provider's
// WriteText. It makes no Stat: the provider checks under its lock.
func (x *Executor) Write(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	a, err := writeArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	out, err := x.apply(ctx, &change{tool: ToolWrite, call: c, paths: []string{a.path}, verb: "write", asks: askWrite, esc: a.esc, dryRun: a.dryRun,
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			t := in.targets[0]
			w, err := x.fs.WriteText(ctx, t, a.content, in.wants[0].writeIntent(in.keepers[0], in.dryRun))
			if err != nil {
				return stepOut{}, err
			}
			o := outcome{target: t, version: w.Version, hash: w.Hash, size: int64(len(a.content)), created: w.Operation == fs.OpCreate,
				diffs: diffsOf(a.path, w.Before, &w.After), texts: texts{held: true, before: w.BeforeRaw, after: w.AfterRaw}}
			if in.dryRun {
				return stepOut{files: []outcome{o}, shown: writeDiff(t, w)}, nil
			}
			return stepOut{files: []outcome{o}}, nil
		}})
	if err != nil {
		return Result{}, err
	}
	o := out.files[0]
	meta := WriteMetadata{Operation: fs.OpUpdate, Diffs: o.diffs, Diagnostics: o.diagnostics}
	if o.created {
		meta.Operation = fs.OpCreate
	}
	if a.dryRun {
		return Result{Output: render.DryRunOutput(o.target.Display, out.shown), Metadata: meta}, nil
	}
	return Result{Output: render.WriteOutput(o.target.Display, o.created) + o.found, Metadata: meta}, nil
}

// writeDiff is a write's change as its dry run shows it: a create against
// the empty text (below the provider's diff-basis limit), else the
// provider's bases.
func writeDiff(t fs.Target, out fs.WriteOutcome) string {
	before, after := out.Before, &out.After
	if out.Operation == fs.OpCreate && out.AfterRaw != nil {
		empty, lf := "", fs.NormalizeLF(*out.AfterRaw)
		before, after = &empty, &lf
	}
	return unifiedOf(t.Display, before, after)
}

// Edit replaces literal text in a file the session has read (when the
// policy is on), one edit or a batch: a change of one file, whose step is
// the provider's EditText. It makes no Stat: the provider checks under its
// lock.
func (x *Executor) Edit(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	a, err := editArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	// tolerances are where the last run of the step found its places at a
	// tolerant level (docs/edits.md, "Tolerant edits").
	var tolerances []fs.Tolerance
	out, err := x.apply(ctx, &change{tool: ToolEdit, call: c, paths: []string{a.path}, verb: "edit", asks: askEdit, esc: a.esc, dryRun: a.dryRun,
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			t, w := in.targets[0], in.wants[0]
			e, err := x.fs.EditText(ctx, t, fs.EditRequest{
				OldString: a.oldString, NewString: a.newString, ReplaceAll: a.replaceAll, Batch: a.batch,
				DryRun: in.dryRun, Hints: x.profile != render.ProfileOriginal, Tolerant: x.profile != render.ProfileOriginal,
				SeenHash: w.seenHash(), Keeper: in.keepers[0],
			}, w.version())
			if err != nil {
				return stepOut{}, err
			}
			tolerances = e.Tolerances
			o := outcome{target: t, version: e.Version, hash: e.Hash, size: e.Size,
				diffs: diffsOf(a.path, e.Before, e.After), texts: texts{held: true, before: e.BeforeRaw, after: e.AfterRaw}}
			if in.dryRun {
				return stepOut{files: []outcome{o}, shown: unifiedOf(t.Display, e.Before, e.After)}, nil
			}
			return stepOut{files: []outcome{o}}, nil
		}})
	if err != nil {
		return Result{}, err
	}
	o := out.files[0]
	meta := EditMetadata{Diffs: o.diffs, Diagnostics: o.diagnostics}
	note, match, matches := disclose(tolerances, len(a.batch))
	meta.Match, meta.Matches = match, matches
	if a.dryRun {
		return Result{Output: render.DryRunOutput(o.target.Display, note+out.shown), Metadata: meta}, nil
	}
	output := render.EditOutput(o.target.Display, a.replaceAll)
	if a.batch != nil {
		output = render.BatchEditOutput(o.target.Display, len(a.batch), a.batch[0].ReplaceAll)
	}
	if note != "" {
		output += "\n" + strings.TrimSuffix(note, "\n")
	}
	return Result{Output: output + o.found, Metadata: meta}, nil
}

// unifiedOf is the dry run's diff text; a note when the provider declined
// a diff basis.
func unifiedOf(display string, before, after *string) string {
	if before == nil || after == nil {
		return msgNoDiff
	}
	return render.UnifiedDiff(display, *before, *after)
}

// msgNoDiff stands in for a dry run's diff when the old or new text is too
// large, or the old text is not UTF-8 (docs/edits.md).
const msgNoDiff = "(The diff is not shown: the old or new text is 10 MiB or larger, or the old text is not UTF-8 text.)"

// diffsOf is the hunks between the provider's diff bases; none when it
// declined one (a create, or text it would not hold in memory).
func diffsOf(path string, before, after *string) []render.Diff {
	if before == nil || after == nil {
		return []render.Diff{}
	}
	return render.Diffs(path, *before, *after)
}
