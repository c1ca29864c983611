package handlers

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// maxApprovalWait bounds GET /approvals?wait=.
const maxApprovalWait = 60 * time.Second

const msgWait = "wait must be a duration between 0s and 60s, such as 30s"

// The refusals of after (the contract's minimum: 0; an integer).
const (
	msgAfterPrefix   = `invalid request: parameter "after" in query has an error: `
	msgAfterNegative = msgAfterPrefix + "number must be at least 0"
)

// msgApprovalsUnavailable answers GET /approvals while the Redis that holds
// the approvals of every replica cannot be reached (docs/deployment.md).
const msgApprovalsUnavailable = "cannot list approvals: the session store is unavailable; retry shortly"

// approvalList is the body of GET /approvals (ApprovalList in
// api/openapi.yaml).
type approvalList struct {
	Approvals []tools.Approval `json:"approvals"`
	Cursor    uint64           `json:"cursor"`
}

// ListApprovals serves GET /approvals, and with ?wait= long-polls for the
// next approval (docs/sandbox.md).
func (s *rest) ListApprovals(w http.ResponseWriter, r *http.Request, p api.ListApprovalsParams) {
	if p.After != nil && *p.After < 0 {
		writeProblem(w, fault.CodeInvalidArgument, msgAfterNegative)
		return
	}
	var wait time.Duration
	if p.Wait != nil && *p.Wait != "" {
		d, err := time.ParseDuration(*p.Wait)
		if err != nil || d < 0 || d > maxApprovalWait {
			writeProblem(w, fault.CodeInvalidArgument, msgWait)
			return
		}
		wait = d
	}
	var after uint64
	if p.After != nil && *p.After > 0 {
		after = uint64(*p.After)
	}
	var l approvalList
	var err error
	if wait > 0 {
		l.Approvals, l.Cursor, err = s.x.NextApprovals(r.Context(), caller(r), after, wait)
	} else {
		l.Approvals, l.Cursor, err = s.x.ListApprovals(caller(r))
	}
	if err != nil { // the shared store (Redis) is down
		writeProblem(w, fault.CodeSessionStoreUnavailable, msgApprovalsUnavailable)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, "application/json", l)
}

// DecideApproval serves POST /approvals/{id}: 204 once the decision is
// recorded. With --approver-token, of the static tokens only that one
// decides; an access token decides with the approve scope, which authn
// checked (docs/identity.md).
func (s *rest) DecideApproval(w http.ResponseWriter, r *http.Request, id string) {
	if s.approverToken != "" && caller(r).Subject == "" {
		switch got := r.Header.Get("Authorization"); {
		case subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+s.approverToken)) == 1:
		case s.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+s.token)) == 1:
			writeProblem(w, fault.CodeNotApprover, "only the approver token (--approver-token) may decide approvals; the agent's token cannot")
			return
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolfs-api"`)
			writeProblem(w, fault.CodeUnauthorized, "deciding approvals needs the approver token (--approver-token)")
			return
		}
	}
	d, terr := decisionOf(r)
	if terr != nil {
		writeError(w, terr)
		return
	}
	var fe *fault.Error
	c := caller(r)
	c.Transport = "rest"
	switch err := s.x.Decide(r.Context(), c, id, d); {
	case errors.As(err, &fe): // the audit log's AUDIT_UNAVAILABLE
		writeError(w, fe)
	case errors.Is(err, tools.ErrApprovalsUnavailable):
		writeProblem(w, fault.CodeSessionStoreUnavailable, "cannot decide approval "+render.Quote(id)+": the session store is unavailable; retry shortly")
	case errors.Is(err, tools.ErrApprovalNotPending):
		writeProblem(w, fault.CodeApprovalNotPending, "approval "+render.Quote(id)+" is no longer pending: its call timed out or went away")
	case err != nil:
		writeProblem(w, fault.CodeApprovalNotFound, "no pending approval "+render.Quote(id)+": unknown, or decided already")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

const msgDecision = `request body must be {"decision": "approve"} or {"decision": "reject"}`

// decisionOf reads {"decision": "approve"|"reject"} (bodyCap bounds it).
func decisionOf(r *http.Request) (tools.Decision, *fault.Error) {
	raw, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return "", fault.New(fault.CodeBodyTooLarge, bodyTooLargeMessage(mbe.Limit))
	case err != nil:
		return "", tools.BodyIncomplete()
	}
	if terr := jsonContentType(r.Header.Values("Content-Type")); terr != nil {
		return "", terr
	}
	var body struct {
		Decision string `json:"decision"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() {
		return "", fault.New(fault.CodeInvalidArgument, msgDecision)
	}
	switch d := tools.Decision(body.Decision); d {
	case tools.Approve, tools.Reject:
		return d, nil
	}
	return "", fault.New(fault.CodeInvalidArgument, msgDecision)
}
