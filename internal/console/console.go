// Package console is the web console at /ui/ (docs/console.md): static
// files embedded in the binary at build time (no CDN, nothing fetched at
// run time) and the small JSON document that tells the page how to sign a
// person in. The page itself talks to the REST API like any client; this
// package serves files and imports nothing of ours.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is served; "/ui" alone redirects to it.
const Prefix = "/ui/"

// Auth is how the page gets the credentials it sends as a bearer token.
type Auth string

// The ways a person signs in (docs/console.md, "Signing in").
const (
	AuthNone  Auth = "none"  // no --token, no --oauth-issuer: nothing to ask
	AuthToken Auth = "token" // --token: asked once, kept in sessionStorage
	AuthOAuth Auth = "oauth" // --oauth-issuer: authorization code with PKCE
)

// Config is what the page needs to know before it can call the API:
// served as /ui/config.json, without any secret.
type Config struct {
	Auth Auth `json:"auth"`
	// Approver says that --approver-token is set, so the page also asks
	// for it: only it decides approvals (docs/sandbox.md).
	Approver bool `json:"approver"`
	// Issuer and ClientID are --oauth-issuer and --ui-client-id; Scope is
	// what the page asks the issuer for; Resource is --public-url, the
	// audience the token must name (RFC 8707).
	Issuer   string `json:"issuer,omitempty"`
	ClientID string `json:"clientId,omitempty"`
	Scope    string `json:"scope,omitempty"`
	Resource string `json:"resource,omitempty"`
}

// file is one embedded asset, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console: GET or HEAD of /ui/ (the page), its assets
// and config.json; /ui redirects to /ui/. An unknown path under /ui/ is
// given to notFound, another method to notAllowed, so they answer as the
// API does. Every answer carries the security headers securityHeaders
// sets.
func Handler(cfg Config, notFound, notAllowed http.Handler) (http.Handler, error) {
	files := map[string]file{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "assets/")
		if name == "index.html" {
			name = ""
		}
		files[name] = newFile(b, typeOf(p))
		return nil
	})
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	files["config.json"] = newFile(doc, "application/json")
	csp := contentSecurityPolicy(cfg.Issuer)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header(), csp)
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				notAllowed.ServeHTTP(w, r)
				return
			}
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		f, ok := files[strings.TrimPrefix(r.URL.Path, Prefix)]
		if !ok || !strings.HasPrefix(r.URL.Path, Prefix) {
			notFound.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			notAllowed.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("ETag", f.etag)
		// Revalidated on each load, so a new binary's page is never
		// mixed with an old script from the cache.
		h.Set("Cache-Control", "no-cache")
		if r.Header.Get("If-None-Match") == f.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		w.Write(f.body)
	}), nil
}

func newFile(b []byte, contentType string) file {
	sum := sha256.Sum256(b)
	return file{body: b, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

func typeOf(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return "application/octet-stream"
}

// contentSecurityPolicy allows the page's own files and the API on its
// own origin, and, with OAuth, the issuer's origin for the token exchange
// and the sign-in redirect; no inline script or style, no frames.
func contentSecurityPolicy(issuer string) string {
	extra := ""
	if u, err := url.Parse(issuer); err == nil && u.Scheme != "" && u.Host != "" {
		extra = " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
		"connect-src 'self'" + extra + "; form-action 'self'" + extra + "; base-uri 'none'; frame-ancestors 'none'"
}

// securityHeaders are the headers every console answer carries
// (docs/console.md, "Security").
func securityHeaders(h http.Header, csp string) {
	h.Set("Content-Security-Policy", csp)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}
