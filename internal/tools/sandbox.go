package tools

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/jsonscan"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Fence is the mode of the fence on writes and edits: the API's sandbox
// mode (--sandbox-mode, sandbox_permissions; docs/sandbox.md). The
// workspace root stays the hard boundary in every mode (the provider's
// Resolve); the fence is a second one inside it, for writes and edits
// only. Not to be confused with internal/sandbox, rg's and the checkers'
// Landlock confinement.
type Fence string

// The fence's modes, narrowest first; their values are the API's.
const (
	// FenceOff: no fence, and no escalation fields (the default).
	FenceOff Fence = "off"
	// FenceReadOnly denies every write and edit.
	FenceReadOnly Fence = "read-only"
	// FenceWorkspaceWrite allows writes and edits under the session's cwd.
	FenceWorkspaceWrite Fence = render.ModeWorkspaceWrite
	// FenceDangerFullAccess allows writes and edits anywhere in the root.
	FenceDangerFullAccess Fence = render.ModeDangerFullAccess
)

// ParseFence accepts the four modes.
func ParseFence(s string) (Fence, bool) {
	switch m := Fence(s); m {
	case FenceOff, FenceReadOnly, FenceWorkspaceWrite, FenceDangerFullAccess:
		return m, true
	}
	return "", false
}

// Fenced reports whether m fences writes and edits (so the catalog
// advertises sandbox_permissions and justification).
func (m Fence) Fenced() bool { return m != "" && m != FenceOff }

// rank orders the fenced modes from narrowest to widest.
func (m Fence) rank() int {
	switch m {
	case FenceReadOnly:
		return 1
	case FenceWorkspaceWrite:
		return 2
	case FenceDangerFullAccess:
		return 3
	}
	return 0
}

// The original's texts of the fence and the escalation (docs/sandbox.md),
// byte for byte.
const (
	msgEscalationNeedsJustification = "invalid escalation: sandbox_permissions requires a justification"
	msgJustificationAlone           = "invalid escalation: justification is only valid together with sandbox_permissions"
	msgJustificationEmpty           = "invalid justification: expected a non-empty sentence"
	msgEscalationUnavailable        = "sandbox_permissions is not available in this composition (no sandboxing filesystem to escalate)"
)

// Our own argument texts where the original tool-fs has none (docs/sandbox.md).
const (
	msgJustificationLong = "invalid justification: expected one sentence of at most 1000 characters"
	// maxJustification bounds what a pending approval holds and shows.
	maxJustification = 1000
)

// fenceDenied is the original tool-fs's denial: the marker and the hint.
func fenceDenied(mode Fence) *fault.Error {
	return fault.New(fault.CodeSandboxDenied, "[sandbox: file access denied under "+string(mode)+" mode]\n"+
		"[sandbox: escalation available \u2014 retry this exact operation once with sandbox_permissions "+
		"(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]")
}

func notWider(requested, current Fence) *fault.Error {
	return argError("sandbox escalation to " + modeQ(requested) + " is not strictly wider than this call's current " + modeQ(current) + " mode")
}

func escalationRejected(mode Fence) *fault.Error {
	return fault.New(fault.CodeEscalationDenied, "the user rejected escalating this operation to "+modeQ(mode))
}

func escalationCancelled(mode Fence) *fault.Error {
	return fault.New(fault.CodeEscalationDenied, "approval for escalating to "+modeQ(mode)+" was cancelled")
}

func escalationNoChannel(mode Fence) *fault.Error {
	return fault.New(fault.CodeEscalationDenied, "sandbox escalation to "+modeQ(mode)+" requires approval, but no approval channel is available")
}

// escalation is a write's or edit's sandbox_permissions and justification
// after the type pass.
type escalation struct {
	present       bool // sandbox_permissions sent (not null)
	modeOK        bool // ... and one of the two wider modes
	mode          Fence
	hasReason     bool // justification sent (not null)
	reasonOK      bool // ... and a string
	justification string
}

// escalationOf reads the two escalation arguments, which the type pass
// defers: their checks depend on the server's mode (Executor.checkEscalation).
func escalationOf(vs *values) escalation {
	var e escalation
	perm, reason := vs.of("sandbox_permissions"), vs.of("justification")
	e.present, e.hasReason = perm.present(), reason.present()
	if mode, isString := jsonscan.Unquote(perm.raw); isString && (mode == render.ModeWorkspaceWrite || mode == render.ModeDangerFullAccess) {
		e.mode, e.modeOK = Fence(mode), true
	}
	e.justification, e.reasonOK = jsonscan.Unquote(reason.raw)
	return e
}

// checkEscalation applies the original tool-fs's checks of the two arguments, in
// its order (docs/sandbox.md). Without a fence sandbox_permissions is
// refused and justification alone is an unknown argument, ignored as any
// other.
func (x *Executor) checkEscalation(e escalation) *fault.Error {
	if !x.fence.Fenced() {
		if e.present {
			return argError(msgEscalationUnavailable)
		}
		return nil
	}
	switch {
	case e.present && !e.modeOK:
		return argError(render.MsgSandboxPermissions)
	case e.present && !e.hasReason:
		return argError(msgEscalationNeedsJustification)
	case !e.present && e.hasReason:
		return argError(msgJustificationAlone)
	case !e.present:
		return nil
	case !e.reasonOK || strings.TrimSpace(e.justification) == "":
		return argError(msgJustificationEmpty)
	case utf8.RuneCountInString(e.justification) > maxJustification:
		return argError(msgJustificationLong)
	case e.mode.rank() <= x.fence.rank():
		return notWider(e.mode, x.fence)
	}
	return nil
}

// allows reports whether mode lets a write or edit reach t: read-only
// nothing, workspace-write only under the session cwd (cwd; zero = the
// root, so anything Resolve accepted), danger-full-access anything in the
// root. Where t and cwd lie is the provider's answer (fs.Workspace.Within):
// it judges where their files really are, so a symlink under the cwd to a
// file elsewhere is judged by where it leads, and since a mutation happens
// at its Target or fails, one swapped in after this check leads nowhere.
func (x *Executor) allows(mode Fence, t, cwd fs.Target) bool {
	switch mode {
	case FenceOff, FenceDangerFullAccess:
		return true
	case FenceWorkspaceWrite:
		return cwd == (fs.Target{}) || x.fs.Within(t, cwd)
	}
	return false
}

// fenceOf is the mode a write or edit is first checked under: the
// server's, or with an escalation none, since a person decides; approved,
// the call is checked again under the granted mode (docs/sandbox.md).
func (x *Executor) fenceOf(e escalation) Fence {
	if e.present {
		return FenceOff
	}
	return x.fence
}

// askFor asks about the change r describes (its diff as its dry run shows
// it, shown its digest; a change of several files names them all) with
// the mode and the reason of e, and waits for the outcome: at /approvals,
// of the call's own client (c.Asker), or both, as --approve-by says
// (docs/sandbox.md). Nothing is granted without a person's decision. The
// caller checked x.asks.
func (x *Executor) askFor(ctx context.Context, c Call, r approval.Request, shown string, e escalation) *fault.Error {
	r.Mode = string(e.mode)
	r.Reason = "escalate sandbox to " + string(e.mode) + ": " + e.justification
	asker := c.Asker
	if x.approveBy == ApproveByApprovals {
		asker = nil
	}
	if asker != nil && (asker.Later() || x.approveBy == ApproveByElicitation || x.unreachable) {
		q := Question{Approval: r.Approval(x.approvals.Timeout()), Shown: shown}
		if asker.Later() {
			return x.askClient(ctx, c, asker, q, e.mode)
		}
		wctx, cancel := context.WithTimeout(ctx, x.approvals.Timeout())
		d, err := asker.Ask(wctx, q)
		cancel()
		var fe *fault.Error
		switch {
		case err == nil || errors.Is(err, ErrAskCancelled) || errors.As(err, &fe) || ctx.Err() != nil:
			return x.askClient(ctx, c, answered{d, err}, q, e.mode)
		case wctx.Err() != nil:
			x.obs.Approval(string(approval.TimedOut), ViaElicitation)
			return escalationCancelled(e.mode)
		}
		// The client could not be asked: a person at /approvals is.
		x.log.Warn("cannot ask the client's user", "err", err)
		asker = nil
	}
	if x.unreachable {
		return escalationNoChannel(e.mode)
	}
	p, err := x.approvals.Open(r)
	switch {
	case errors.Is(err, approval.ErrFull):
		return fault.New(fault.CodeTooManyApprovals, "cannot ask for approval: "+strconv.Itoa(x.approvals.Max())+
			" approvals are pending already; retry once a person has decided them")
	case err != nil: // closed: the server is shutting down
		return escalationCancelled(e.mode)
	}
	defer p.Cancel()
	var asking <-chan struct{}
	if asker != nil {
		actx, withdraw := context.WithCancel(ctx)
		defer withdraw()
		asking = x.askBoth(actx, c, asker, p, shown)
	}
	o := p.Wait(ctx)
	if asking != nil && (o == approval.Approved || o == approval.Rejected) && p.Approval().Via == ViaElicitation {
		<-asking // its record first (docs/audit.md)
	}
	switch o {
	case approval.Approved:
		return nil
	case approval.Rejected:
		return escalationRejected(e.mode)
	}
	return escalationCancelled(e.mode)
}

// answered is an Asker that was asked already: its answer, given again.
type answered struct {
	d   Decision
	err error
}

func (a answered) Ask(context.Context, Question) (Decision, error) { return a.d, a.err }
func (answered) Later() bool                                       { return false }

// modeQ quotes a mode as the original tool-fs's texts do.
func modeQ(m Fence) string { return `"` + string(m) + `"` }
