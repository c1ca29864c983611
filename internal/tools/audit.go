package tools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"sync/atomic"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/journal"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The audit log's hook (--audit-log, docs/audit.md): every mutation
// reserves its record before anything changes on disk and commits it
// before it is answered; a decision of an approval is recorded the same
// way.

// The answers of a call the audit log could not take.
const (
	// msgAuditRefused: the reservation failed, so nothing was changed.
	msgAuditRefused = "the audit log cannot be written (--audit-log), so nothing was changed; retry shortly"
	// msgAuditLost: the record of a change that happened could not be
	// written; the answer says so, so nobody takes it for a refusal
	// (docs/audit.md, "How a record is made").
	msgAuditLost = "the change was applied, but its audit record could not be written (--audit-log); it is logged as an error"
)

type requestIDKey struct{}

// WithRequestID is ctx carrying the transport's request id, which the
// audit records of the calls run with it name.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDOf is the request id ctx carries, "" for none.
func RequestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// RequestIDHeader is the header a request id comes in and goes out with.
const RequestIDHeader = "X-Request-Id"

// ValidRequestID reports whether a client's request id can be kept: 1-128
// characters of A-Za-z0-9._:- (as session ids), so it is safe in a log line.
func ValidRequestID(id string) bool { return render.ValidSessionID(id) }

// requestIDs makes the ids of requests that came without one: a random
// prefix per process and a counter, unique and cheap.
var requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func init() {
	var b [8]byte
	_, _ = rand.Read(b[:])
	requestIDs.prefix = hex.EncodeToString(b[:]) + "-"
}

// NewRequestID is a fresh request id: unique within this process, and
// across processes with overwhelming odds.
func NewRequestID() string {
	return requestIDs.prefix + strconv.FormatUint(requestIDs.n.Add(1), 10)
}

// auditing is one call's records: reserved before the mutation, committed
// once it succeeded, cancelled otherwise. A nil *auditing (no audit log)
// does nothing.
type auditing struct {
	log   *audit.Log
	res   []*audit.Reservation
	base  audit.Record
	keeps []*auditKeeper // one per target, in order
	spent int
	// entry, when the change is journaled: the lines are written without
	// a sync and put there (docs/journal.md).
	entry *journal.Entry
}

// journalTo makes the records' lines go to e (nil: synced each).
func (a *auditing) journalTo(e *journal.Entry) {
	if a != nil {
		a.entry = e
	}
}

// reserveAudit reserves n records of c's tool call (nil with no audit log).
// Its failure is AUDIT_UNAVAILABLE and the call must change nothing.
func (x *Executor) reserveAudit(ctx context.Context, c Call, tool string, n int) (*auditing, *fault.Error) {
	if x.audit == nil {
		return nil, nil
	}
	a := &auditing{log: x.audit, base: audit.Record{
		Subject: x.subjectOf(c), Session: c.Session, Transport: c.Transport, Tool: tool, RequestID: RequestIDOf(ctx),
		TraceID: TraceIDOf(ctx),
	}}
	if o := c.owner(); o != c.Subject {
		a.base.SessionSubject = o
	}
	if a.base.RequestID == "" {
		a.base.RequestID = NewRequestID()
	}
	for range n {
		r, err := x.audit.Reserve()
		if err != nil {
			a.cancel()
			x.log.Error("audit log unavailable: mutation refused", "tool", tool, "err", err)
			return nil, &fault.Error{Code: fault.CodeAuditUnavailable, Message: msgAuditRefused, Err: err}
		}
		a.res = append(a.res, r)
	}
	return a, nil
}

// subjectOf is who c speaks for in a record: its verified subject, else
// the static token when the server has one, else nobody.
func (x *Executor) subjectOf(c Call) string {
	switch {
	case c.Subject != "":
		return c.Subject
	case x.auditToken:
		return audit.SubjectToken
	}
	return audit.SubjectNone
}

// commit writes the record of one changed file (rel: root-relative) with
// its states before and after (nil: absent), using the next reservation
// (or a new record past them: a revert that found more files than it
// announced). Its error is the AUDIT_UNAVAILABLE of a change that
// happened (msgAuditLost).
func (a *auditing) commit(rel string, before, after *audit.State) *fault.Error {
	if a == nil {
		return nil
	}
	rec := a.base
	rec.Path, rec.Before, rec.After = rel, before, after
	var err error
	switch {
	case a.spent < len(a.res) && a.entry != nil:
		var w audit.Written
		if w, err = a.res[a.spent].Write(rec); err == nil {
			addAudit(a.entry, w)
		}
		a.spent++
	case a.spent < len(a.res):
		err = a.res[a.spent].Commit(rec)
		a.spent++
	default:
		err = a.log.Append(rec)
	}
	if err != nil {
		return &fault.Error{Code: fault.CodeAuditUnavailable, Message: msgAuditLost, Err: err}
	}
	return nil
}

// cancel gives back every reservation not committed; deferrable.
func (a *auditing) cancel() {
	if a == nil {
		return
	}
	for _, r := range a.res[a.spent:] {
		r.Cancel()
	}
}

// auditLost logs a record lost after its change, and returns its error.
func (x *Executor) auditLost(c Call, tool, rel string, err *fault.Error) *fault.Error {
	x.log.Error("audit record lost: the change happened", "tool", tool, "path", rel, "session", c.Session, "err", err.Err)
	return err
}

// keeper is the Keeper of a change's next target: the checkpoint's
// (inner, nil without one) wrapped so the audit record learns the states
// around the change from what the provider and the checkpoint already
// computed.
//
// A journaled change of one file writes its record when the new content
// is renamed in place (fs.RenameNoter), so its entry's commit (then, when
// not nil) runs beside the folder's sync instead of after it
// (docs/journal.md); rel is the target's path as the record names it.
func (a *auditing) keeper(inner fs.Keeper, rel string, then func()) fs.Keeper {
	if a == nil {
		return inner
	}
	k := &auditKeeper{inner: inner, a: a, target: rel, then: then}
	a.keeps = append(a.keeps, k)
	return k
}

// auditKeeper learns, under the target's lock, the replaced file's state
// (version and size from the provider, its SHA-256 from the checkpoint's
// Keep, or hashed here when there is no checkpoint: the Keep runs beside
// the staging of the new content) and the new content's SHA-256 (Prepare).
type auditKeeper struct {
	inner  fs.Keeper
	rel    string
	before *audit.State
	after  string
	// a, target and then: the record is written at Renamed (written,
	// with its error) for a journaled change of one file.
	a       *auditing
	target  string
	then    func()
	written bool
	err     *fault.Error
}

var _ fs.RenameNoter = (*auditKeeper)(nil)

// Renamed writes the record of a journaled change of one file as soon as
// its new content is in place, and starts the entry's commit: its last
// record is in it. The answer still waits for the commit and the folder's
// sync; a folder's sync that fails leaves the record of a change that
// happened (docs/decisions.md, "The journal").
func (k *auditKeeper) Renamed(v fs.Version, size int64) {
	if n, ok := k.inner.(fs.RenameNoter); ok {
		n.Renamed(v, size)
	}
	a := k.a
	if a == nil || a.entry == nil || len(a.keeps) != 1 || a.spent != 0 || len(a.res) != 1 {
		return
	}
	rel := k.rel
	if k.target != "" {
		rel = k.target
	}
	k.written = true
	k.err = a.commit(rel, k.before, &audit.State{Version: string(v), SHA256: k.after, Bytes: size})
	if k.err == nil && k.then != nil {
		k.then()
	}
}

var _ fs.Keeper = (*auditKeeper)(nil)

// Keep records the replaced file's state.
func (k *auditKeeper) Keep(ctx context.Context, rep fs.Replaced) error {
	k.rel = rep.Path
	if k.inner != nil {
		if err := k.inner.Keep(ctx, rep); err != nil {
			return err
		}
	}
	if !rep.Exists {
		return nil
	}
	st := &audit.State{Version: string(rep.Version), Bytes: rep.Size}
	if r, ok := k.inner.(*checkpoint.Recording); ok {
		st.SHA256 = r.BeforeSHA256()
	}
	if st.SHA256 == "" && rep.Content != nil {
		sum, err := sha256Of(ctx, io.NewSectionReader(rep.Content, 0, rep.Size))
		if err != nil {
			return err
		}
		st.SHA256 = sum
	}
	k.before = st
	return nil
}

// Prepare records the new content's SHA-256 (nil: the change removes the
// file).
func (k *auditKeeper) Prepare(ctx context.Context, sum *[32]byte) error {
	if sum != nil {
		k.after = hex.EncodeToString(sum[:])
	}
	if k.inner != nil {
		return k.inner.Prepare(ctx, sum)
	}
	return nil
}

// Done passes the outcome on.
func (k *auditKeeper) Done(p *fs.Published) {
	if k.inner != nil {
		k.inner.Done(p)
	}
}

// auditStates are a file's states around a change (nil: absent), as its
// audit record names them, when the step learned them itself.
type auditStates struct {
	rel           string
	before, after *audit.State
}

// commitOutcome commits the record of a change's i-th outcome: with the
// states its step learned, or those its Keeper saw, the new version and
// size (docs/audit.md).
func (a *auditing) commitOutcome(x *Executor, i int, o *outcome) *fault.Error {
	if a == nil {
		return nil
	}
	if o.states != nil {
		return a.commit(o.states.rel, o.states.before, o.states.after)
	}
	if i < len(a.keeps) && a.keeps[i].written {
		return a.keeps[i].err
	}
	var k auditKeeper
	if i < len(a.keeps) {
		k = *a.keeps[i]
	}
	rel := k.rel
	if r, ok := x.fs.Rel(o.target); ok {
		rel = r
	}
	var after *audit.State
	if !o.removed {
		after = &audit.State{Version: string(o.version), SHA256: k.after, Bytes: o.size}
	}
	return a.commit(rel, k.before, after)
}

// sha256Of hashes r to its end, in chunks, stopping when ctx is done.
func sha256Of(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := r.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stateOfCheckpoint is a checkpoint state as an audit one (nil: absent).
func stateOfCheckpoint(s *checkpoint.State) *audit.State {
	if s == nil {
		return nil
	}
	return &audit.State{Version: s.Version, SHA256: s.SHA256, Bytes: s.Bytes}
}
