// Package policy is the read-before-write gate: per-session observed state
// and the decisions it implies for every write and edit (docs/decisions.md).
//
// The gate performs no filesystem I/O. It only turns what a session has seen
// into a precondition (a *fs.WriteIntent or an expected *fs.Version) that the
// provider checks under the target's lock, so every decision fails closed:
// forgetting an observation can only turn an allowed mutation into
// FS_NOT_OBSERVED, never authorize one.
package policy

import (
	"github.com/toolfs/toolfs-api/internal/fs"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Gate decides the intent of every write and edit and records observations.
// An empty session id owns no state: it records nothing and is decided as
// unseen. Implementations are safe for concurrent use.
//
// Errors: a decision that cannot be made (the store is unreachable) is an
// *fault.Error with fault.CodeSessionStoreUnavailable and no intent, so the caller writes
// nothing; an observation that cannot be recorded returns an error wrapping
// ErrUnavailable and is simply lost, which fails closed (the session must
// read again). The memory Store and Off never fail.
type Gate interface {
	// WriteIntent is the precondition of a write: ReplaceIfVersion when the
	// session saw the target present, else CreateIfAbsent. Nil, nil means
	// unconditional (Off only).
	WriteIntent(session string, t fs.Target) (*fs.WriteIntent, error)
	// EditGuard is what the session saw of the target: the version an edit
	// must still find, or whose bytes (hash) it must still hold. An unseen
	// target is CodeNotObserved, one seen absent is CodeNotFound. Nil, nil
	// means unconditional (Off only).
	EditGuard(session string, t fs.Target) (*fs.Observed, error)
	// ObservePresent records that the session saw key at version v, with
	// bytes of hash h ("" = unknown; docs/edits.md).
	ObservePresent(session string, key fs.TargetKey, v fs.Version, h fs.Hash) error
	// ObserveAbsent records that the session confirmed key does not exist.
	ObserveAbsent(session string, key fs.TargetKey) error
	// Touch counts as use of the session: any request carrying the session
	// header calls it.
	Touch(session string) error
	// Forget drops the session's state (DELETE /sessions/{id}) and reports
	// whether it existed.
	Forget(session string) (bool, error)
}

// A UseCarrier is a Gate that can carry a request's use of its session
// (what Touch does) in that request's first decision or record of the
// session, so the use costs no round trip of its own (RedisStore;
// docs/performance.md §7). Semantics are Touch's: the session is created
// if needed and becomes the most recently used, with its TTL restarted.
type UseCarrier interface {
	Gate
	// Using returns a Gate for one request of session whose first
	// operation on session also counts as that use, and end, which the
	// caller calls when the request ends: it touches the session when no
	// operation did.
	Using(session string) (g Gate, end func() error)
}

// Off is the bare provider: no state, nil intents and nil guards, so writes
// and edits are unconditional (the provider's lock and atomicity remain).
// Forget always reports false.
type Off struct{}

var _ Gate = Off{}

// WriteIntent returns nil: unconditional.
func (Off) WriteIntent(string, fs.Target) (*fs.WriteIntent, error) { return nil, nil }

// EditGuard returns nil, nil: unconditional.
func (Off) EditGuard(string, fs.Target) (*fs.Observed, error) { return nil, nil }

// ObservePresent records nothing.
func (Off) ObservePresent(string, fs.TargetKey, fs.Version, fs.Hash) error { return nil }

// ObserveAbsent records nothing.
func (Off) ObserveAbsent(string, fs.TargetKey) error { return nil }

// Touch does nothing.
func (Off) Touch(string) error { return nil }

// Forget reports false: Off holds no sessions.
func (Off) Forget(string) (bool, error) { return false, nil }

// notObserved is the model-facing refusal of an edit the session never read
// (the executor appends the remedy, render.Remedy, whatever the transport).
func notObserved(t fs.Target) error {
	return fault.New(fault.CodeNotObserved, `edit requires reading "`+t.Display+`" first`)
}

// confirmedAbsent is the refusal of an edit after a read confirmed absence.
func confirmedAbsent(t fs.Target) error {
	return fault.New(fault.CodeNotFound, `cannot edit "`+t.Display+`": not found`)
}
