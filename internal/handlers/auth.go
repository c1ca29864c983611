package handlers

import (
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// scopeRule is the scope a request of a route needs with identities
// (docs/identity.md, "Scopes"); "" needs only a valid token.
type scopeRule func(*http.Request) string

// needs is a route's fixed scope.
func needs(scope string) scopeRule { return func(*http.Request) string { return scope } }

// writesOnChange needs the write scope for PUT and DELETE (uploads and
// deletes of /files), the read scope for anything else.
func writesOnChange(r *http.Request) string {
	if r.Method == http.MethodPut || r.Method == http.MethodDelete {
		return identity.ScopeWrite
	}
	return identity.ScopeRead
}

// decidesOnPost needs the approve scope to decide (POST /approvals/{id});
// listing needs a valid token only, since a subject lists its own
// approvals alone (an agent's token with read and write, a person's with
// approve alike; docs/identity.md).
func decidesOnPost(r *http.Request) string {
	if r.Method == http.MethodPost {
		return identity.ScopeApprove
	}
	return ""
}

// toolScope is the scope of a tool's routes.
// canWrite reports whether r's caller may call the tools that write: any
// caller without identities, the static token, or a token holding
// toolfs:write. The catalog and its views list only what it may call
// (docs/identity.md, "What a token may do, it sees").
func canWrite(r *http.Request) bool {
	p, ok := identity.FromContext(r.Context())
	return !ok || p.Has(identity.ScopeWrite)
}

func toolScope(tool string) scopeRule {
	if tools.Writes(tool) {
		return needs(identity.ScopeWrite)
	}
	return needs(identity.ScopeRead)
}

// staticPrincipal is who the static --token (or --approver-token) speaks
// for beside identities: no subject (its sessions are the unscoped ones of
// a server without identities) and every scope, admin included: it is the
// operator's credential for scripts (docs/identity.md).
var staticPrincipal = identity.Principal{Subject: "", Scopes: identity.Scopes}

// authn is a route group's authentication: the static tokens (tokens:
// --token, and on the approvals routes --approver-token) and, with
// identities, a verified access token holding scope(r). Without identities
// it is bearerAuth. A refused token is 401 with the challenge that names
// the metadata; a token without the scope 403 INSUFFICIENT_SCOPE with its
// challenge. The verified Principal goes on in the request's context.
func (s *rest) authn(scope scopeRule, tokens ...string) func(http.Handler) http.Handler {
	if s.cfg.OAuth == nil {
		return bearerAuth(tokens[0], tokens[1:]...)
	}
	var want [][]byte
	for _, t := range tokens {
		if t != "" {
			want = append(want, []byte("Bearer "+t))
		}
	}
	verified := s.cfg.OAuth.Middleware(scope, s.deny)
	return func(next http.Handler) http.Handler {
		oauth := verified(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isPreflight(r) {
				next.ServeHTTP(w, r)
				return
			}
			if len(want) > 0 && !r.URL.Query().Has("access_token") && authorizedBy(r, want) {
				next.ServeHTTP(w, r.WithContext(identity.WithPrincipal(r.Context(), staticPrincipal)))
				return
			}
			oauth.ServeHTTP(w, r)
		})
	}
}

// metricsAuth is GET /metrics's authentication: what a scraper can be
// given without the agent's powers (docs/running.md, "Watching it"). With
// identities, an access token with toolfs:read; the static --token; and
// --metrics-token, which no other route accepts. Without identities and
// without either token, none.
func (s *rest) metricsAuth() func(http.Handler) http.Handler {
	if s.cfg.OAuth == nil && s.cfg.Token == "" {
		return bearerAuth(s.cfg.MetricsToken)
	}
	return s.authn(needs(identity.ScopeRead), s.cfg.Token, s.cfg.MetricsToken)
}

// deny answers a refused request through the one problem writer, with its
// challenge; the reason goes to the log, never the token.
func (s *rest) deny(w http.ResponseWriter, r *http.Request, d *identity.Denial) {
	Deny(s.deps.Logger)(w, r, d)
}

// Deny is how every refused request is answered, for a transport that
// decides a refusal itself (the MCP transport's write-scope challenge,
// docs/identity.md): the challenge, the problem body, and a log line with
// the reason, never the token.
func Deny(log *slog.Logger) func(http.ResponseWriter, *http.Request, *identity.Denial) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(w http.ResponseWriter, r *http.Request, d *identity.Denial) {
		reason := "insufficient scope"
		if rs := identity.Reason(d.Err); rs != nil {
			reason = rs.Error()
		}
		log.Info("access refused", "path", r.URL.Path, "status", d.Status, "reason", reason, "request_id", r.Header.Get(tools.RequestIDHeader))
		d.SetChallenge(w)
		writeProblem(w, d.Code, d.Message)
	}
}

// caller is the tools.Call fields of a request's verified principal: its
// subject, and whether it sees every subject's (the admin scope). Without
// identities, zero.
func caller(r *http.Request) tools.Call {
	p, ok := identity.FromContext(r.Context())
	if !ok {
		return tools.Call{}
	}
	return tools.Call{Subject: p.Subject, Admin: p.Has(identity.ScopeAdmin)}
}

// viewer is caller for the change feed.
func viewer(r *http.Request) (string, bool) {
	c := caller(r)
	return c.Subject, c.Admin
}

// mcpAuth is what /mcp adds to authn with identities: the go-sdk's
// auth.RequireBearerToken, which binds each MCP session to the subject
// that opened it and hands the subject and scopes to the tool handlers
// (it verifies nothing again: identity.SDKVerifier hands on the principal
// authn verified). The write-scope challenge of a tools/call is the MCP
// transport's, which reads the body once (mcp.Config.Deny).
func (s *rest) mcpAuth(next http.Handler) http.Handler {
	if s.cfg.OAuth == nil {
		return next
	}
	return auth.RequireBearerToken(identity.SDKVerifier, s.cfg.OAuth.Resource.SDKOptions())(next)
}
