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
// policy's intent. It makes no Stat: the provider checks under its lock.
func (x *Executor) Write(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	a, err := writeArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	if err := x.checkEscalation(a.esc); err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	t, intent, err := x.checkWrite(ctx, c, a, x.fenceOf(a.esc))
	if err == nil && a.esc.present {
		t, intent, err = x.approveWrite(ctx, c, a, t, intent)
	}
	if err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	var au *auditing
	if a.dryRun {
		intent = dryRun(intent)
	} else {
		// The record is reserved before anything changes (docs/audit.md).
		if au, err = x.reserveAudit(ctx, c, ToolWrite, 1); err != nil {
			return Result{}, x.fail(c, ToolWrite, err)
		}
		defer au.cancel()
		intent = x.kept(c, ToolWrite, intent, au)
		x.mutating(t)
	}
	out, werr := x.fs.WriteText(ctx, t, a.content, intent)
	if werr != nil {
		return Result{}, x.fail(c, ToolWrite, x.mutationFailure(ToolWrite, werr))
	}
	meta := WriteMetadata{Operation: out.Operation, Diffs: diffsOf(a.path, out.Before, &out.After)}
	if a.dryRun {
		// Nothing is recorded: a dry run authorizes nothing (docs/edits.md).
		x.done(c, ToolWrite, CodeOK)
		return Result{Output: render.DryRunOutput(t.Display, writeDiff(t, a.content, out)), Metadata: meta}, nil
	}
	lost := au.commitKept(x, t, out.Version, int64(len(a.content)))
	x.storeFailed("observe", x.gateOf(c).ObservePresent(c.key(), t.Key, out.Version, out.Hash))
	x.mutated(Mutation{Tool: ToolWrite, Session: c.Session, Subject: c.Subject, Target: t, Version: out.Version, Diffs: meta.Diffs})
	if lost != nil {
		return Result{}, x.fail(c, ToolWrite, x.auditLost(c, ToolWrite, t.Display, lost))
	}
	found, diag := x.diagnose(ctx, t, out.Operation == fs.OpCreate, out.BeforeRaw, &a.content)
	meta.Diagnostics = diag
	x.done(c, ToolWrite, CodeOK)
	return Result{Output: render.WriteOutput(t.Display, out.Operation == fs.OpCreate) + found, Metadata: meta}, nil
}

// checkWrite is every check of a write before the provider, in the order
// of docs/sandbox.md: the session, the root (the target resolved now), the
// policy's intent, the fence under mode. The same code judges the call
// before a person is asked and again once they approved.
func (x *Executor) checkWrite(ctx context.Context, c Call, a writeArgs, mode Fence) (fs.Target, *fs.WriteIntent, *fault.Error) {
	t, cwd, err := x.mutationTarget(ctx, c, "write", a.path)
	if err != nil {
		return fs.Target{}, nil, err
	}
	intent, ierr := x.gateOf(c).WriteIntent(c.key(), t)
	if ierr != nil {
		x.storeFailed("decide", ierr)
		return fs.Target{}, nil, x.mutationFailure(ToolWrite, ierr)
	}
	if !x.allows(mode, t, cwd) {
		return fs.Target{}, nil, fenceDenied(mode)
	}
	return t, intent, nil
}

// approveWrite asks a person about the write's change, as its dry run
// shows it (no channel: nobody is asked), and once approved checks the
// call again from the start under the granted mode. The intent it returns
// lets only the change shown happen: the provider refuses anything else
// with the ordinary error (docs/sandbox.md).
func (x *Executor) approveWrite(ctx context.Context, c Call, a writeArgs, t fs.Target, intent *fs.WriteIntent) (fs.Target, *fs.WriteIntent, *fault.Error) {
	if !x.asks {
		return fs.Target{}, nil, escalationNoChannel(a.esc.mode)
	}
	out, werr := x.fs.WriteText(ctx, t, a.content, dryRun(intent))
	if werr != nil {
		return fs.Target{}, nil, x.mutationFailure(ToolWrite, werr)
	}
	if err := x.ask(ctx, c, ToolWrite, t, a.esc, writeDiff(t, a.content, out)); err != nil {
		return fs.Target{}, nil, err
	}
	now, nowIntent, err := x.checkWrite(ctx, c, a, a.esc.mode)
	if err != nil {
		return fs.Target{}, nil, err
	}
	// The path must still lead to the file shown, and the session's view
	// of it be the one the dry run was judged by (what the session did
	// meanwhile counts).
	if now.Key != t.Key || !samePtr(nowIntent, intent) {
		return fs.Target{}, nil, x.mutationFailure(ToolWrite, fs.StaleError("write", now.Display))
	}
	// Pinned to the file the dry run found: absent, or at its version
	// (the bytes the session saw, by their hash, also count as it).
	pin := &fs.WriteIntent{Kind: fs.CreateIfAbsent}
	if out.Operation == fs.OpUpdate {
		pin = &fs.WriteIntent{Kind: fs.ReplaceIfVersion, Version: out.Version}
		if intent != nil {
			pin.Hash = intent.Hash
		}
	}
	return now, pin, nil
}

// kept is intent with the Keeper that records the write in c's session's
// history (docs/checkpoints.md); a nil intent stays unconditional.
func (x *Executor) kept(c Call, tool string, intent *fs.WriteIntent, au *auditing) *fs.WriteIntent {
	k := au.keeper(x.keeper(c, tool, false))
	if k == nil {
		return intent
	}
	w := fs.WriteIntent{}
	if intent != nil {
		w = *intent
	}
	w.Keeper = k
	return &w
}

// dryRun is intent for a dry run of the same call.
func dryRun(intent *fs.WriteIntent) *fs.WriteIntent {
	dry := fs.WriteIntent{DryRun: true}
	if intent != nil {
		dry = *intent
		dry.DryRun = true
	}
	return &dry
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
	req.Keeper = x.keeper(c, ToolEdit, a.dryRun)
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
	note, match, matches := disclose(out.Tolerances, len(a.batch))
	meta.Match, meta.Matches = match, matches
	if a.dryRun {
		x.done(c, ToolEdit, CodeOK) // nothing recorded (docs/edits.md)
		return Result{Output: render.DryRunOutput(t.Display, note+unifiedOf(t.Display, out.Before, out.After)), Metadata: meta}, nil
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
	if note != "" {
		output += "\n" + strings.TrimSuffix(note, "\n")
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
		Tolerant: x.profile != render.ProfileOriginal,
	}
	if guard != nil {
		req.SeenHash = guard.Hash
	}
	return req
}

// samePtr reports whether a and b are both nil or point to equal values.
func samePtr[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
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
