// Package identity makes the server an OAuth 2.1 resource server
// (docs/identity.md): it verifies access tokens (JWTs) against the keys of
// one issuer, turns a verified token into a Principal (subject and scopes),
// and builds the challenges and the RFC 9728 metadata a client needs to find
// the authorization server. It knows nothing of tools or sessions: a
// transport authenticates a request here and carries the Principal on.
package identity

import (
	"context"
	"errors"
	"slices"
	"time"
)

// The scopes of docs/identity.md. No scope implies another: toolfs:admin
// widens what a subject sees (every subject's sessions, events, changes),
// it does not grant reading or writing.
const (
	ScopeRead    = "toolfs:read"    // read, glob, grep, the catalog, /events, listing and downloading files
	ScopeWrite   = "toolfs:write"   // write, edit, revert, uploads and deletes
	ScopeApprove = "toolfs:approve" // deciding approvals
	ScopeAdmin   = "toolfs:admin"   // every subject's sessions, events and changes
)

// Scopes lists every scope, in the order the metadata advertises them.
var Scopes = []string{ScopeRead, ScopeWrite, ScopeApprove, ScopeAdmin}

// Principal is who a verified access token speaks for.
type Principal struct {
	// Subject is the token's sub: the one key that scopes sessions,
	// approvals, events and checkpoints. Never empty.
	Subject string
	// Scopes are the token's scopes (scope or scp), deduplicated, in the
	// token's order.
	Scopes []string
	// ClientID is the token's client_id claim (RFC 9068), or "".
	ClientID string
	// Issuer is the token's iss, Expiry its exp.
	Issuer string
	Expiry time.Time
}

// Has reports whether p holds scope (exactly; scopes do not imply each
// other).
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

type principalKey struct{}

// WithPrincipal returns ctx carrying p, for the layers after the
// authentication middleware.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the Principal WithPrincipal stored in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Why a token was refused. Every refusal wraps ErrInvalidToken and exactly
// one of the reasons below, so logs and metrics can tell them apart while
// clients see one 401 form. No error text ever contains the token.
var (
	ErrInvalidToken = errors.New("invalid access token")

	ErrMissing     = errors.New("no bearer token")
	ErrQueryToken  = errors.New("access token in the query string")
	ErrMalformed   = errors.New("malformed token")
	ErrAlgorithm   = errors.New("signing algorithm not allowed")
	ErrUnknownKey  = errors.New("unknown signing key")
	ErrSignature   = errors.New("bad signature")
	ErrExpired     = errors.New("token expired")
	ErrNotYetValid = errors.New("token not valid yet")
	ErrIssuer      = errors.New("wrong issuer")
	ErrAudience    = errors.New("audience does not name this server")
	ErrNoSubject   = errors.New("token has no subject")
)

// reasons lists the reasons in a stable order, for Reason.
var reasons = []error{ErrMissing, ErrQueryToken, ErrMalformed, ErrAlgorithm, ErrUnknownKey, ErrSignature,
	ErrExpired, ErrNotYetValid, ErrIssuer, ErrAudience, ErrNoSubject}

// Reason returns the reason err wraps (one of the Err* values above), or
// nil when err is no refusal of this package: a short, token-free label for
// logs and metrics.
func Reason(err error) error {
	for _, r := range reasons {
		if errors.Is(err, r) {
			return r
		}
	}
	return nil
}

// refusal is a refused token: ErrInvalidToken, the reason, and detail
// that never contains the token.
type refusal struct {
	reason error
	detail string
	cause  error
}

func refuse(reason error, detail string, cause error) error {
	return &refusal{reason: reason, detail: detail, cause: cause}
}

func (e *refusal) Error() string {
	s := ErrInvalidToken.Error() + ": " + e.reason.Error()
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

func (e *refusal) Unwrap() []error {
	errs := []error{ErrInvalidToken, e.reason}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

// clip bounds a token-supplied value (a kid, an aud) quoted in an error's
// detail, so a 16 KiB token cannot flood the log.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
