package identity

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// The paths of the RFC 9728 metadata: the server's, and the /mcp
// endpoint's (RFC 9728 §3.1: the well-known suffix before the resource's
// path), which MCP clients look up first.
const (
	MetadataPath    = "/.well-known/oauth-protected-resource"
	mcpPath         = "/mcp"
	MCPMetadataPath = MetadataPath + mcpPath
)

// Resource is this server as an OAuth protected resource: where clients
// reach it and the authorization server they get tokens from.
type Resource struct {
	// PublicURL is --public-url, without a trailing slash.
	PublicURL string
	// Issuer is the authorization server (Verifier.Issuer).
	Issuer string
}

// MetadataURL is the URL of the server's metadata document, the one every
// 401 names.
func (r Resource) MetadataURL() string { return strings.TrimSuffix(r.PublicURL, "/") + MetadataPath }

// Unauthorized is the WWW-Authenticate value of every 401: a missing,
// malformed, expired, foreign or otherwise refused token alike.
func (r Resource) Unauthorized() string { return `Bearer resource_metadata="` + r.MetadataURL() + `"` }

// InsufficientScope is the WWW-Authenticate value of a 403 for a token
// that lacks scope.
func InsufficientScope(scope string) string {
	return `Bearer error="insufficient_scope", scope="` + scope + `"`
}

// Metadata is the RFC 9728 document at path (MetadataPath or
// MCPMetadataPath): its resource is the URL the document describes
// (RFC 9728 §3.3), so /mcp's is PublicURL/mcp.
func (r Resource) Metadata(path string) *oauthex.ProtectedResourceMetadata {
	resource := strings.TrimSuffix(r.PublicURL, "/")
	if path == MCPMetadataPath {
		resource += mcpPath
	}
	return &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{r.Issuer},
		ScopesSupported:        slices.Clone(Scopes),
		BearerMethodsSupported: []string{"header"},
	}
}

// MetadataHandler serves Metadata(path) with the go-sdk's handler: GET
// answers the document, OPTIONS a CORS preflight, with
// Access-Control-Allow-Origin: * (public discovery data, RFC 9728 §3.1;
// browser-based MCP clients read it cross-origin).
func (r Resource) MetadataHandler(path string) http.Handler {
	return auth.ProtectedResourceMetadataHandler(r.Metadata(path))
}

// BearerToken returns the request's bearer token: from the Authorization
// header only (RFC 6750 §2.1). A token in the query string
// (access_token=) is refused even beside a valid header, so it is never
// accepted from a URL that proxies and browsers log.
func BearerToken(r *http.Request) (string, error) {
	if r.URL.Query().Has("access_token") {
		return "", refuse(ErrQueryToken, "", nil)
	}
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", refuse(ErrMissing, "", nil)
	}
	if len(values) > 1 {
		return "", refuse(ErrMalformed, "several Authorization headers", nil)
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", refuse(ErrMissing, "Authorization is not a Bearer credential", nil)
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", refuse(ErrMalformed, "not one token", nil)
	}
	return token, nil
}

// TokenVerifier is what verifies a raw token (a *Verifier).
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (Principal, error)
}

// Denial is a refused request, for the transport to answer through its one
// problem writer: Status 401 (fault.CodeUnauthorized) or 403
// (fault.CodeInsufficientScope), as the transport's table maps them; the
// exact WWW-Authenticate value, a safe Message for the body, and Err (the
// reason, for logs only; never sent).
type Denial struct {
	Status    int
	Code      fault.Code
	Challenge string
	Message   string
	Err       error
}

// Guard authenticates requests for a Resource.
type Guard struct {
	Resource Resource
	Verifier TokenVerifier
}

// Authenticate verifies the request's bearer token. Every refusal is the
// same 401 to the client; Denial.Err says why.
func (g Guard) Authenticate(r *http.Request) (Principal, *Denial) {
	raw, err := BearerToken(r)
	if err == nil {
		var p Principal
		if p, err = g.Verifier.Verify(r.Context(), raw); err == nil {
			return p, nil
		}
	}
	return Principal{}, &Denial{
		Status: http.StatusUnauthorized, Code: fault.CodeUnauthorized, Challenge: g.Resource.Unauthorized(),
		Message: "missing or invalid access token", Err: err,
	}
}

// Require checks that p holds scope.
func Require(p Principal, scope string) *Denial {
	if p.Has(scope) {
		return nil
	}
	return &Denial{
		Status: http.StatusForbidden, Code: fault.CodeInsufficientScope, Challenge: InsufficientScope(scope),
		Message: "the access token lacks the scope " + scope, Err: ErrInsufficientScope,
	}
}

// ErrInsufficientScope is the Err of a 403 Denial.
var ErrInsufficientScope = errors.New("insufficient scope")

// Middleware authenticates every request, requires scopeOf(r) (none when
// it returns ""), and hands the Principal on in the request's context
// (FromContext). deny answers a Denial; it must set Challenge as the
// WWW-Authenticate header (SetChallenge) and write the problem body.
func (g Guard) Middleware(scopeOf func(*http.Request) string, deny func(http.ResponseWriter, *http.Request, *Denial)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, d := g.Authenticate(r)
			if d == nil {
				if scope := scopeOf(r); scope != "" {
					d = Require(p, scope)
				}
			}
			if d != nil {
				deny(w, r, d)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}

// SetChallenge sets d's WWW-Authenticate header on w.
func (d *Denial) SetChallenge(w http.ResponseWriter) { w.Header().Set("WWW-Authenticate", d.Challenge) }

// TokenInfo is p as the go-sdk's auth.TokenInfo: UserID is the subject, so
// the SDK's streamable handler binds each MCP session to the subject that
// opened it.
func (p Principal) TokenInfo() *auth.TokenInfo {
	return &auth.TokenInfo{Scopes: slices.Clone(p.Scopes), Expiration: p.Expiry, UserID: p.Subject}
}

// SDKVerifier is an auth.TokenVerifier for auth.RequireBearerToken behind
// Middleware: it verifies nothing again, it hands on the Principal the
// middleware put in the context (the SDK only reads its TokenInfo from a
// context RequireBearerToken filled). A request without one is refused.
func SDKVerifier(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
	p, ok := FromContext(r.Context())
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return p.TokenInfo(), nil
}

// SDKOptions are the auth.RequireBearerToken options that match Verifier:
// the same leeway on exp, and the metadata URL of 401s. A principal
// without an expiry (a static token's, which the transport let through)
// passes: the middleware in front checked every access token's exp.
func (r Resource) SDKOptions() *auth.RequireBearerTokenOptions {
	return &auth.RequireBearerTokenOptions{ResourceMetadataURL: r.MetadataURL(), ClockSkew: DefaultLeeway, AllowMissingExpiration: true}
}
