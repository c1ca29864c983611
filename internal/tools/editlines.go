package tools

import (
	"context"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// EditLinesMetadata is edit_lines's metadata (api/openapi.yaml,
// EditLinesMetadata): the hunks, how far the anchors had moved, and the
// changed region with its new anchors.
type EditLinesMetadata struct {
	Diffs       []render.Diff `json:"diffs"`
	Shift       int           `json:"shift,omitempty"`
	Region      *LinesRegion  `json:"region,omitempty"`
	Diagnostics any           `json:"diagnostics,omitempty"`
}

// LinesRegion is the changed lines of an edit_lines answer.
type LinesRegion struct {
	StartLine int           `json:"startLine"`
	EndLine   int           `json:"endLine"`
	Lines     []render.Line `json:"lines"`
}

// EditLines replaces, deletes and inserts lines named by their anchors
// (docs/edits.md, "Anchored lines"), all or nothing, in a file the session
// has read (when the policy is on): a change of one file, whose step is
// the provider's EditText with edit_lines's applier as its Rewrite, run
// under the target's lock on the file as it is.
func (x *Executor) EditLines(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	if !x.Offers(ToolEditLines) {
		return Result{}, x.fail(c, ToolEditLines, argError("unknown tool "+render.Quote(ToolEditLines)))
	}
	a, err := editLinesArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolEditLines, err)
	}
	maxLine := x.caps.MaxLineLength
	if maxLine <= 0 {
		maxLine = render.DefaultCaps().MaxLineLength
	}
	var applied render.LinesApplied
	out, err := x.apply(ctx, &change{tool: ToolEditLines, call: c, paths: []string{a.path}, verb: "edit", asks: askEdit, esc: a.esc, dryRun: a.dryRun,
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			t, w := in.targets[0], in.wants[0]
			e, err := x.fs.EditText(ctx, t, fs.EditRequest{
				Rewrite: func(text []byte) ([]byte, error) {
					res, ferr := render.ApplyLines(text, a.edits, t.Display, maxLine)
					if ferr != nil {
						return nil, ferr
					}
					applied = res
					return res.Text, nil
				},
				DryRun: in.dryRun, SeenHash: w.seenHash(), Keeper: in.keepers[0],
			}, w.version())
			if err != nil {
				return stepOut{}, err
			}
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
	meta := EditLinesMetadata{Diffs: o.diffs, Shift: applied.Shift, Diagnostics: o.diagnostics}
	if a.dryRun {
		return Result{Output: render.DryRunOutput(o.target.Display, out.shown), Metadata: meta}, nil
	}
	if len(applied.Region) > 0 {
		meta.Region = &LinesRegion{StartLine: applied.Region[0].Number, EndLine: applied.RegionEnd, Lines: applied.Region}
	}
	return Result{Output: render.EditLinesOutput(o.target.Display, applied) + o.found, Metadata: meta}, nil
}
