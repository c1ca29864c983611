package identity

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestChallenges pins the exact WWW-Authenticate values of docs/identity.md.
func TestChallenges(t *testing.T) {
	r := Resource{PublicURL: "https://tools.example.com/toolfs", Issuer: "https://auth.example.com"}
	if got, want := r.Unauthorized(), `Bearer resource_metadata="https://tools.example.com/toolfs/.well-known/oauth-protected-resource"`; got != want {
		t.Errorf("401 challenge\n got %s\nwant %s", got, want)
	}
	if got, want := InsufficientScope(ScopeWrite), `Bearer error="insufficient_scope", scope="toolfs:write"`; got != want {
		t.Errorf("403 challenge\n got %s\nwant %s", got, want)
	}
	d := Require(Principal{Subject: "a", Scopes: []string{ScopeRead}}, ScopeApprove)
	if d == nil || d.Status != 403 || d.Code != "INSUFFICIENT_SCOPE" || d.Challenge != `Bearer error="insufficient_scope", scope="toolfs:approve"` {
		t.Errorf("Require: %+v", d)
	}
	if d := Require(Principal{Subject: "a", Scopes: []string{ScopeAdmin}}, ScopeRead); d == nil {
		t.Error("toolfs:admin implied toolfs:read")
	}
	if d := Require(Principal{Subject: "a", Scopes: []string{ScopeRead, ScopeWrite}}, ScopeWrite); d != nil {
		t.Errorf("Require with the scope: %+v", d)
	}
}

// TestMetadataDocuments pins both RFC 9728 documents as served, byte for
// byte: the server's and /mcp's, whose resource is the MCP endpoint.
func TestMetadataDocuments(t *testing.T) {
	r := Resource{PublicURL: "https://tools.example.com", Issuer: "https://auth.example.com/realms/dev"}
	mux := http.NewServeMux()
	mux.Handle(MetadataPath, r.MetadataHandler(MetadataPath))
	mux.Handle(MCPMetadataPath, r.MetadataHandler(MCPMetadataPath))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{
		"/.well-known/oauth-protected-resource":     `{"resource":"https://tools.example.com","authorization_servers":["https://auth.example.com/realms/dev"],"scopes_supported":["toolfs:read","toolfs:write","toolfs:approve","toolfs:admin"],"bearer_methods_supported":["header"]}` + "\n",
		"/.well-known/oauth-protected-resource/mcp": `{"resource":"https://tools.example.com/mcp","authorization_servers":["https://auth.example.com/realms/dev"],"scopes_supported":["toolfs:read","toolfs:write","toolfs:approve","toolfs:admin"],"bearer_methods_supported":["header"]}` + "\n",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || string(b) != want {
			t.Errorf("GET %s: %d %s\n%s\nwant\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b, want)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET %s: no CORS for discovery", path)
		}
	}
	if got, want := DefaultAudiences("https://tools.example.com/"), []string{"https://tools.example.com", "https://tools.example.com/mcp"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("DefaultAudiences: %q", got)
	}
}

// TestBearerToken: only the Authorization header carries a token; a token
// in the query string is refused even beside a good header.
func TestBearerToken(t *testing.T) {
	for _, c := range []struct {
		name, query string
		headers     []string
		token       string
		reason      error
	}{
		{name: "header", headers: []string{"Bearer abc.def.ghi"}, token: "abc.def.ghi"},
		{name: "scheme any case", headers: []string{"bearer abc"}, token: "abc"},
		{name: "none", reason: ErrMissing},
		{name: "basic", headers: []string{"Basic dXNlcjpwYXNz"}, reason: ErrMissing},
		{name: "empty token", headers: []string{"Bearer "}, reason: ErrMalformed},
		{name: "two tokens", headers: []string{"Bearer a b"}, reason: ErrMalformed},
		{name: "two headers", headers: []string{"Bearer a", "Bearer b"}, reason: ErrMalformed},
		{name: "query", query: "access_token=abc", reason: ErrQueryToken},
		{name: "query beside a header", query: "access_token=abc", headers: []string{"Bearer abc"}, reason: ErrQueryToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/tools?"+c.query, nil)
			for _, h := range c.headers {
				r.Header.Add("Authorization", h)
			}
			tok, err := BearerToken(r)
			if c.reason == nil {
				if err != nil || tok != c.token {
					t.Fatalf("got %q, %v; want %q", tok, err, c.token)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) || Reason(err) != c.reason {
				t.Fatalf("err %v (reason %v), want %v", err, Reason(err), c.reason)
			}
		})
	}
}

// TestMetadataURLs: RFC 8414 insertion first, then OpenID Connect.
func TestMetadataURLs(t *testing.T) {
	for issuer, want := range map[string][]string{
		"https://auth.example.com": {
			"https://auth.example.com/.well-known/oauth-authorization-server",
			"https://auth.example.com/.well-known/openid-configuration",
		},
		"https://tenant.auth0.com/": {
			"https://tenant.auth0.com/.well-known/oauth-authorization-server",
			"https://tenant.auth0.com/.well-known/openid-configuration",
		},
		"https://kc.example.com/realms/dev": {
			"https://kc.example.com/.well-known/oauth-authorization-server/realms/dev",
			"https://kc.example.com/.well-known/openid-configuration/realms/dev",
			"https://kc.example.com/realms/dev/.well-known/openid-configuration",
		},
	} {
		u, _ := url.Parse(issuer)
		if got := metadataURLs(u); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", issuer, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestServerURLs: keys come over https, or http from loopback only.
func TestServerURLs(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://auth.example.com":   true,
		"http://127.0.0.1:4444":      true,
		"http://localhost:4444":      true,
		"http://[::1]:4444":          true,
		"http://auth.example.com":    false,
		"http://10.0.0.5:4444":       false,
		"ftp://auth.example.com":     false,
		"https://auth.example.com?x": false,
		"/relative":                  false,
	} {
		if _, err := parseServerURL(raw); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", raw, err, ok)
		}
	}
}

// TestScpForms: scp as a list (Hydra) or a string (Entra), merged with
// scope without duplicates.
func TestScpForms(t *testing.T) {
	var c claims
	for raw, want := range map[string]string{
		`{"scp":["toolfs:read","toolfs:write"]}`:                      "toolfs:read toolfs:write",
		`{"scp":"toolfs:read toolfs:write"}`:                          "toolfs:read toolfs:write",
		`{"scope":"toolfs:read  toolfs:admin","scp":["toolfs:read"]}`: "toolfs:read toolfs:admin",
	} {
		c = claims{}
		if err := jsonUnmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if got := strings.Join(scopesOf(c), " "); got != want {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
	if err := jsonUnmarshal(`{"scp":42}`, &c); err == nil {
		t.Error("scp 42 accepted")
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
