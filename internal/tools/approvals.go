package tools

import (
	"context"
	"time"

	"github.com/toolfs/toolfs-api/internal/approval"
)

// The pending approvals of sandbox escalations, as a person's client sees
// them (docs/sandbox.md). The executor opens them; a transport lists and
// decides them through the executor's verbs below, so it imports nothing
// but internal/tools (docs/architecture.md).
type (
	// Approval is one pending escalation (internal/approval).
	Approval = approval.Approval
	// Decision is a person's answer: Approve or Reject.
	Decision = approval.Decision
)

// The two decisions.
const (
	Approve = approval.Approve
	Reject  = approval.Reject
)

// ErrApprovalNotPending is DecideApproval's answer for an approval that
// ended without a decision (it timed out, or its call went away).
var ErrApprovalNotPending = approval.ErrNotPending

// ErrApprovalsUnavailable is the answer of ListApprovals, NextApprovals and
// DecideApproval while the Redis that holds every replica's approvals
// cannot be reached (docs/deployment.md).
var ErrApprovalsUnavailable = approval.ErrUnavailable

// ListApprovals returns the pending approvals c sees (its subject's, or
// every one for an admin: docs/identity.md), oldest first (with Redis,
// every replica's), and the cursor of the newest one opened so far (for
// NextApprovals).
func (x *Executor) ListApprovals(c Call) ([]Approval, uint64, error) {
	list, cursor, err := x.approvals.List()
	return visible(c, list), cursor, err
}

// NextApprovals waits up to wait (bounded by ctx) until an approval that c
// sees was opened after cursor, then lists them as ListApprovals does;
// when the wait ends with nothing new, it lists what is pending then.
// Another subject's approvals move the cursor without ending the wait.
func (x *Executor) NextApprovals(ctx context.Context, c Call, cursor uint64, wait time.Duration) ([]Approval, uint64, error) {
	deadline := time.Now().Add(wait)
	first := cursor == 0 // any pending approval answers at once
	for {
		list, next, err := x.approvals.Next(ctx, cursor, time.Until(deadline))
		if err != nil {
			return nil, next, err
		}
		mine := visible(c, list)
		newestMine := len(list) > 0 && c.Sees(list[len(list)-1].Subject)
		if next == cursor || newestMine || first && len(mine) > 0 || time.Until(deadline) <= 0 || ctx.Err() != nil {
			return mine, next, nil
		}
		cursor = next
	}
}

// visible keeps the approvals c sees.
func visible(c Call, list []Approval) []Approval {
	if c.Admin {
		return list
	}
	out := list[:0:0]
	for _, a := range list {
		if c.Sees(a.Subject) {
			out = append(out, a)
		}
	}
	return out
}

// Decide records a person's decision, given through a transport's call c,
// on the pending approval id: ErrApprovalNotPending when it ended without
// one, ErrApprovalsUnavailable without Redis, another error when there is
// no such pending approval (unknown, decided already, or another
// subject's: a subject decides only its own sessions' approvals unless it
// is an admin, docs/identity.md). With --audit-log the decision is
// recorded (docs/audit.md): the record is reserved first (its failure is
// a *fault.Error of fault.CodeAuditUnavailable and nothing is decided) and
// committed once the decision is taken, before the caller answers. The
// record names the decided call's session, tool and path.
func (x *Executor) Decide(ctx context.Context, c Call, id string, d Decision) error {
	au, ferr := x.reserveAudit(ctx, c, "", 1)
	if ferr != nil {
		return ferr
	}
	defer au.cancel()
	var a Approval
	// The list names the decided call (for the record) and its subject:
	// without a subject to check (no identities, or an admin) and no record
	// to write, it is not asked for.
	if au != nil || c.Subject != "" && !c.Admin {
		list, _, err := x.approvals.List()
		if err != nil {
			return err
		}
		found := false
		for _, p := range list {
			if p.ID == id {
				a, found = p, true
			}
		}
		if found && !c.Sees(a.Subject) {
			return approval.ErrUnknown
		}
	}
	if err := x.approvals.Decide(id, d); err != nil {
		return err
	}
	if au == nil {
		return nil
	}
	au.base.Session, au.base.Tool, au.base.Approval, au.base.Decision = a.Session, a.Tool, id, string(d)
	rel := ""
	if t, err := x.fs.Resolve(ctx, "read", a.Path, ""); a.Path != "" && err == nil {
		rel, _ = x.fs.Rel(t)
	}
	if err := au.commit(rel, nil, nil); err != nil {
		x.log.Error("audit record lost: the decision was taken", "approval", id, "decision", string(d), "err", err.Err)
		return err
	}
	return nil
}

// ErrAnswered is RedeemAnswer's answer for an answer taken before.
var ErrAnswered = approval.ErrAnswered

// RedeemAnswer takes the answer id of the call's own client once
// (docs/sandbox.md, "Approving in the client"): ErrAnswered for a replay,
// another error when the store cannot say. With Redis every replica
// shares what was taken.
func (x *Executor) RedeemAnswer(id string, expires time.Time) error {
	return x.approvals.Redeem(id, expires)
}
