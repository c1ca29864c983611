package tools

import (
	"context"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

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
	t, err := x.mutationTarget(ctx, c, "write", a.path)
	if err != nil {
		return Result{}, x.fail(c, ToolWrite, err)
	}
	intent, ierr := x.gate.WriteIntent(c.Session, t)
	if ierr != nil {
		x.storeFailed("decide", ierr)
		return Result{}, x.fail(c, ToolWrite, x.mutationFailure(ToolWrite, ierr))
	}
	out, werr := x.fs.WriteText(ctx, t, []byte(a.content), intent)
	if werr != nil {
		return Result{}, x.fail(c, ToolWrite, x.mutationFailure(ToolWrite, werr))
	}
	x.storeFailed("observe", x.gate.ObservePresent(c.Session, t.Key, out.Version))
	x.done(c, ToolWrite, CodeOK)
	return Result{
		Output:   render.WriteOutput(t.Display, out.Operation == fs.OpCreate),
		Metadata: WriteMetadata{Operation: out.Operation, Diffs: diffsOf(a.path, out.Before, &out.After)},
	}, nil
}

// Edit replaces literal text in a file the session has read (when the
// policy is on). It makes no Stat: the provider checks under its lock.
func (x *Executor) Edit(ctx context.Context, c Call, raw []byte) (Result, *Error) {
	c = c.started()
	a, err := editArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	t, err := x.mutationTarget(ctx, c, "edit", a.path)
	if err != nil {
		return Result{}, x.fail(c, ToolEdit, err)
	}
	guard, gerr := x.gate.EditGuard(c.Session, t)
	if gerr != nil {
		x.storeFailed("decide", gerr)
		return Result{}, x.fail(c, ToolEdit, x.mutationFailure(ToolEdit, gerr))
	}
	out, eerr := x.fs.EditText(ctx, t, fs.EditRequest{OldString: a.oldString, NewString: a.newString, ReplaceAll: a.replaceAll}, guard)
	if eerr != nil {
		return Result{}, x.fail(c, ToolEdit, x.mutationFailure(ToolEdit, eerr))
	}
	x.storeFailed("observe", x.gate.ObservePresent(c.Session, t.Key, out.Version))
	x.done(c, ToolEdit, CodeOK)
	return Result{
		Output:   render.EditOutput(t.Display, a.replaceAll),
		Metadata: EditMetadata{Diffs: diffsOf(a.path, out.Before, out.After)},
	}, nil
}

// mutationTarget resolves the target of a write or edit, whose session is
// required while the policy is on (arguments are checked first).
func (x *Executor) mutationTarget(ctx context.Context, c Call, op, path string) (fs.Target, *Error) {
	if x.policyOn && c.Session == "" {
		return fs.Target{}, sessionError(msgNoSession)
	}
	return x.target(ctx, c, op, path)
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
