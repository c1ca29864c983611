package tools

import (
	"context"
	"errors"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Mutation is a successful write or edit, as Options.OnMutation hears of
// it: the tool, the call's session ("" without one), the target, its new
// version, and the hunks of the answer's metadata.
type Mutation struct {
	Tool    string
	Session string
	Target  fs.Target
	Version fs.Version
	Diffs   []render.Diff
}

// WriteMetadata is a write's metadata: a create has no diffs.
type WriteMetadata struct {
	Operation fs.Operation  `json:"operation"`
	Diffs     []render.Diff `json:"diffs"`
}

// EditMetadata is an edit's metadata.
type EditMetadata struct {
	Diffs []render.Diff `json:"diffs"`
}

// msgNoSession is the refusal of a write or edit without a session while
// the policy is on; it says how to send one (docs/api.md, "Sessions").
const msgNoSession = "write and edit need a session while the read-before-write policy is on: " +
	"send the X-Session-ID header (1-128 characters of A-Za-z0-9._:-) and read the file in that session first; " +
	"operators can name a frontend's own id header with --session-headers or set --default-session"

// Write creates or replaces a file with content, byte for byte, under the
// policy's intent. It makes no Stat: the provider checks under its lock.
func (x *Executor) Write(ctx context.Context, c Call, raw []byte) (Result, *Error) {
	c = c.started()
	a, err := writeArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	if err := x.checkEscalation(a.esc); err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	t, cwd, err := x.mutationTarget(ctx, c, "write", a.path)
	if err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	intent, ierr := x.gateOf(c).WriteIntent(c.Session, t)
	if ierr != nil {
		x.storeFailed("decide", ierr)
		return Result{}, x.fail(c, ToolWrite, x.mutationFailure(ToolWrite, ierr))
	}
	if escalated, err := x.fence(ctx, c, ToolWrite, t, cwd, a.esc); err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	} else if escalated {
		// The session may have read or written the file while a person
		// decided: its intent now, not the one before the wait.
		if intent, ierr = x.gateOf(c).WriteIntent(c.Session, t); ierr != nil {
			x.storeFailed("decide", ierr)
			return Result{}, x.fail(c, ToolWrite, x.mutationFailure(ToolWrite, ierr))
		}
	}
	if a.dryRun {
		dry := fs.WriteIntent{DryRun: true}
		if intent != nil {
			dry = *intent
			dry.DryRun = true
		}
		intent = &dry
	} else {
		x.mutating(t)
	}
	out, werr := x.fs.WriteText(ctx, t, a.content, intent)
	if werr != nil {
		return Result{}, x.fail(c, ToolWrite, x.mutationFailure(ToolWrite, werr))
	}
	meta := WriteMetadata{Operation: out.Operation, Diffs: diffsOf(a.path, out.Before, &out.After)}
	if a.dryRun {
		// Nothing is recorded: a dry run authorizes nothing (docs/edits.md).
		before, after := out.Before, &out.After
		if out.Operation == fs.OpCreate && len(a.content) < fs.DefaultDiffBasisMaxBytes {
			empty, content := "", lfNormalize(a.content)
			before, after = &empty, &content
		}
		x.done(c, ToolWrite, CodeOK)
		return Result{Output: render.DryRunOutput(t.Display, unifiedOf(t.Display, before, after)), Metadata: meta}, nil
	}
	x.storeFailed("observe", x.gateOf(c).ObservePresent(c.Session, t.Key, out.Version, out.Hash))
	x.mutated(Mutation{Tool: ToolWrite, Session: c.Session, Target: t, Version: out.Version, Diffs: meta.Diffs})
	x.done(c, ToolWrite, CodeOK)
	return Result{Output: render.WriteOutput(t.Display, out.Operation == fs.OpCreate), Metadata: meta}, nil
}

// Edit replaces literal text in a file the session has read (when the
// policy is on). It makes no Stat: the provider checks under its lock.
func (x *Executor) Edit(ctx context.Context, c Call, raw []byte) (Result, *Error) {
	c = c.started()
	a, err := editArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	if err := x.checkEscalation(a.esc); err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	t, cwd, err := x.mutationTarget(ctx, c, "edit", a.path)
	if err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	guard, gerr := x.gateOf(c).EditGuard(c.Session, t)
	if gerr != nil {
		x.storeFailed("decide", gerr)
		return Result{}, x.fail(c, ToolEdit, x.mutationFailure(ToolEdit, gerr))
	}
	if escalated, err := x.fence(ctx, c, ToolEdit, t, cwd, a.esc); err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	} else if escalated {
		// Fresh, as for a write.
		if guard, gerr = x.gateOf(c).EditGuard(c.Session, t); gerr != nil {
			x.storeFailed("decide", gerr)
			return Result{}, x.fail(c, ToolEdit, x.mutationFailure(ToolEdit, gerr))
		}
	}
	req := fs.EditRequest{
		OldString: a.oldString, NewString: a.newString, ReplaceAll: a.replaceAll,
		Batch: a.batch, DryRun: a.dryRun, Hints: x.profile != render.ProfileOriginal,
	}
	var expected *fs.Version
	if guard != nil {
		expected, req.SeenHash = &guard.Version, guard.Hash
	}
	if !a.dryRun {
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
	x.storeFailed("observe", x.gateOf(c).ObservePresent(c.Session, t.Key, out.Version, out.Hash))
	x.mutated(Mutation{Tool: ToolEdit, Session: c.Session, Target: t, Version: out.Version, Diffs: meta.Diffs})
	x.done(c, ToolEdit, CodeOK)
	output := render.EditOutput(t.Display, a.replaceAll)
	if a.batch != nil {
		output = render.BatchEditOutput(t.Display, len(a.batch), a.batch[0].ReplaceAll)
	}
	return Result{Output: output, Metadata: meta}, nil
}

// editFailure is mutationFailure with the hints of a miss (extended
// profile): the first line stays the message and its remedy; the hint's
// text follows on the next lines, and a similar region also goes into Hint.
func (x *Executor) editFailure(err error) *Error {
	e := x.mutationFailure(ToolEdit, err)
	var fe *fs.Error
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
		e.Hint = &Hint{StartLine: h.StartLine, EndLine: h.StartLine + len(shown) - 1, Lines: shown}
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
func (x *Executor) mutationTarget(ctx context.Context, c Call, op, path string) (fs.Target, fs.TargetKey, *Error) {
	if x.policyOn && c.Session == "" {
		return fs.Target{}, "", sessionError(msgNoSession)
	}
	return x.targetIn(ctx, c, op, path)
}

// mutationFailure adds the remedy the model needs after a refused write or
// edit and counts stale versions.
func (x *Executor) mutationFailure(tool string, err error) *Error {
	e := errorOf(err)
	if e.Code == CodeStaleVersion {
		x.obs.StaleVersion(tool)
	}
	e.Message += render.Remedy(string(e.Code))
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
