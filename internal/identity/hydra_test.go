package identity

// Tests against a real authorization server: Ory Hydra v2.3.0 on loopback
// ports (internal/hydratest), issuing client-credentials JWTs.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/toolfs/toolfs-api/internal/hydratest"
)

const audience = "https://tools.example.com"

// clock is a Verifier's clock, stopped at its creation and moved only by
// the test, so intervals are exact whatever the machine's load.
type clock struct{ at atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.at.Store(time.Now().UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *clock) advance(d time.Duration) { c.at.Add(int64(d)) }
func (c *clock) set(t time.Time)         { c.at.Store(t.UnixNano()) }

// countingTransport counts the GETs of the issuer's JWK Set.
type countingTransport struct {
	jwks atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/.well-known/jwks.json") {
		c.jwks.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

type fixture struct {
	hydra *hydratest.Server
	v     *Verifier
	clock *clock
	fetch *countingTransport
}

func newFixture(t *testing.T, h *hydratest.Server, audiences ...string) *fixture {
	t.Helper()
	if len(audiences) == 0 {
		audiences = DefaultAudiences(audience)
	}
	f := &fixture{hydra: h, clock: newClock(), fetch: &countingTransport{}}
	v, err := NewVerifier(context.Background(), Options{
		Issuer: h.Issuer, Audiences: audiences, Now: f.clock.now,
		HTTPClient: &http.Client{Transport: f.fetch, Timeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	return f
}

// refused checks that raw is refused for reason, and that the error text
// holds no part of the token.
func refused(t *testing.T, v *Verifier, raw string, reason error) {
	t.Helper()
	p, err := v.Verify(context.Background(), raw)
	if err == nil {
		t.Fatalf("accepted (%+v), want %v", p, reason)
	}
	if !errors.Is(err, ErrInvalidToken) || Reason(err) != reason {
		t.Fatalf("refused with %v (reason %v), want %v", err, Reason(err), reason)
	}
	for _, part := range strings.Split(raw, ".") {
		if len(part) >= 8 && strings.Contains(err.Error(), part) {
			t.Fatalf("the error %q holds part of the token", err)
		}
	}
}

// jwtParts returns a JWT's header and claims, decoded, and its signature.
func jwtParts(t *testing.T, raw string) (header, claims map[string]any, sig string) {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatal(err)
		}
	}
	return header, claims, parts[2]
}

func segment(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestHydraTokens: client-credentials tokens with chosen scopes and
// audiences verify, with the client as subject and exactly the scopes
// granted; scp (a list, Hydra's default) and scope (a string) both count.
func TestHydraTokens(t *testing.T) {
	for _, strategy := range []string{"list", "string"} {
		t.Run("scope_claim="+strategy, func(t *testing.T) {
			h := hydratest.Start(t, "STRATEGIES_JWT_SCOPE_CLAIM="+strategy)
			f := newFixture(t, h)
			c := h.CreateClient(t, hydratest.Client{Scopes: Scopes, Audience: DefaultAudiences(audience)})
			for _, tc := range []struct {
				scopes, aud []string
			}{
				{[]string{ScopeRead}, []string{audience}},
				{[]string{ScopeRead, ScopeWrite}, []string{audience + "/mcp"}},
				{[]string{ScopeApprove, ScopeAdmin, ScopeRead}, DefaultAudiences(audience)},
			} {
				raw := h.Token(t, c, tc.scopes, tc.aud)
				header, claims, _ := jwtParts(t, raw)
				if header["alg"] != "RS256" {
					t.Fatalf("Hydra signs with %v, want RS256", header["alg"])
				}
				if _, ok := claims[map[string]string{"list": "scp", "string": "scope"}[strategy]]; !ok {
					t.Fatalf("Hydra's token has no %s claim: %v", strategy, claims)
				}
				p, err := f.v.Verify(context.Background(), raw)
				if err != nil {
					t.Fatalf("scopes %v aud %v: %v", tc.scopes, tc.aud, err)
				}
				if p.Subject != c.ID || p.ClientID != c.ID || p.Issuer != f.v.Issuer() {
					t.Errorf("principal %+v, want subject and client %s, issuer %s", p, c.ID, f.v.Issuer())
				}
				if !slices.Equal(p.Scopes, tc.scopes) {
					t.Errorf("scopes %q, want %q", p.Scopes, tc.scopes)
				}
				if d := time.Until(p.Expiry); d < 50*time.Minute || d > 61*time.Minute {
					t.Errorf("expiry in %v, want Hydra's default hour", d)
				}
			}
		})
	}
}

// TestHydraRefusals: every kind of bad token is refused, each with its
// own reason for the logs and none with the token in its text.
func TestHydraRefusals(t *testing.T) {
	h := hydratest.Start(t)
	f := newFixture(t, h)
	c := h.CreateClient(t, hydratest.Client{Scopes: Scopes, Audience: []string{audience, "https://other.example.com"}})
	good := h.Token(t, c, []string{ScopeRead}, []string{audience})
	if _, err := f.v.Verify(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	header, claims, sig := jwtParts(t, good)
	parts := strings.Split(good, ".")

	t.Run("wrong audience", func(t *testing.T) {
		refused(t, f.v, h.Token(t, c, []string{ScopeRead}, []string{"https://other.example.com"}), ErrAudience)
	})
	t.Run("no audience", func(t *testing.T) {
		refused(t, f.v, h.Token(t, c, []string{ScopeRead}, nil), ErrAudience)
	})
	t.Run("alg none", func(t *testing.T) {
		h := map[string]any{"alg": "none", "typ": "JWT", "kid": header["kid"]}
		refused(t, f.v, segment(t, h)+"."+parts[1]+".", ErrAlgorithm)
	})
	t.Run("HS256 with the issuer's kid", func(t *testing.T) {
		// Signed with a key of our choosing, and with the public key's
		// bytes (the classic confusion attack): refused for the alg
		// before any key is looked at.
		for _, key := range [][]byte{[]byte("a secret of our choosing, 32+ bytes"), []byte(fmt.Sprint(header["kid"]))} {
			h := map[string]any{"alg": "HS256", "typ": "JWT", "kid": header["kid"]}
			signing := segment(t, h) + "." + parts[1]
			mac := hmac.New(sha256.New, key)
			mac.Write([]byte(signing))
			refused(t, f.v, signing+"."+base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), ErrAlgorithm)
		}
	})
	t.Run("tampered claims", func(t *testing.T) {
		forged := maps.Clone(claims)
		forged["sub"] = "someone-else"
		refused(t, f.v, parts[0]+"."+segment(t, forged)+"."+sig, ErrSignature)
	})
	t.Run("tampered scopes", func(t *testing.T) {
		forged := maps.Clone(claims)
		forged["scp"] = Scopes
		refused(t, f.v, parts[0]+"."+segment(t, forged)+"."+sig, ErrSignature)
	})
	t.Run("unknown kid", func(t *testing.T) {
		h := maps.Clone(header)
		h["kid"] = "no-such-key"
		refused(t, f.v, segment(t, h)+"."+parts[1]+"."+sig, ErrUnknownKey)
	})
	t.Run("malformed", func(t *testing.T) {
		refused(t, f.v, "not-a-jwt", ErrMalformed)
		refused(t, f.v, parts[0]+"."+parts[1], ErrMalformed)
		refused(t, f.v, strings.Repeat("a", MaxTokenBytes+1), ErrMalformed)
		refused(t, f.v, "", ErrMissing)
	})
	t.Run("expired", func(t *testing.T) {
		short := h.CreateClient(t, hydratest.Client{Scopes: Scopes, Audience: []string{audience}, Lifespan: "1s"})
		raw := h.Token(t, short, []string{ScopeRead}, []string{audience})
		_, cl, _ := jwtParts(t, raw)
		if cl["exp"].(float64)-cl["iat"].(float64) != 1 {
			t.Fatalf("Hydra's token lives %v s, want 1", cl["exp"].(float64)-cl["iat"].(float64))
		}
		// Within the 60 s leeway it still verifies; past it, it does not.
		exp := time.Unix(int64(cl["exp"].(float64)), 0)
		g := newFixture(t, h)
		g.clock.set(exp.Add(59 * time.Second))
		if _, err := g.v.Verify(context.Background(), raw); err != nil {
			t.Fatalf("59 s after expiry (leeway 60 s): %v", err)
		}
		g.clock.set(exp.Add(61 * time.Second))
		refused(t, g.v, raw, ErrExpired)
	})
	t.Run("not yet valid", func(t *testing.T) {
		raw := h.Token(t, c, []string{ScopeRead}, []string{audience})
		_, cl, _ := jwtParts(t, raw)
		nbf := time.Unix(int64(cl["nbf"].(float64)), 0)
		g := newFixture(t, h)
		g.clock.set(nbf.Add(-59 * time.Second))
		if _, err := g.v.Verify(context.Background(), raw); err != nil {
			t.Fatalf("59 s before nbf (leeway 60 s): %v", err)
		}
		g.clock.set(nbf.Add(-61 * time.Second))
		refused(t, g.v, raw, ErrNotYetValid)
	})
	t.Run("other issuer", func(t *testing.T) {
		// A second Hydra's token: its key is not the first's.
		other := hydratest.Start(t)
		oc := other.CreateClient(t, hydratest.Client{Scopes: Scopes, Audience: []string{audience}})
		refused(t, f.v, other.Token(t, oc, []string{ScopeRead}, []string{audience}), ErrUnknownKey)
		// The same key, another issuer: the second Hydra signs with the
		// first's key (copied through the admin API), so only iss is wrong.
		var set json.RawMessage
		getJSONT(t, h.AdminURL+"/admin/keys/"+hydratest.AccessTokenSet, &set)
		putJSONT(t, other.AdminURL+"/admin/keys/"+hydratest.AccessTokenSet, set)
		raw := other.Token(t, oc, []string{ScopeRead}, []string{audience})
		oh, _, _ := jwtParts(t, raw)
		if oh["kid"] != header["kid"] {
			t.Fatalf("the second Hydra signs with kid %v, want the first's %v", oh["kid"], header["kid"])
		}
		refused(t, f.v, raw, ErrIssuer)
	})
	t.Run("no leak into the principal", func(t *testing.T) {
		p, _ := f.v.Verify(context.Background(), good)
		if strings.Contains(fmt.Sprintf("%+v", p), sig) {
			t.Fatal("the principal holds the token's signature")
		}
	})
}

func getJSONT(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func putJSONT(t *testing.T, url string, body []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("PUT %s: %d %s", url, resp.StatusCode, b)
	}
}

// TestHydraKeyRotation: a token signed with a new key makes the verifier
// refetch the keys once (concurrent verifications share the fetch); a
// second new key within 10 s is not fetched for, and verifies once the
// 10 s have passed.
func TestHydraKeyRotation(t *testing.T) {
	h := hydratest.Start(t)
	f := newFixture(t, h)
	c := h.CreateClient(t, hydratest.Client{Scopes: Scopes, Audience: []string{audience}})
	first := h.Token(t, c, []string{ScopeRead}, []string{audience})
	if _, err := f.v.Verify(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if n := f.fetch.jwks.Load(); n != 1 {
		t.Fatalf("%d fetches of the keys at start, want 1", n)
	}

	// Hydra orders a set's keys by creation time, in seconds.
	time.Sleep(1100 * time.Millisecond)
	h.RotateKeys(t, "rotated-1", "ES256")
	second := h.Token(t, c, []string{ScopeRead}, []string{audience})
	if hd, _, _ := jwtParts(t, second); hd["kid"] != "rotated-1" || hd["alg"] != "ES256" {
		t.Fatalf("Hydra signs with kid %v (%v) after the rotation, want rotated-1 (ES256)", hd["kid"], hd["alg"])
	}
	f.clock.advance(DefaultMinRefresh) // past the start-up fetch's interval
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.v.Verify(context.Background(), second); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("the new key's token: %v", err)
	}
	if n := f.fetch.jwks.Load(); n != 2 {
		t.Fatalf("%d fetches after one rotation and 16 concurrent verifications, want 2", n)
	}
	// The old key is still published (Hydra keeps both), so old tokens
	// verify without a fetch.
	if _, err := f.v.Verify(context.Background(), first); err != nil {
		t.Fatalf("the old key's token: %v", err)
	}

	time.Sleep(1100 * time.Millisecond)
	h.RotateKeys(t, "rotated-2", "ES256")
	third := h.Token(t, c, []string{ScopeRead}, []string{audience})
	f.clock.advance(DefaultMinRefresh - time.Second) // 9 s after the last fetch
	refused(t, f.v, third, ErrUnknownKey)
	refused(t, f.v, third, ErrUnknownKey)
	if n := f.fetch.jwks.Load(); n != 2 {
		t.Fatalf("%d fetches for a second new key within 10 s, want still 2", n)
	}
	f.clock.advance(time.Second)
	if _, err := f.v.Verify(context.Background(), third); err != nil {
		t.Fatalf("10 s later: %v", err)
	}
	if n := f.fetch.jwks.Load(); n != 3 {
		t.Fatalf("%d fetches, want 3", n)
	}
}

// TestHydraMiddleware: the middleware behind a real HTTP server answers
// 401 and 403 with the exact challenges, passes the principal on, refuses
// a token in the query string, and feeds the go-sdk's RequireBearerToken
// (which binds MCP sessions to the subject) without verifying twice.
func TestHydraMiddleware(t *testing.T) {
	h := hydratest.Start(t)
	f := newFixture(t, h)
	res := Resource{PublicURL: audience, Issuer: f.v.Issuer()}
	g := Guard{Resource: res, Verifier: f.v}
	deny := func(w http.ResponseWriter, r *http.Request, d *Denial) {
		d.SetChallenge(w)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(d.Status)
		json.NewEncoder(w).Encode(map[string]any{"status": d.Status, "code": d.Code, "detail": d.Message})
	}
	scopeOf := func(r *http.Request) string {
		if r.Method == http.MethodPost {
			return ScopeWrite
		}
		return ScopeRead
	}
	var sawInfo atomic.Pointer[auth.TokenInfo]
	mux := http.NewServeMux()
	mux.HandleFunc("/tools/", func(w http.ResponseWriter, r *http.Request) {
		p, _ := FromContext(r.Context())
		io.WriteString(w, p.Subject)
	})
	mux.Handle("/mcp", auth.RequireBearerToken(SDKVerifier, res.SDKOptions())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawInfo.Store(auth.TokenInfoFromContext(r.Context()))
	})))
	srv := httptest.NewServer(g.Middleware(scopeOf, deny)(mux))
	defer srv.Close()

	c := h.CreateClient(t, hydratest.Client{Scopes: Scopes, Audience: DefaultAudiences(audience)})
	reader := h.Token(t, c, []string{ScopeRead}, []string{audience})
	do := func(method, path, token string) (*http.Response, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	const unauthorized = `Bearer resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource"`
	for name, tc := range map[string]struct{ method, path, token string }{
		"no token":    {"GET", "/tools/read", ""},
		"bad token":   {"GET", "/tools/read", "e30.e30.e30"},
		"query token": {"GET", "/tools/read?access_token=" + reader, reader},
		"foreign aud": {"GET", "/tools/read", h.Token(t, c, []string{ScopeRead}, []string{audience + "/other"})},
		"tampered":    {"GET", "/tools/read", strings.Replace(reader, ".", ".x", 1)},
	} {
		resp, body := do(tc.method, tc.path, tc.token)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != unauthorized ||
			body != `{"code":"UNAUTHORIZED","detail":"missing or invalid access token","status":401}`+"\n" {
			t.Errorf("%s: %d %q %s", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	resp, body := do("POST", "/tools/write", reader)
	if resp.StatusCode != 403 || resp.Header.Get("WWW-Authenticate") != `Bearer error="insufficient_scope", scope="toolfs:write"` ||
		body != `{"code":"INSUFFICIENT_SCOPE","detail":"the access token lacks the scope toolfs:write","status":403}`+"\n" {
		t.Errorf("read-only token on a write: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	if resp, body := do("GET", "/tools/read", reader); resp.StatusCode != 200 || body != c.ID {
		t.Errorf("good token: %d %s", resp.StatusCode, body)
	}
	mcpToken := h.Token(t, c, []string{ScopeRead, ScopeWrite}, []string{audience + "/mcp"})
	if resp, body := do("GET", "/mcp", mcpToken); resp.StatusCode != 200 {
		t.Fatalf("/mcp: %d %s", resp.StatusCode, body)
	}
	if info := sawInfo.Load(); info == nil || info.UserID != c.ID || !slices.Equal(info.Scopes, []string{ScopeRead, ScopeWrite}) {
		t.Fatalf("the SDK saw %+v, want UserID %s", info, c.ID)
	}
}
