package tools

import (
	"context"
	"errors"
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
type EditMetadata struct {
	Diffs       []render.Diff `json:"diffs"`
	Diagnostics any           `json:"diagnostics,omitempty"`
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
	outs, err := x.apply(ctx, &change{tool: ToolWrite, call: c, paths: []string{a.path}, verb: "write", asks: askWrite, esc: a.esc, dryRun: a.dryRun,
		step: func(ctx context.Context, in stepIn) ([]outcome, error) {
			t := in.targets[0]
			out, err := x.fs.WriteText(ctx, t, a.content, in.wants[0].writeIntent(in.keepers[0], in.dryRun))
			if err != nil {
				return nil, err
			}
			o := outcome{target: t, version: out.Version, hash: out.Hash, size: int64(len(a.content)), created: out.Operation == fs.OpCreate,
				diffs: diffsOf(a.path, out.Before, &out.After), texts: &texts{before: out.BeforeRaw, after: &a.content}}
			if in.dryRun {
				o.shown = writeDiff(t, a.content, out)
			}
			return []outcome{o}, nil
		}})
	if err != nil {
		return Result{}, err
	}
	o := outs[0]
	meta := WriteMetadata{Operation: fs.OpUpdate, Diffs: o.diffs, Diagnostics: o.diagnostics}
	if o.created {
		meta.Operation = fs.OpCreate
	}
	if a.dryRun {
		return Result{Output: render.DryRunOutput(o.target.Display, o.shown), Metadata: meta}, nil
	}
	return Result{Output: render.WriteOutput(o.target.Display, o.created) + o.found, Metadata: meta}, nil
}

// writeDiff is a write's change as its dry run shows it: a create against
// the empty text (below the diff-basis limit), else the provider's bases.
func writeDiff(t fs.Target, content string, out fs.WriteOutcome) string {
	before, after := out.Before, &out.After
	if out.Operation == fs.OpCreate && len(content) < fs.DefaultDiffBasisMaxBytes {
		empty, lf := "", lfNormalize(content)
		before, after = &empty, &lf
	}
	return unifiedOf(t.Display, before, after)
}

// Edit replaces literal text in a file the session has read (when the
// policy is on). It makes no Stat: the provider checks under its lock.
func (x *Executor) Edit(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	a, err := editArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	if err := x.checkEscalation(a.esc); err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	t, guard, err := x.checkEdit(ctx, c, a, x.fenceOf(a.esc))
	if err == nil && a.esc.present {
		t, guard, err = x.approveEdit(ctx, c, a, t, guard)
	}
	if err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	req := x.editRequest(a, guard)
	if !a.dryRun {
		req.Keeper = x.keeper(c, ToolEdit)
	}
	var expected *fs.Version
	if guard != nil {
		expected = &guard.Version
	}
	var au *auditing
	if !a.dryRun {
		if au, err = x.reserveAudit(ctx, c, ToolEdit, 1); err != nil {
			return Result{}, x.fail(c, ToolEdit, err)
		}
		defer au.cancel()
		req.Keeper = au.keeper(req.Keeper)
		x.mutating(t)
	}
	out, eerr := x.fs.EditText(ctx, t, req, expected)
	if eerr != nil {
		return Result{}, x.fail(c, ToolEdit, x.editFailure(eerr))
	}
	meta := EditMetadata{Diffs: diffsOf(a.path, out.Before, out.After)}
	if a.dryRun {
		x.done(c, ToolEdit, CodeOK) // nothing recorded (docs/edits.md)
		return Result{Output: render.DryRunOutput(t.Display, unifiedOf(t.Display, out.Before, out.After)), Metadata: meta}, nil
	}
	lost := au.commitKept(x, t, out.Version, out.Size)
	x.storeFailed("observe", x.gateOf(c).ObservePresent(c.key(), t.Key, out.Version, out.Hash))
	x.mutated(Mutation{Tool: ToolEdit, Session: c.Session, Subject: c.Subject, Target: t, Version: out.Version, Diffs: meta.Diffs})
	if lost != nil {
		return Result{}, x.fail(c, ToolEdit, x.auditLost(c, ToolEdit, t.Display, lost))
	}
	found, diag := x.diagnose(ctx, t, false, out.BeforeRaw, out.AfterRaw)
	meta.Diagnostics = diag
	x.done(c, ToolEdit, CodeOK)
	output := render.EditOutput(t.Display, a.replaceAll)
	if a.batch != nil {
		output = render.BatchEditOutput(t.Display, len(a.batch), a.batch[0].ReplaceAll)
	}
	return Result{Output: output + found, Metadata: meta}, nil
}

// checkEdit is checkWrite for an edit: the session, the root, the policy's
// guard (what the session saw), the fence under mode.
func (x *Executor) checkEdit(ctx context.Context, c Call, a editArgs, mode Fence) (fs.Target, *fs.Observed, *fault.Error) {
	t, cwd, err := x.mutationTarget(ctx, c, "edit", a.path)
	if err != nil {
		return fs.Target{}, nil, err
	}
	guard, gerr := x.gateOf(c).EditGuard(c.key(), t)
	if gerr != nil {
		x.storeFailed("decide", gerr)
		return fs.Target{}, nil, x.mutationFailure(ToolEdit, gerr)
	}
	if !x.allows(mode, t, cwd) {
		return fs.Target{}, nil, fenceDenied(mode)
	}
	return t, guard, nil
}

// approveEdit is approveWrite for an edit. The guard it returns is the
// version the dry run edited (with the hash of the bytes the session saw),
// so the edit applies to exactly the text shown.
func (x *Executor) approveEdit(ctx context.Context, c Call, a editArgs, t fs.Target, guard *fs.Observed) (fs.Target, *fs.Observed, *fault.Error) {
	if !x.asks {
		return fs.Target{}, nil, escalationNoChannel(a.esc.mode)
	}
	req := x.editRequest(a, guard)
	req.DryRun = true
	var expected *fs.Version
	if guard != nil {
		expected = &guard.Version
	}
	out, eerr := x.fs.EditText(ctx, t, req, expected)
	if eerr != nil {
		return fs.Target{}, nil, x.editFailure(eerr)
	}
	if err := x.ask(ctx, c, ToolEdit, t, a.esc, unifiedOf(t.Display, out.Before, out.After)); err != nil {
		return fs.Target{}, nil, err
	}
	now, nowGuard, err := x.checkEdit(ctx, c, a, a.esc.mode)
	if err != nil {
		return fs.Target{}, nil, err
	}
	if now.Key != t.Key || !samePtr(nowGuard, guard) {
		return fs.Target{}, nil, x.mutationFailure(ToolEdit, fs.StaleError("edit", now.Display))
	}
	pin := &fs.Observed{Version: out.Version}
	if guard != nil {
		pin.Hash = guard.Hash
	}
	return now, pin, nil
}

// editRequest is the provider's request for a's edit under guard.
func (x *Executor) editRequest(a editArgs, guard *fs.Observed) fs.EditRequest {
	req := fs.EditRequest{
		OldString: a.oldString, NewString: a.newString, ReplaceAll: a.replaceAll,
		Batch: a.batch, DryRun: a.dryRun, Hints: x.profile != render.ProfileOriginal,
	}
	if guard != nil {
		req.SeenHash = guard.Hash
	}
	return req
}

// editFailure is mutationFailure with the hints of a miss (extended
// profile): the first line stays the message and its remedy; the hint's
// text follows on the next lines, and a similar region also goes into Hint.
func (x *Executor) editFailure(err error) *fault.Error {
	e := x.mutationFailure(ToolEdit, err)
	var fe *fault.Error
	if x.profile == render.ProfileOriginal || !errors.As(err, &fe) || fe.Hint == nil {
		return e
	}
	h := fe.Hint
	switch {
	case len(h.Lines) > 0:
		e.Message += render.SimilarHint(h.StartLine, h.Lines, x.caps.MaxLineLength)
		lines := h.Lines[:min(len(h.Lines), render.HintMaxLines)]
		shown := make([]string, len(lines))
		for i, l := range lines {
			shown[i] = render.TruncateLine(l, x.caps.MaxLineLength)
		}
		e.Hint = &fault.Hint{StartLine: h.StartLine, EndLine: h.StartLine + len(shown) - 1, Lines: shown}
	case len(h.MatchLines) > 0:
		e.Message += render.MatchesHint(h.MatchLines)
	}
	return e
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

// lfNormalize turns CRLF into LF, as the provider's diff bases are.
func lfNormalize(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// mutationTarget resolves the target of a write or edit, whose session is
// required while the policy is on (arguments are checked first).
func (x *Executor) mutationTarget(ctx context.Context, c Call, op, path string) (fs.Target, fs.Target, *fault.Error) {
	if x.policyOn && c.Session == "" {
		return fs.Target{}, fs.Target{}, sessionError(msgNoSession)
	}
	return x.targetIn(ctx, c, op, path)
}

// mutationFailure adds the remedy the model needs after a refused write or
// edit and counts stale versions.
func (x *Executor) mutationFailure(tool string, err error) *fault.Error {
	e := errorOf(err)
	if e.Code == fault.CodeStaleVersion {
		x.obs.StaleVersion(tool)
	}
	e.Message += render.Remedy(e.Code)
	return e
}

// diffsOf is the hunks between the provider's diff bases; none when it
// declined one (a create, or text it would not hold in memory).
func diffsOf(path string, before, after *string) []render.Diff {
	if before == nil || after == nil {
		return []render.Diff{}
	}
	return render.Diffs(path, *before, *after)
}
