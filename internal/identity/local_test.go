package identity

// Claims and discovery paths Hydra cannot be made to produce (no exp, no
// sub, no kid, an issuer with a path and RFC 8414 metadata), from a small
// issuer served here. What Hydra can issue is tested against Hydra.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

type localIssuer struct {
	srv    *httptest.Server
	issuer string
	key    *ecdsa.PrivateKey
}

// newLocalIssuer serves RFC 8414 metadata for the issuer <srv>/realms/dev/
// (trailing slash: the spelling tokens carry) at the path-inserted URL
// only, and a JWK Set with one ES256 key "k1" and one encryption key.
func newLocalIssuer(t *testing.T) *localIssuer {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	enc, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	li := &localIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server/realms/dev", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"issuer": li.issuer, "jwks_uri": li.srv.URL + "/keys"})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		var keys []jwkset.JWKMarshal
		for _, k := range []struct {
			key *ecdsa.PrivateKey
			kid string
			use jwkset.USE
		}{{key, "k1", jwkset.UseSig}, {enc, "e1", jwkset.UseEnc}} {
			jwk, err := jwkset.NewJWKFromKey(&k.key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, USE: k.use, ALG: jwkset.AlgES256}})
			if err != nil {
				t.Error(err)
			}
			keys = append(keys, jwk.Marshal())
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	})
	li.srv = httptest.NewServer(mux)
	t.Cleanup(li.srv.Close)
	li.issuer = li.srv.URL + "/realms/dev/"
	return li
}

func (li *localIssuer) sign(t *testing.T, kid string, key *ecdsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocalIssuer(t *testing.T) {
	li := newLocalIssuer(t)
	// Configured without the trailing slash: discovery tolerates it, iss
	// must then be the metadata's spelling.
	v, err := NewVerifier(context.Background(), Options{Issuer: li.srv.URL + "/realms/dev", Audiences: []string{audience}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Issuer() != li.issuer {
		t.Fatalf("issuer %q, want the metadata's %q", v.Issuer(), li.issuer)
	}
	now := time.Now()
	base := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": li.issuer, "sub": "alice", "aud": audience + "/", "exp": now.Add(time.Hour).Unix(),
			"scope": "toolfs:read", "scp": "toolfs:write toolfs:read"}
	}
	p, err := v.Verify(context.Background(), li.sign(t, "k1", li.key, base()))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || len(p.Scopes) != 2 || p.Scopes[0] != ScopeRead || p.Scopes[1] != ScopeWrite {
		t.Fatalf("principal %+v", p)
	}
	// No kid: every signing key is tried.
	if _, err := v.Verify(context.Background(), li.sign(t, "", li.key, base())); err != nil {
		t.Fatalf("a token without kid: %v", err)
	}
	noExp := base()
	delete(noExp, "exp")
	refused(t, v, li.sign(t, "k1", li.key, noExp), ErrMalformed)
	noSub := base()
	delete(noSub, "sub")
	refused(t, v, li.sign(t, "k1", li.key, noSub), ErrNoSubject)
	slashless := base()
	slashless["iss"] = li.srv.URL + "/realms/dev"
	refused(t, v, li.sign(t, "k1", li.key, slashless), ErrIssuer)
	// The encryption key is not a signing key.
	refused(t, v, li.sign(t, "e1", li.key, base()), ErrUnknownKey)
}

// TestDiscoveryRefusals: an issuer whose metadata names another issuer, or
// that has none, stops NewVerifier.
func TestDiscoveryRefusals(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": "https://elsewhere.example.com", "jwks_uri": srv.URL + "/keys"})
	})
	if _, err := NewVerifier(context.Background(), Options{Issuer: srv.URL, Audiences: []string{audience}}); err == nil {
		t.Fatal("metadata naming another issuer accepted")
	}
	if _, err := NewVerifier(context.Background(), Options{Issuer: srv.URL + "/nothing", Audiences: []string{audience}}); err == nil {
		t.Fatal("an issuer without metadata accepted")
	}
	if _, err := NewVerifier(context.Background(), Options{Issuer: "http://auth.example.com", Audiences: []string{audience}}); err == nil {
		t.Fatal("a plain-http issuer off loopback accepted")
	}
	if _, err := NewVerifier(context.Background(), Options{Issuer: srv.URL}); err == nil {
		t.Fatal("no audience accepted")
	}
}
