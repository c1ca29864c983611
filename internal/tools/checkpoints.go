package tools

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/fault"
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
	c.Session = session // the call is its session's, as Revert's
	cs, err := x.ckpt.Changes(ctx, c.key())
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
// newest first, "<seq> <tool> <path> +<added> -<removed>" (a folder's
// change: " (folder made: <to>)" or " (folder moved to <to>)"), with
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
		case ch.Folder == checkpoint.FolderMade:
			b.WriteString(" (folder made: " + ch.To + ")")
		case ch.Folder == checkpoint.FolderMoved:
			b.WriteString(" (folder moved to " + ch.To + ")")
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
// with "dry_run" only checking and showing the diffs: a journaled change
// of every file those changes touched, whose step is the checkpoint
// store's revert (it finds the files under their locks, asks the
// pipeline's fence of each, and journals the change in the history
// itself). Its call is its session's, the {id} of its URL. Each restored
// file is published to the change feed as a mutation of tool revert; the
// session's observations do not move, so its next edit of a restored file
// must read it again.
func (x *Executor) Revert(ctx context.Context, c Call, session string, raw []byte) (Result, *fault.Error) {
	c = c.started()
	a, aerr := revertArgsOf(raw)
	if aerr != nil {
		return Result{}, x.fail(c, ToolRevert, aerr)
	}
	if err := x.checkpointsCall(session); err != nil {
		return Result{}, x.fail(c, ToolRevert, err)
	}
	c.Session = session
	var res *checkpoint.Result
	_, err := x.apply(ctx, &change{tool: ToolRevert, call: c, paths: x.revertedPaths(ctx, c.key(), a.to), from: fromHistory, verb: "write",
		esc: a.esc, dryRun: a.dryRun,
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			pin, _ := in.pin.(checkpoint.Plan)
			r, err := x.ckpt.RevertWith(ctx, c.key(), a.to, checkpoint.RevertOptions{DryRun: in.dryRun, Fence: in.fence, Pin: pin})
			if err != nil {
				return stepOut{}, err
			}
			res = r
			out := stepOut{files: make([]outcome, len(r.Files)), pin: r.Plan}
			for i, f := range r.Files {
				out.files[i] = outcome{target: f.Target, version: f.Version, hash: f.Hash, created: f.Before == nil, removed: f.After == nil, diffs: f.Diffs,
					states: &auditStates{rel: f.Path, before: stateOfCheckpoint(f.Before), after: stateOfCheckpoint(f.After)}}
			}
			if in.dryRun {
				_, out.shown, _ = strings.Cut(r.Output, "\n") // each file's diff
			}
			return out, nil
		}})
	switch {
	case err != nil:
		x.obs.Revert(revertOutcome(err))
		return Result{}, err
	case a.dryRun:
		x.obs.Revert("dry_run")
	default:
		x.obs.Revert("reverted")
	}
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

// revertedPaths lists the files a revert of session after to may change
// (root-relative, as the history records them): the targets the pipeline
// announces to the change feed (BeforeMutation, so it takes their inotify
// echoes for the revert's own) and reserves audit records for. A file it
// misses (a change recorded meanwhile) is reported as an external change
// at worst, and its record is appended past the reserved ones.
func (x *Executor) revertedPaths(ctx context.Context, session string, to int64) []string {
	cs, err := x.ckpt.Changes(ctx, session)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var paths []string
	for _, ch := range cs {
		if ch.Seq <= to || seen[ch.Path] {
			continue
		}
		seen[ch.Path] = true
		paths = append(paths, ch.Path)
	}
	return paths
}

// checkpointsCall checks what changes and revert need: checkpoints on and
// a valid session id.
func (x *Executor) checkpointsCall(session string) *fault.Error {
	if x.ckpt == nil {
		return fault.New(fault.CodeInvalidArgument, msgCheckpointsOff)
	}
	if !render.ValidSessionID(session) {
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
