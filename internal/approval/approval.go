// Package approval holds the pending approvals of sandbox escalations
// (docs/sandbox.md): a tool call that asks a person for a wider sandbox mode
// opens one, waits on it, and it ends when a person decides, when it times
// out, or when its call goes away. It knows nothing of HTTP or of the
// tools: the executor opens approvals, a transport lists and decides them.
//
// Everything is bounded: the number of pending approvals (Open refuses past
// Config.Max), their life (Config.Timeout, and never longer than their
// call), and the memory of ended ones (a ring of the last ids, so a late
// decision gets a precise answer).
//
// A Store keeps its approvals in this process, or with Config.Redis in
// Redis, shared by every replica of one workspace (docs/deployment.md,
// "Approvals and the change feed"): any replica lists and decides any
// approval, and the one that holds the waiting call learns of the decision
// through Redis pub/sub (redis.go).
package approval

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Approval is one question put to a person: the call's session, tool,
// target (DISPLAY) and the mode it asks for, with the model's reason and
// the change itself.
type Approval struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	// Subject is the verified subject of the call that asks
	// (docs/identity.md); absent without identities. Only that subject,
	// or an admin, lists and decides it.
	Subject string `json:"subject,omitempty"`
	Tool    string `json:"tool"`
	Path    string `json:"path"`
	// Paths are all the files of a change over several (a revert), Path
	// the first; absent for a write or edit (docs/sandbox.md). At most
	// MaxPathsBytes of names, whole ones, and then PathsTruncated.
	Paths          []string `json:"paths,omitempty"`
	PathsTruncated bool     `json:"paths_truncated,omitempty"`
	Mode           string   `json:"mode"`
	Reason         string   `json:"reason"`
	// Diff is the call's change as a unified diff, as its dry run shows it
	// (docs/sandbox.md): at most MaxDiffBytes, cut after a whole line, and
	// then Truncated.
	Diff      string    `json:"diff"`
	Truncated bool      `json:"truncated"`
	Created   time.Time `json:"created"`
	// Expires is when the call stops waiting (Created + Config.Timeout).
	Expires time.Time `json:"expires"`
	// Via is the channel whose decision ended it, as OnEnd is told:
	// ViaElicitation when the call's own client answered (DecideBy),
	// ViaApprovals otherwise (docs/sandbox.md). Not listed.
	Via string `json:"-"`
}

// The channels a decision comes by: the via label of
// toolfs_approvals_total (docs/sandbox.md).
const (
	ViaApprovals   = "approvals"
	ViaElicitation = "elicitation"
)

// MaxDiffBytes bounds an approval's Diff: what a person reads, and what
// every pending approval holds.
const MaxDiffBytes = 64 << 10

// MaxPathsBytes bounds the names an approval's Paths hold together.
const MaxPathsBytes = 64 << 10

// Request is what a call asks; the store adds the id and the times, and
// cuts Diff to MaxDiffBytes.
type Request struct {
	Session, Subject, Tool, Path, Mode, Reason string
	// Paths are the files of a change over several, Path the first.
	Paths []string
	Diff  string
}

// Approval is r as a person is shown it, without an id: Diff and Paths
// cut as Open cuts them, Created now and Expires after timeout. An
// approval asked of the call's own client (MCP elicitation) is never
// opened in a Store.
func (r Request) Approval(timeout time.Duration) Approval {
	diff, truncated := cut(r.Diff)
	paths, pathsCut := cutPaths(r.Paths)
	now := time.Now()
	return Approval{
		Session: r.Session, Subject: r.Subject, Tool: r.Tool, Path: r.Path, Paths: paths, PathsTruncated: pathsCut, Mode: r.Mode, Reason: r.Reason,
		Diff: diff, Truncated: truncated, Created: now.UTC(), Expires: now.Add(timeout).UTC(), Via: ViaElicitation,
	}
}

// Decision is a person's answer.
type Decision string

// The two decisions.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
)

// Outcome is how an approval ended; the values are the decision label of
// toolfs_approvals_total.
type Outcome string

// The four outcomes.
const (
	Approved  Outcome = "approve"
	Rejected  Outcome = "reject"
	TimedOut  Outcome = "timeout"
	Cancelled Outcome = "cancelled"
)

// Errors of Open and Decide.
var (
	// ErrFull: Config.Max approvals are pending already.
	ErrFull = errors.New("too many pending approvals")
	// ErrClosed: the store was closed (the server is shutting down).
	ErrClosed = errors.New("approvals are closed")
	// ErrUnknown: no such approval, or it was decided already.
	ErrUnknown = errors.New("no such pending approval")
	// ErrNotPending: the approval ended without a decision (timed out, or
	// its call went away).
	ErrNotPending = errors.New("the approval is no longer pending")
	// ErrUnavailable: the shared store (Redis) could not be reached.
	ErrUnavailable = errors.New("the approvals store is unavailable")
)

// Config bounds a Store and tells its owner what happens.
type Config struct {
	// Max is the most approvals pending at once (default 32).
	Max int
	// Timeout is how long a call waits for a decision (default 5m).
	Timeout time.Duration
	// OnOpen, when set, is told of every new approval (the change feed).
	OnOpen func(Approval)
	// OnEnd, when set, is told how every approval ended, exactly once
	// (metrics, the decision log). With Redis it is told on the replica
	// that held the approval, whichever replica decided it.
	OnEnd func(Approval, Outcome)

	// Redis, when set, keeps the pending approvals in Redis, shared by
	// every replica that uses the same Redis and Prefix; Max then bounds
	// them all together. nil: in this process.
	Redis redis.UniversalClient
	// Prefix starts every Redis key and channel (the session store's
	// --session-key-prefix; default "toolfs:").
	Prefix string
	// Lease is how long a pending approval in Redis outlives the last
	// heartbeat of the replica holding its call (one every Lease/5), so
	// the approvals of a replica that died are withdrawn within Lease
	// [5s].
	Lease time.Duration
}

// endedMemory is how many ended approvals a store remembers, so a decision
// that arrives late says why it is refused.
const endedMemory = 1024

// Store holds the pending approvals. It is safe for concurrent use.
type Store struct {
	cfg Config

	mu sync.Mutex
	// pending are the approvals whose calls wait in this process: all of
	// them in memory, this replica's share with Redis.
	pending map[string]*Pending
	wake    chan struct{} // closed and replaced when one opens or the store closes
	closed  bool
	// In memory only; with Redis they live there.
	seq   uint64 // of the last approval opened
	ended map[string]Outcome
	ring  []string // ids of ended, oldest first, at most endedMemory

	shared *shared // nil: in memory
	// redeemed are the answers taken (Redeem), in memory only, until each
	// expires.
	redeemed map[string]time.Time
}

// New returns an empty Store: in memory, or in Redis with Config.Redis
// (then Close it to stop its heartbeat and subscription).
func New(cfg Config) *Store {
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	s := &Store{cfg: cfg, pending: map[string]*Pending{}, wake: make(chan struct{}), ended: map[string]Outcome{}}
	if cfg.Redis != nil {
		s.shared = newShared(s, cfg)
	}
	return s
}

// Timeout is how long a call waits for a decision.
func (s *Store) Timeout() time.Duration { return s.cfg.Timeout }

// Len is the number of pending approvals whose calls wait in this process
// (with Redis, this replica's share).
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Max is the most approvals pending at once.
func (s *Store) Max() int { return s.cfg.Max }

// Pending is one open approval, owned by the call that opened it: Wait for
// the outcome, and defer Cancel, which ends it if it is still open (a no-op
// once it ended), so it never outlives its call.
type Pending struct {
	s       *Store
	a       Approval
	seq     uint64
	done    chan struct{} // closed when it ends
	outcome Outcome       // set under s.mu when it ends
}

// Open asks: it records a pending approval for r. ErrFull past Config.Max,
// ErrClosed once the store is closed, ErrUnavailable when Redis cannot be
// reached.
func (s *Store) Open(r Request) (*Pending, error) {
	a := r.Approval(s.cfg.Timeout)
	a.ID, a.Via = newID(), ViaApprovals
	var seq uint64
	if s.shared != nil {
		if s.isClosed() {
			return nil, ErrClosed
		}
		var err error
		if seq, err = s.shared.open(a); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		if s.shared != nil {
			s.shared.end(a.ID, Cancelled)
		}
		return nil, ErrClosed
	case s.shared == nil && len(s.pending) >= s.cfg.Max:
		s.mu.Unlock()
		return nil, ErrFull
	case s.shared == nil:
		s.seq++
		seq = s.seq
	}
	p := &Pending{s: s, seq: seq, done: make(chan struct{}), a: a}
	s.pending[a.ID] = p
	s.wakeLocked()
	s.mu.Unlock()
	if s.cfg.OnOpen != nil {
		s.cfg.OnOpen(p.a)
	}
	return p, nil
}

// wakeLocked wakes every Next. Called with s.mu held.
func (s *Store) wakeLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Approval is what the person is asked.
func (p *Pending) Approval() Approval {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.a
}

// Wait blocks until a person decides, the store's timeout passes, or ctx
// ends (the caller went away: Cancelled), and returns the outcome. The
// approval has ended when Wait returns.
func (p *Pending) Wait(ctx context.Context) Outcome {
	t := time.NewTimer(time.Until(p.a.Expires))
	defer t.Stop()
	select {
	case <-p.done: // decided, or the store closed
	case <-t.C:
		p.end(TimedOut)
	case <-ctx.Done():
		p.end(Cancelled)
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.outcome
}

// DecideBy records the decision of the call's own client (via
// ViaElicitation) on p, as Decide does for a person at /approvals: the
// first decision wins, and ErrUnknown or ErrNotPending says another one,
// or the end of p, came first.
func (p *Pending) DecideBy(d Decision, via string) error {
	s := p.s
	s.mu.Lock()
	if p.outcome != "" {
		s.mu.Unlock()
		return ErrUnknown
	}
	p.a.Via = via
	s.mu.Unlock()
	err := s.Decide(p.a.ID, d)
	if err != nil {
		s.mu.Lock()
		if p.a.Via == via && p.outcome == "" {
			p.a.Via = ViaApprovals
		}
		s.mu.Unlock()
	}
	return err
}

// Cancel ends the approval as Cancelled if it is still pending; after it
// ended it does nothing. Defer it right after Open.
func (p *Pending) Cancel() { p.end(Cancelled) }

// end moves p from pending to ended with o, unless it ended already (a
// decision that won the race keeps its outcome). With Redis the outcome
// that stands is Redis's: a decision recorded there first wins.
func (p *Pending) end(o Outcome) {
	if p.s.shared != nil {
		if p.ended() {
			return
		}
		o = p.s.shared.end(p.a.ID, o)
	}
	p.finish(o)
}

// ended reports whether p has its outcome.
func (p *Pending) ended() bool {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.outcome != ""
}

// finish ends p here with o, unless it ended already: its Wait returns
// and OnEnd is told.
func (p *Pending) finish(o Outcome) {
	s := p.s
	s.mu.Lock()
	if p.outcome != "" {
		s.mu.Unlock()
		return
	}
	p.outcome = o
	a := p.a
	delete(s.pending, p.a.ID)
	if s.shared == nil {
		s.remember(p.a.ID, o)
	}
	close(p.done)
	s.mu.Unlock()
	if s.cfg.OnEnd != nil {
		s.cfg.OnEnd(a, o)
	}
}

// remember keeps how id ended, forgetting the oldest past endedMemory.
// Called with s.mu held.
func (s *Store) remember(id string, o Outcome) {
	if len(s.ring) == endedMemory {
		delete(s.ended, s.ring[0])
		s.ring = slices.Delete(s.ring, 0, 1)
	}
	s.ring = append(s.ring, id)
	s.ended[id] = o
}

// Decide records a person's decision on the pending approval id: ErrUnknown
// when there is none (or it was decided already), ErrNotPending when it
// ended without a decision (with Redis also when the replica holding its
// call died), ErrUnavailable when Redis cannot be reached.
func (s *Store) Decide(id string, d Decision) error {
	o := Rejected
	if d == Approve {
		o = Approved
	}
	if s.shared != nil {
		if err := s.shared.decide(id, o); err != nil {
			return err
		}
		// Held here: no need to wait for the message.
		s.mu.Lock()
		p := s.pending[id]
		s.mu.Unlock()
		if p != nil {
			p.finish(o)
		}
		return nil
	}
	s.mu.Lock()
	p, ok := s.pending[id]
	if !ok {
		o, ended := s.ended[id]
		s.mu.Unlock()
		if ended && (o == TimedOut || o == Cancelled) {
			return ErrNotPending
		}
		return ErrUnknown
	}
	s.mu.Unlock()
	p.end(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.outcome != o { // it timed out or was cancelled meanwhile
		return ErrNotPending
	}
	return nil
}

// List returns the pending approvals, oldest first, and the cursor of the
// newest one opened so far (for Next); with Redis those of every replica,
// or ErrUnavailable.
func (s *Store) List() ([]Approval, uint64, error) {
	if s.shared != nil {
		l, cursor, _, err := s.shared.list()
		return l, cursor, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(), s.seq, nil
}

func (s *Store) listLocked() []Approval {
	ps := make([]*Pending, 0, len(s.pending))
	for _, p := range s.pending {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *Pending) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Approval, len(ps))
	for i, p := range ps {
		out[i] = p.a
	}
	return out
}

// Next waits up to wait (bounded by ctx) until an approval opened after
// cursor is pending, then returns the pending approvals and the new cursor,
// as List does. With cursor 0 any pending approval answers at once. When
// the wait ends with nothing new, it returns the list as it is then.
func (s *Store) Next(ctx context.Context, cursor uint64, wait time.Duration) ([]Approval, uint64, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	if s.shared != nil {
		return s.shared.next(ctx, cursor, t.C)
	}
	for {
		s.mu.Lock()
		fresh := false
		for _, p := range s.pending {
			if p.seq > cursor {
				fresh = true
				break
			}
		}
		if fresh || s.closed {
			defer s.mu.Unlock()
			return s.listLocked(), s.seq, nil
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-t.C:
			return s.List()
		case <-ctx.Done():
			return s.List()
		}
	}
}

// Close ends every pending approval as Cancelled, answers every Next, and
// refuses new approvals (ErrClosed): the server is shutting down and no
// person can reach it any more. With Redis it withdraws this replica's
// approvals and stops its heartbeat and subscription.
func (s *Store) Close() {
	if s.shared != nil {
		defer s.shared.stop()
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.wake)
	ps := make([]*Pending, 0, len(s.pending))
	for _, p := range s.pending {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	// With Redis each end is a round trip: in parallel, so a shutdown
	// waits for one, not for Max of them.
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.end(Cancelled) })
	}
	wg.Wait()
}

// cut is diff's longest prefix of whole lines within MaxDiffBytes (the
// lines' newlines between them; a diff text does not end with one), and
// whether anything was cut. A first line longer than the bound is cut at a
// character boundary instead.
func cut(diff string) (string, bool) {
	if len(diff) <= MaxDiffBytes {
		return diff, false
	}
	head := diff[:MaxDiffBytes+1] // the newline just past the bound still ends a whole line
	if i := strings.LastIndexByte(head, '\n'); i > 0 {
		head = diff[:i]
	} else {
		head = diff[:MaxDiffBytes]
		for len(head) > 0 && !utf8.RuneStart(diff[len(head)]) {
			head = head[:len(head)-1]
		}
	}
	// A copy: the diff of a 10 MiB rewrite must not stay in memory behind
	// its first 64 KiB while the approval is pending.
	return strings.Clone(head), true
}

// cutPaths keeps the first names of paths that fit MaxPathsBytes together.
func cutPaths(paths []string) ([]string, bool) {
	n := 0
	for i, p := range paths {
		if n += len(p); n > MaxPathsBytes {
			return slices.Clone(paths[:i]), true
		}
	}
	return paths, false
}

// newID returns 128 random bits in hex: ids cannot be guessed, so only
// someone who listed the approvals can decide one.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
