package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Defaults of Options (docs/identity.md).
const (
	DefaultLeeway       = 60 * time.Second
	DefaultMinRefresh   = 10 * time.Second
	DefaultMaxKeyAge    = time.Hour
	DefaultFetchTimeout = 10 * time.Second
	MaxTokenBytes       = 16 << 10 // a longer token is refused unread
)

// Algorithms are the signing algorithms a token may use: asymmetric ones
// only. "none" and the HMAC family (HS256…), whose key would be a secret
// the issuer shares with every resource server, are refused.
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Options configure a Verifier.
type Options struct {
	// Issuer is --oauth-issuer: https (http for a loopback host only).
	Issuer string
	// Audiences are the aud values that name this server (--oauth-audience;
	// DefaultAudiences(--public-url) when that is unset). A token is
	// accepted when one of its aud values is one of these, a trailing
	// slash apart. Required.
	Audiences []string
	// HTTPClient fetches the metadata and the keys; nil: a client with
	// FetchTimeout.
	HTTPClient *http.Client
	// Leeway is the clock skew allowed on exp and nbf (DefaultLeeway).
	Leeway time.Duration
	// MinRefresh is the least time between two fetches of the keys
	// (DefaultMinRefresh); MaxKeyAge the age after which a verification
	// refetches them (DefaultMaxKeyAge); FetchTimeout bounds one fetch.
	MinRefresh, MaxKeyAge, FetchTimeout time.Duration
	// OnKeyFetch, if set, is told of every fetch of the keys.
	OnKeyFetch func(KeyFetch)
	// Now is the clock (time.Now); tests move it.
	Now func() time.Time
}

// DefaultAudiences are the audiences that name a server at publicURL:
// publicURL itself (REST) and publicURL/mcp, the resource MCP clients ask
// tokens for (the resource of the /mcp metadata, RFC 9728 §3.3).
func DefaultAudiences(publicURL string) []string {
	base := strings.TrimSuffix(publicURL, "/")
	return []string{base, base + mcpPath}
}

// Verifier verifies access tokens issued by one authorization server. It
// is safe for concurrent use.
type Verifier struct {
	issuer    string // as the issuer's metadata spells it: the iss tokens carry
	audiences []string
	keys      *keySet
	keyfunc   jwt.Keyfunc
	parser    *jwt.Parser
	now       func() time.Time
}

// NewVerifier discovers the issuer's metadata and fetches its keys once;
// it fails when either cannot be had, so a wrong --oauth-issuer stops
// start-up.
func NewVerifier(ctx context.Context, o Options) (*Verifier, error) {
	if len(o.Audiences) == 0 {
		return nil, errors.New("identity: no audience (--oauth-audience or --public-url)")
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultLeeway
	}
	if o.MinRefresh == 0 {
		o.MinRefresh = DefaultMinRefresh
	}
	if o.MaxKeyAge == 0 {
		o.MaxKeyAge = DefaultMaxKeyAge
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: o.FetchTimeout}
	}
	dctx, cancel := context.WithTimeout(ctx, o.FetchTimeout)
	defer cancel()
	meta, err := discover(dctx, client, o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	keys := &keySet{
		Storage: jwkset.NewMemoryStorage(), url: meta.JWKSURI, client: client,
		minInterval: o.MinRefresh, maxAge: o.MaxKeyAge, timeout: o.FetchTimeout, now: o.Now, onFetch: o.OnKeyFetch,
	}
	keys.tried = o.Now()
	n, err := keys.fetch(dctx)
	if o.OnKeyFetch != nil {
		o.OnKeyFetch(KeyFetch{URL: meta.JWKSURI, Reason: "start", Keys: n, Err: err})
	}
	if err != nil {
		return nil, fmt.Errorf("identity: issuer %s: %w", o.Issuer, err)
	}
	keys.fetched.Store(keys.tried.UnixNano())
	kf, err := keyfunc.New(keyfunc.Options{Storage: keys, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	return &Verifier{
		issuer:    meta.Issuer,
		audiences: slices.Clone(o.Audiences),
		keys:      keys,
		keyfunc:   kf.Keyfunc,
		now:       o.Now,
		parser: jwt.NewParser(
			jwt.WithValidMethods(Algorithms),
			jwt.WithIssuer(meta.Issuer),
			jwt.WithLeeway(o.Leeway),
			jwt.WithExpirationRequired(),
			jwt.WithTimeFunc(o.Now),
		),
	}, nil
}

// Issuer is the issuer as its metadata spells it (the iss tokens carry
// and the authorization server the resource metadata names).
func (v *Verifier) Issuer() string { return v.issuer }

// HasKeys reports whether the verifier holds the issuer's keys: a fetch
// succeeded (NewVerifier requires one; a failed refetch keeps them).
func (v *Verifier) HasKeys() bool { return v.keys.fetched.Load() != 0 }

// claims are the claims a token is read for. scope is RFC 9068's
// space-separated string; scp is a list (Ory Hydra) or a string
// (Microsoft Entra).
type claims struct {
	jwt.RegisteredClaims
	Scope    string   `json:"scope,omitempty"`
	Scp      scpClaim `json:"scp,omitempty"`
	ClientID string   `json:"client_id,omitempty"`
}

type scpClaim []string

func (s *scpClaim) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = strings.Fields(one)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("scp is neither a string nor a list of strings")
	}
	*s = list
	return nil
}

// Verify checks raw (the token alone, without "Bearer ") and returns whom
// it speaks for. Every error wraps ErrInvalidToken and one reason
// (ErrExpired, ErrAudience, …: see Reason); none contains the token.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if raw == "" {
		return Principal{}, refuse(ErrMissing, "", nil)
	}
	if len(raw) > MaxTokenBytes {
		return Principal{}, refuse(ErrMalformed, fmt.Sprintf("over %d bytes", MaxTokenBytes), nil)
	}
	v.keys.refreshIfOld(ctx)
	var c claims
	tok, err := v.parser.ParseWithClaims(raw, &c, v.keyfunc)
	if err != nil {
		return Principal{}, classify(tok, err)
	}
	if !slices.ContainsFunc(v.audiences, func(a string) bool { return oauthex.MatchesResource(c.Audience, a) }) {
		return Principal{}, refuse(ErrAudience, fmt.Sprintf("aud %s, want one of %q", clip(fmt.Sprintf("%q", []string(c.Audience))), v.audiences), nil)
	}
	if c.Subject == "" {
		return Principal{}, refuse(ErrNoSubject, "", nil)
	}
	p := Principal{Subject: c.Subject, ClientID: c.ClientID, Issuer: c.Issuer, Scopes: scopesOf(c)}
	if c.ExpiresAt != nil {
		p.Expiry = c.ExpiresAt.Time
	}
	return p, nil
}

// scopesOf merges scope and scp, without duplicates, in the token's order.
func scopesOf(c claims) []string {
	var out []string
	for _, s := range append(strings.Fields(c.Scope), c.Scp...) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// classify turns a jwt error into a refusal with its reason.
func classify(tok *jwt.Token, err error) error {
	if tok != nil && tok.Header != nil {
		if alg, _ := tok.Header["alg"].(string); !slices.Contains(Algorithms, alg) {
			return refuse(ErrAlgorithm, fmt.Sprintf("alg %q", clip(alg)), err)
		}
	}
	var r *refusal
	switch {
	case errors.As(err, &r):
		return r
	case errors.Is(err, jwt.ErrTokenMalformed):
		return refuse(ErrMalformed, "", err)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return refuse(ErrUnknownKey, "", err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse(ErrSignature, "", err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse(ErrExpired, "", err)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refuse(ErrNotYetValid, "", err)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return refuse(ErrIssuer, "", err)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return refuse(ErrMalformed, "exp missing", err)
	}
	return refuse(ErrMalformed, "", err)
}
