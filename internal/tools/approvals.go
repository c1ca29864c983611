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

// ListApprovals returns the pending approvals, oldest first, and the cursor
// of the newest one opened so far (for NextApprovals).
func (x *Executor) ListApprovals() ([]Approval, uint64) { return x.approvals.List() }

// NextApprovals waits up to wait (bounded by ctx) until an approval opened
// after cursor is pending, then lists them as ListApprovals does; when the
// wait ends with nothing new, it lists what is pending then.
func (x *Executor) NextApprovals(ctx context.Context, cursor uint64, wait time.Duration) ([]Approval, uint64) {
	return x.approvals.Next(ctx, cursor, wait)
}

// DecideApproval records a person's decision on the pending approval id:
// ErrApprovalNotPending when it ended without one, another error when there
// is no such pending approval (unknown, or decided already).
func (x *Executor) DecideApproval(id string, d Decision) error { return x.approvals.Decide(id, d) }
