package tools

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The checkpoint tools of the extended profile (docs/checkpoints.md).
const (
	ToolChanges = "changes"
	ToolRevert  = checkpoint.ToolRevert
)

// RevertOutcomes label toolfs_reverts_total: a revert that restored files
// (or found nothing to undo), a dry run, a refusal because a file changed
// since (FS_STALE_VERSION), one because a change is not revertible, any
// other failure.
var RevertOutcomes = []string{"reverted", "dry_run", "stale", "not_revertible", "error"}

// msgCheckpointsOff answers changes and revert with --checkpoints=false.
const msgCheckpointsOff = "checkpoints are off on this server (--checkpoints=false): no changes are recorded, so none can be listed or reverted"

// ChangesResult is the answer of GET /sessions/{id}/changes and of the
// changes tool: the history's model text and its changes, newest first.
type ChangesResult struct {
	Output  string              `json:"output"`
	Changes []checkpoint.Change `json:"changes"`
}

// changesMetadata is the changes tool's metadata (MCP's structured content).
type changesMetadata struct {
	Changes []checkpoint.Change `json:"changes"`
}

// Changes lists session's change history, newest first (docs/checkpoints.md).
func (x *Executor) Changes(ctx context.Context, c Call, session string) (ChangesResult, *fault.Error) {
	c = c.started()
	if err := x.checkpointsCall(session); err != nil {
		return ChangesResult{}, x.fail(c, ToolChanges, err)
	}
	cs, err := x.ckpt.Changes(ctx, SessionKey(c.owner(), session))
	if err != nil {
		return ChangesResult{}, x.fail(c, ToolChanges, checkpointError(err))
	}
	x.done(c, ToolChanges, CodeOK)
	return ChangesResult{Output: ChangesOutput(cs), Changes: cs}, nil
}

// HistoryCatalog is the checkpoint tools MCP offers besides the catalog
// (render.HistoryTools): in the extended profile with checkpoints on, else
// none, so the original profile's tools/list stays the original's.
func (x *Executor) HistoryCatalog() []render.Tool {
	if x.ckpt == nil || x.profile == render.ProfileOriginal {
		return nil
	}
	return render.HistoryCatalog(x.fence.Fenced())
}

// ChangesOutput is the model text of a history: one line per change,
// newest first, "<seq> <tool> <path> +<added> -<removed>", with
// " (not revertible: <reason>)" when it is not; "No changes recorded in
// this session." for none.
func ChangesOutput(cs []checkpoint.Change) string {
	if len(cs) == 0 {
		return "No changes recorded in this session."
	}
	var b strings.Builder
	b.WriteString("Changes of this session, newest first (revert with to = the seq to go back to; 0 undoes them all):")
	for _, ch := range cs {
		b.WriteString("\n" + strconv.FormatInt(ch.Seq, 10) + " " + ch.Tool + " " + ch.Path)
		if ch.Added != nil && ch.Removed != nil {
			b.WriteString(" +" + strconv.Itoa(*ch.Added) + " -" + strconv.Itoa(*ch.Removed))
		}
		switch {
		case ch.Before == nil:
			b.WriteString(" (created)")
		case ch.After == nil:
			b.WriteString(" (removed)")
		}
		if !ch.Revertible {
			b.WriteString(" (not revertible: " + ch.Reason + ")")
		}
	}
	return b.String()
}

// RevertMetadata is a revert's metadata (docs/checkpoints.md).
type RevertMetadata = checkpoint.RevertMetadata

// Revert undoes session's changes after the seq of raw's "to" (0: all),
// with "dry_run" only checking and showing the diffs. Under a sandbox
// fence each file it would restore is fenced as a write of it is, and
// "sandbox_permissions" with "justification" asks a person about the
// revert's whole change (docs/sandbox.md). Each restored file is
// published to the change feed as a mutation of tool revert; the
// session's observations do not move, so its next edit of a restored file
// must read it again.
func (x *Executor) Revert(ctx context.Context, c Call, session string, raw []byte) (Result, *fault.Error) {
	c = c.started()
	a, aerr := revertArgsOf(raw)
	if aerr == nil {
		aerr = x.checkEscalation(a.esc)
	}
	if aerr != nil {
		return Result{}, x.fail(c, ToolRevert, aerr)
	}
	if err := x.checkpointsCall(session); err != nil {
		return Result{}, x.fail(c, ToolRevert, err)
	}
	key := SessionKey(c.owner(), session)
	// The revert's call is its session's, the {id} of its URL.
	rc := c
	rc.Session = session
	opts, ferr := x.revertFence(ctx, rc, x.fenceOf(a.esc))
	if ferr == nil && a.esc.present {
		opts, ferr = x.approveRevert(ctx, rc, key, a)
	}
	if ferr != nil {
		x.obs.Revert(revertOutcome(ferr))
		return Result{}, x.fail(c, ToolRevert, ferr)
	}
	opts.DryRun = a.dryRun
	var au *auditing
	if !a.dryRun {
		n := x.expectReverted(ctx, key, a.to)
		var aerr *fault.Error
		if au, aerr = x.reserveAudit(ctx, rc, ToolRevert, n); aerr != nil {
			x.obs.Revert("error")
			return Result{}, x.fail(c, ToolRevert, aerr)
		}
		defer au.cancel()
	}
	res, err := x.ckpt.RevertWith(ctx, key, a.to, opts)
	if err != nil {
		e := checkpointError(err)
		x.obs.Revert(revertOutcome(e))
		return Result{}, x.fail(c, ToolRevert, e)
	}
	if a.dryRun {
		x.obs.Revert("dry_run")
	} else {
		x.obs.Revert("reverted")
		var lost *fault.Error
		for _, f := range res.Files {
			if err := au.commit(f.Path, stateOfCheckpoint(f.Before), stateOfCheckpoint(f.After)); err != nil && lost == nil {
				lost = x.auditLost(c, ToolRevert, f.Path, err)
			}
			x.mutated(Mutation{Tool: ToolRevert, Session: session, Subject: c.owner(), Target: f.Target, Version: f.Version, Diffs: f.Diffs})
		}
		if lost != nil {
			return Result{}, x.fail(c, ToolRevert, lost)
		}
	}
	x.done(c, ToolRevert, CodeOK)
	return Result{Output: res.Output, Metadata: res.Metadata}, nil
}

// revertOutcome is the toolfs_reverts_total outcome of a refused revert.
func revertOutcome(e *fault.Error) string {
	switch e.Code {
	case fault.CodeStaleVersion:
		return "stale"
	case fault.CodeNotRevertible:
		return "not_revertible"
	}
	return "error"
}

// revertFence is the fence of a revert's files under mode: none without
// one or under danger-full-access (the root stays the boundary), every
// file denied under read-only, under workspace-write only files under the
// call's cwd (X-Session-Cwd), as for a write of each (docs/sandbox.md).
func (x *Executor) revertFence(ctx context.Context, c Call, mode Fence) (checkpoint.RevertOptions, *fault.Error) {
	if !mode.Fenced() || mode == FenceDangerFullAccess {
		return checkpoint.RevertOptions{}, nil
	}
	var cwd fs.Target
	if mode == FenceWorkspaceWrite {
		var err *fault.Error
		if cwd, err = x.cwdOf(ctx, c); err != nil {
			return checkpoint.RevertOptions{}, err
		}
	}
	return checkpoint.RevertOptions{Fence: func(t fs.Target) error {
		if !x.allows(mode, t, cwd) {
			return fenceDenied(mode)
		}
		return nil
	}}, nil
}

// approveRevert asks a person about the revert's whole change, as its dry
// run shows it (tool revert, path its first file, paths all of them; no
// channel: nobody is asked), and once approved checks the call again from
// the start under the granted mode: the fence with the cwd resolved anew,
// and every check of the revert, pinned to the change shown, so what runs
// is exactly what was approved or it fails with FS_STALE_VERSION
// (docs/sandbox.md). A revert with nothing to undo asks nobody.
func (x *Executor) approveRevert(ctx context.Context, c Call, key string, a revertArgs) (checkpoint.RevertOptions, *fault.Error) {
	if !x.asks {
		return checkpoint.RevertOptions{}, escalationNoChannel(a.esc.mode)
	}
	dry, err := x.ckpt.RevertWith(ctx, key, a.to, checkpoint.RevertOptions{DryRun: true})
	if err != nil {
		return checkpoint.RevertOptions{}, checkpointError(err)
	}
	if len(dry.Files) > 0 {
		paths := make([]string, len(dry.Files))
		for i, f := range dry.Files {
			paths[i] = f.Target.Display
		}
		// The dry run's text after its first line: each file's diff.
		_, diff, _ := strings.Cut(dry.Output, "\n")
		r := approval.Request{Session: c.Session, Subject: c.Subject, Tool: ToolRevert, Path: paths[0], Paths: paths, Diff: diff}
		if err := x.askFor(ctx, r, a.esc); err != nil {
			return checkpoint.RevertOptions{}, err
		}
	}
	opts, ferr := x.revertFence(ctx, c, a.esc.mode)
	opts.Pin = dry.Plan
	return opts, ferr
}

// expectReverted announces the files a revert of session after to may
// publish, so the change feed takes their inotify echoes for the revert's
// own (BeforeMutation). A file it misses is reported as an external
// change at worst. It returns how many files it announced: the audit
// records the revert reserves.
func (x *Executor) expectReverted(ctx context.Context, session string, to int64) int {
	cs, err := x.ckpt.Changes(ctx, session)
	if err != nil {
		return 0
	}
	seen := map[string]bool{}
	for _, ch := range cs {
		if ch.Seq <= to || seen[ch.Path] {
			continue
		}
		seen[ch.Path] = true
		if t, err := x.fs.Resolve(ctx, "write", ch.Path, ""); err == nil {
			x.mutating(t)
		}
	}
	return len(seen)
}

// checkpointsCall checks what changes and revert need: checkpoints on and
// a valid session id.
func (x *Executor) checkpointsCall(session string) *fault.Error {
	if x.ckpt == nil {
		return fault.New(fault.CodeInvalidArgument, msgCheckpointsOff)
	}
	if !ValidSessionID(session) {
		return sessionError("the changes and the revert of a session need its id: 1-128 characters of A-Za-z0-9._:-")
	}
	return nil
}

// checkpointError is the *fault.Error of what the checkpoint store
// returned, with the paths a refused revert names.
func checkpointError(err error) *fault.Error {
	e := errorOf(err)
	var r *checkpoint.Refusal
	if errors.As(err, &r) {
		e.Paths = r.Paths
	}
	return e
}

type revertArgs struct {
	to     int64
	dryRun bool
	esc    escalation
}

// revertEscalation is revert's escalation (render.HistoryTools), read by
// a type pass of its own: to and dry_run keep their own messages.
var revertEscalation = deferredOf(render.ParamsOf(ToolRevert))

func deferredOf(params []render.Param) []render.Param {
	var out []render.Param
	for _, p := range params {
		if p.Deferred {
			out = append(out, p)
		}
	}
	return out
}

const (
	msgTo     = render.MsgTo
	msgToNeed = "to is required: the seq to go back to (0 undoes every change)"
)

func revertArgsOf(raw []byte) (revertArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return revertArgs{}, err
	}
	raw0 := a.get("to")
	to, perr := strconv.ParseInt(string(raw0), 10, 64)
	hasTo, toOK := raw0 != nil, perr == nil && to >= 0
	rawDry := a.get("dry_run")
	dryRun, dryOK := booleanOf(rawDry)
	hasDry := rawDry != nil
	switch {
	case !hasTo:
		return revertArgs{}, argError(msgToNeed)
	case !toOK:
		return revertArgs{}, argError(msgTo)
	case hasDry && !dryOK:
		return revertArgs{}, argError(render.MsgDryRun)
	}
	vs := values{params: revertEscalation}
	if err := vs.typePass(a); err != nil { // deferred only: collects them
		return revertArgs{}, err
	}
	return revertArgs{to: to, dryRun: dryRun, esc: escalationOf(&vs)}, nil
}
