package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/fault"
)

// ApproveBy chooses who is asked about an escalation (--approve-by,
// docs/sandbox.md): a person at /approvals, the user of the call's own
// client (MCP elicitation), or both, the first decision winning.
type ApproveBy string

// The three choices of --approve-by.
const (
	ApproveByBoth        ApproveBy = "both"
	ApproveByElicitation ApproveBy = "elicitation"
	ApproveByApprovals   ApproveBy = "approvals"
)

// ParseApproveBy accepts the three choices.
func ParseApproveBy(s string) (ApproveBy, bool) {
	switch b := ApproveBy(s); b {
	case ApproveByBoth, ApproveByElicitation, ApproveByApprovals:
		return b, true
	}
	return "", false
}

// The channels a decision comes by: the via label of
// toolfs_approvals_total.
const (
	ViaApprovals   = approval.ViaApprovals
	ViaElicitation = approval.ViaElicitation
)

// Asker asks the user of the call's own client about an escalation (MCP
// elicitation, docs/sandbox.md). A transport sets Call.Asker only when its
// client declared it can be asked; REST never does.
type Asker interface {
	// Ask shows q to the client's user and gives the decision. An
	// *InputRequired error says the question goes out with the call's
	// answer and the decision comes with its retry; ErrAskCancelled that
	// the user dismissed it; a *fault.Error that a retry's answer is
	// refused (forged, altered, expired, replayed, another call's); any
	// other error that the user could not be asked.
	Ask(ctx context.Context, q Question) (Decision, error)
	// Later reports whether the decision comes with a retry of the call
	// (the sessionless revision): nothing waits, so the escalation is asked
	// there alone.
	Later() bool
}

// Question is what the client's user is asked: the approval as a person
// would see it at /approvals (without an id), and Shown, a digest of what
// it shows (the whole diff and each file's version as the dry run found
// it), so that an answer to one change never approves another.
type Question struct {
	Approval Approval
	Shown    string
}

// InputRequired is Ask's answer when the question goes out with the call's
// answer: the call ends having run nothing, with a *fault.Error of
// fault.CodeInputRequired whose Err is this, and the transport answers the
// question it holds.
type InputRequired struct{}

func (*InputRequired) Error() string { return "the escalation is asked of the client's user" }

// ErrAskCancelled is Ask's answer when the user dismissed the question
// without deciding.
var ErrAskCancelled = errors.New("the user dismissed the question")

// shownDigest is Question.Shown for a dry run's outcome.
func shownDigest(out stepOut) string {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(out.shown))))
	h.Write([]byte{0})
	h.Write([]byte(out.shown))
	for _, o := range out.files {
		h.Write([]byte{0})
		h.Write([]byte(o.target.Display))
		h.Write([]byte{0})
		h.Write([]byte(o.version))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// askClient asks the question of the call's own client alone (ApproveBy
// elicitation, or the sessionless revision): nothing is listed at
// /approvals. It returns nil when the user approved.
func (x *Executor) askClient(ctx context.Context, c Call, a Asker, q Question, mode Fence) *fault.Error {
	d, err := a.Ask(ctx, q)
	var ir *InputRequired
	var fe *fault.Error
	switch {
	case errors.As(err, &ir):
		return &fault.Error{Code: fault.CodeInputRequired, Message: ir.Error(), Err: ir}
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, ErrAskCancelled) || err != nil:
		x.obs.Approval(string(approval.Cancelled), ViaElicitation)
		return escalationCancelled(mode)
	}
	if d != Approve {
		d = Reject
	}
	au, ferr := x.reserveAnswer(ctx, c, q, "", d)
	if ferr != nil {
		return ferr
	}
	defer au.cancel()
	if ferr := au.commit(x.relOf(ctx, q.Approval.Path), nil, nil); ferr != nil {
		return ferr
	}
	if d == Approve {
		x.obs.Approval(string(approval.Approved), ViaElicitation)
		return nil
	}
	x.obs.Approval(string(approval.Rejected), ViaElicitation)
	return escalationRejected(mode)
}

// reserveAnswer reserves the audit record of the decision d of the call's
// own client on q (docs/audit.md, with via "elicitation"; id: the pending
// approval it decides, if any): a decision whose record cannot be written
// is not taken, and its call runs nothing. nil without --audit-log.
func (x *Executor) reserveAnswer(ctx context.Context, c Call, q Question, id string, d Decision) (*auditing, *fault.Error) {
	au, ferr := x.reserveAudit(ctx, c, q.Approval.Tool, 1)
	if au != nil {
		au.base.Approval, au.base.Decision, au.base.Via = id, string(d), ViaElicitation
	}
	return au, ferr
}

// relOf is a Display path relative to the root, as records name files
// ("" when it no longer resolves).
func (x *Executor) relOf(ctx context.Context, display string) string {
	if display == "" {
		return ""
	}
	t, err := x.fs.Resolve(ctx, "read", display, "")
	if err != nil {
		return ""
	}
	rel, _ := x.fs.Rel(t)
	return rel
}

// askBoth asks the call's own client while p waits at /approvals: the
// client's answer decides p (the first decision wins, docs/sandbox.md),
// and p's end withdraws the question (ctx is cancelled by the caller).
// The channel closes when the asking ends: a decision of the client's
// has its audit record committed by then, so the caller, once p is
// decided by it, waits for the channel before the call runs
// (docs/audit.md).
func (x *Executor) askBoth(ctx context.Context, c Call, a Asker, p *approval.Pending, shown string) <-chan struct{} {
	q := Question{Approval: p.Approval(), Shown: shown}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		d, err := a.Ask(ctx, q)
		switch {
		case ctx.Err() != nil: // decided at /approvals, timed out, or the call went away
		case errors.Is(err, ErrAskCancelled):
			// Dismissed: the approval still waits at /approvals.
		case err != nil:
			x.log.Warn("cannot ask the client's user; the approval waits at /approvals", "approval", q.Approval.ID, "err", err)
		default:
			if d != Approve {
				d = Reject
			}
			au, ferr := x.reserveAnswer(context.WithoutCancel(ctx), c, q, q.Approval.ID, d)
			if ferr != nil {
				return // the approval still waits at /approvals
			}
			defer au.cancel()
			if p.DecideBy(d, ViaElicitation) == nil {
				if ferr := au.commit(x.relOf(context.WithoutCancel(ctx), q.Approval.Path), nil, nil); ferr != nil {
					x.log.Error("audit record lost: the decision was taken", "approval", q.Approval.ID, "decision", string(d), "err", ferr.Err)
				}
			}
		}
	}()
	return ended
}
