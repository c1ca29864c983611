package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/console"
	"github.com/toolfs/toolfs-api/internal/hydratest"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// answer is one response, its body read.
type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, method, url string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// The console's security headers, pinned (docs/console.md, "Security").
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// TestConsoleServed: /ui/ and its assets need no token (the page asks for
// it), carry the security headers, and hold no inline script; /ui
// redirects; another path under /ui/ is the API's 404, another method its
// 405; config.json says how to sign in.
func TestConsoleServed(t *testing.T) {
	srv := servertest.Start(t, server.Config{Console: console.Settings{Enabled: true}, Token: "agent-9f", ApproverToken: "person-4c", Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}})
	page := get(t, http.MethodGet, srv.URL+"/ui/", nil)
	require.Equal(t, http.StatusOK, page.status, page.body)
	assert.Equal(t, "text/html; charset=utf-8", page.header.Get("Content-Type"))
	for k, v := range map[string]string{"Content-Security-Policy": csp, "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"} {
		assert.Equal(t, v, page.header.Get(k), k)
	}
	assert.Contains(t, page.body, `<script type="module" src="app.js"></script>`)
	assert.Empty(t, regexp.MustCompile(`<script(\s[^>]*)?>[^<]`).FindAllString(page.body, -1), "no inline script")
	assert.NotContains(t, page.body, " style=", "no inline style")

	for path, ctype := range map[string]string{"app.js": "text/javascript; charset=utf-8", "oauth.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"} {
		a := get(t, http.MethodGet, srv.URL+"/ui/"+path, nil)
		assert.Equal(t, http.StatusOK, a.status, path)
		assert.Equal(t, ctype, a.header.Get("Content-Type"), path)
		assert.Equal(t, csp, a.header.Get("Content-Security-Policy"), path)
		again := get(t, http.MethodGet, srv.URL+"/ui/"+path, map[string]string{"If-None-Match": a.header.Get("ETag")})
		assert.Equal(t, http.StatusNotModified, again.status, path)
	}

	cfg := get(t, http.MethodGet, srv.URL+"/ui/config.json", nil)
	assert.JSONEq(t, `{"auth":"token","approver":true}`, cfg.body)

	redirect := get(t, http.MethodGet, srv.URL+"/ui", nil)
	assert.Equal(t, http.StatusMovedPermanently, redirect.status)
	assert.Equal(t, "/ui/", redirect.header.Get("Location"))

	missing := get(t, http.MethodGet, srv.URL+"/ui/nope.js", nil)
	assert.Equal(t, http.StatusNotFound, missing.status)
	assert.Contains(t, missing.body, `"code":"NOT_FOUND"`)
	post := get(t, http.MethodPost, srv.URL+"/ui/", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, post.status)
	assert.Contains(t, post.body, `"code":"METHOD_NOT_ALLOWED"`)
}

// TestConsoleOff: --ui=false serves nothing at /ui/: the API's 404.
func TestConsoleOff(t *testing.T) {
	srv := servertest.Start(t, server.Config{Console: console.Settings{Enabled: false}, Token: "agent-9f"})
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui"} {
		a := get(t, http.MethodGet, srv.URL+path, map[string]string{"Authorization": "Bearer agent-9f"})
		assert.Equal(t, http.StatusNotFound, a.status, path)
		assert.Contains(t, a.body, `"code":"NOT_FOUND"`, path)
	}
}

// TestConsoleHostCheck: without a token on loopback, the console answers
// only to a loopback Host, as the API does (DNS rebinding).
func TestConsoleHostCheck(t *testing.T) {
	srv := servertest.Start(t, server.Config{Console: console.Settings{Enabled: true}, Addr: "127.0.0.1:0"})
	a := get(t, http.MethodGet, srv.URL+"/ui/", map[string]string{"Host": "evil.example:80"})
	assert.Equal(t, http.StatusForbidden, a.status)
	assert.Contains(t, a.body, `host \"evil.example:80\" is not served`)
	assert.Equal(t, http.StatusOK, get(t, http.MethodGet, srv.URL+"/ui/", map[string]string{"Host": "localhost:80"}).status)
	cfg := get(t, http.MethodGet, srv.URL+"/ui/config.json", nil)
	assert.JSONEq(t, `{"auth":"none","approver":false}`, cfg.body)
}

// TestConsoleCORS: a page of an allowed origin may read the console's
// files as it may read the API; another origin gets no CORS grant.
func TestConsoleCORS(t *testing.T) {
	srv := servertest.Start(t, server.Config{Console: console.Settings{Enabled: true}, Token: "agent-9f", CORSOrigins: "http://allowed.example"})
	ok := get(t, http.MethodGet, srv.URL+"/ui/config.json", map[string]string{"Origin": "http://allowed.example"})
	assert.Equal(t, "http://allowed.example", ok.header.Get("Access-Control-Allow-Origin"))
	other := get(t, http.MethodGet, srv.URL+"/ui/config.json", map[string]string{"Origin": "http://other.example"})
	assert.Empty(t, other.header.Get("Access-Control-Allow-Origin"))
}

// TestStatus: GET /status needs the token and reports the state the
// console's Server screen shows.
func TestStatus(t *testing.T) {
	srv := servertest.Start(t, server.Config{Console: console.Settings{Enabled: true}, Token: "agent-9f", Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"},
		Version: "v9.8.7", Tools: tools.Settings{SandboxMode: "read-only", EditDialect: "apply_patch"}})
	assert.Equal(t, http.StatusUnauthorized, get(t, http.MethodGet, srv.URL+"/status", nil).status)
	a := get(t, http.MethodGet, srv.URL+"/status", map[string]string{"Authorization": "Bearer agent-9f", "X-Session-ID": "s1"})
	require.Equal(t, http.StatusOK, a.status, a.body)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(a.body), &st))
	assert.Equal(t, map[string]any{"version": "v9.8.7", "ready": true, "sessions": float64(1), "profile": "extended",
		"dialect": "apply_patch", "sandbox_mode": "read-only"}, st)
	assert.True(t, strings.HasPrefix(a.header.Get("Content-Type"), "application/json"))
}

// TestConsoleOAuthConfig: with --oauth-issuer the page is told to sign the
// person in at that issuer as --ui-client-id, for --public-url, and the
// policy lets it reach the issuer's origin (the token exchange, the
// sign-in redirect) and nothing more.
func TestConsoleOAuthConfig(t *testing.T) {
	h := hydratest.Start(t)
	srv := servertest.Start(t, server.Config{Console: console.Settings{Enabled: true, ClientID: "console-1"}, Identity: identity.Settings{Issuer: h.Issuer}})
	cfg := get(t, http.MethodGet, srv.URL+"/ui/config.json", nil)
	require.Equal(t, http.StatusOK, cfg.status, cfg.body)
	assert.JSONEq(t, `{"auth":"oauth","approver":false,"issuer":"`+h.Issuer+`","clientId":"console-1",
		"scope":"toolfs:read toolfs:write toolfs:approve","resource":"`+srv.URL+`"}`, cfg.body)
	u, err := url.Parse(h.Issuer)
	require.NoError(t, err)
	origin := "http://" + u.Host
	assert.Equal(t, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self' "+origin+
		"; form-action 'self' "+origin+"; base-uri 'none'; frame-ancestors 'none'", cfg.header.Get("Content-Security-Policy"))
}
