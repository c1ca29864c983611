package server_test

// Identities through the whole server (docs/identity.md): a real Ory Hydra
// issues client-credentials JWTs (internal/hydratest), the server verifies
// them on every route, and each token's subject scopes its sessions,
// approvals, events and changes.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/hydratest"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

const staticToken = "ops-static-token-for-scripts"

// noStaticToken, as a fixture's Token, serves access tokens alone.
const noStaticToken = "-"

// idFixture is a server trusting one Hydra, and Hydra clients: alice and
// bob (two subjects, each allowed every scope but admin; their tokens ask
// for fewer), and admin.
type idFixture struct {
	t     *testing.T
	hydra *hydratest.Server
	srv   *servertest.Server
	alice hydratest.Credentials
	bob   hydratest.Credentials
	admin hydratest.Credentials
}

func newIDFixture(t *testing.T, cfg server.Config) *idFixture {
	t.Helper()
	h := hydratest.Start(t)
	cfg.Identity.Issuer = h.Issuer
	switch cfg.Token {
	case "":
		cfg.Token = staticToken
	case noStaticToken:
		cfg.Token = ""
	}
	cfg.Identity.MinRefresh = 100 * time.Millisecond
	cfg.Policy.Enabled, cfg.Events.Enabled, cfg.Checkpoints.Enabled, cfg.Sessions.Default = true, true, true, "default"
	f := &idFixture{t: t, hydra: h, srv: servertest.Start(t, cfg)}
	aud := []string{f.srv.URL, f.srv.URL + "/mcp"}
	person := []string{"toolfs:read", "toolfs:write", "toolfs:approve"}
	f.alice = h.CreateClient(t, hydratest.Client{Scopes: person, Audience: aud})
	f.bob = h.CreateClient(t, hydratest.Client{Scopes: person, Audience: aud})
	f.admin = h.CreateClient(t, hydratest.Client{Scopes: []string{"toolfs:read", "toolfs:write", "toolfs:approve", "toolfs:admin"}, Audience: aud})
	return f
}

// token is a fresh access token of c for this server with scopes.
func (f *idFixture) token(c hydratest.Credentials, scopes ...string) string {
	return f.hydra.Token(f.t, c, scopes, []string{f.srv.URL})
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) code() string {
	var p struct {
		Code string `json:"code"`
	}
	json.Unmarshal([]byte(a.body), &p)
	return p.Code
}

// do sends one request with token ("" = none) and headers as name, value
// pairs; a body is JSON.
func (f *idFixture) do(method, path, token, body string, headers ...string) answer {
	f.t.Helper()
	if body != "" {
		headers = append([]string{"Content-Type", "application/json"}, headers...)
	}
	return send(f.t, method, f.srv.URL+path, token, body, headers...)
}

// send sends one request to url with token ("" = none) and headers as
// name, value pairs, and reads the whole answer.
func send(t testing.TB, method, url, token, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// reforge rebuilds a token with header fields replaced and a signature
// made by sign (nil: none), keeping its claims.
func reforge(t *testing.T, raw string, header map[string]any, sign func(input string) []byte) string {
	t.Helper()
	parts := strings.Split(raw, ".")
	require.Len(t, parts, 3)
	var h map[string]any
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(hb, &h))
	for k, v := range header {
		h[k] = v
	}
	nb, err := json.Marshal(h)
	require.NoError(t, err)
	input := base64.RawURLEncoding.EncodeToString(nb) + "." + parts[1]
	if sign == nil {
		return input + "."
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sign(input))
}

func TestIdentityRefusals(t *testing.T) {
	f := newIDFixture(t, server.Config{Identity: identity.Settings{Leeway: time.Second}})
	os.WriteFile(filepath.Join(f.srv.Root, "a.txt"), []byte("hello\n"), 0o644)
	unauthorized := `Bearer resource_metadata="` + f.srv.URL + `/.well-known/oauth-protected-resource"`
	read := jsonBody(map[string]any{"file_path": "a.txt"})

	good := f.token(f.alice, "toolfs:read")
	require.Equal(t, 200, f.do("POST", "/tools/read", good, read).status)

	otherAud := f.hydra.CreateClient(t, hydratest.Client{Scopes: []string{"toolfs:read"}, Audience: []string{"https://other.example"}})
	other := hydratest.Start(t)
	foreign := other.CreateClient(t, hydratest.Client{Scopes: []string{"toolfs:read"}, Audience: []string{f.srv.URL}})
	shortLived := f.hydra.CreateClient(t, hydratest.Client{Scopes: []string{"toolfs:read"}, Audience: []string{f.srv.URL}, Lifespan: "1s"})
	expired := f.hydra.Token(t, shortLived, []string{"toolfs:read"}, []string{f.srv.URL})
	var kid string
	{
		hb, _ := base64.RawURLEncoding.DecodeString(strings.Split(good, ".")[0])
		var h map[string]any
		json.Unmarshal(hb, &h)
		kid, _ = h["kid"].(string)
	}
	time.Sleep(3 * time.Second) // past exp + the 1 s leeway of this server

	refused := map[string]struct {
		token   string
		headers []string
		path    string
	}{
		"no token":             {"", nil, "/tools/read"},
		"not a JWT":            {"not-a-jwt", nil, "/tools/read"},
		"wrong audience":       {f.hydra.Token(t, otherAud, []string{"toolfs:read"}, []string{"https://other.example"}), nil, "/tools/read"},
		"another issuer":       {other.Token(t, foreign, []string{"toolfs:read"}, []string{f.srv.URL}), nil, "/tools/read"},
		"expired":              {expired, nil, "/tools/read"},
		"alg none":             {reforge(t, good, map[string]any{"alg": "none"}, nil), nil, "/tools/read"},
		"HS256 with the kid":   {reforge(t, good, map[string]any{"alg": "HS256"}, func(in string) []byte { m := hmac.New(sha256.New, []byte(kid)); m.Write([]byte(in)); return m.Sum(nil) }), nil, "/tools/read"},
		"token in the query":   {"", nil, "/tools/read?access_token=" + good},
		"good one beside it":   {good, nil, "/tools/read?access_token=" + good},
		"wrong static token":   {"ops-static-token-for-scriptz", nil, "/tools/read"},
		"no token on /mcp":     {"", nil, "/mcp"},
		"no token on /events":  {"", nil, "/events"},
		"no token on /files":   {"", nil, "/files"},
		"no token on /metrics": {"", nil, "/metrics"},
	}
	for name, c := range refused {
		t.Run(name, func(t *testing.T) {
			method, body := "POST", read
			if c.path == "/events" || c.path == "/files" || c.path == "/metrics" {
				method, body = "GET", ""
			}
			a := f.do(method, c.path, c.token, body)
			assert.Equal(t, 401, a.status, a.body)
			assert.Equal(t, unauthorized, a.header.Get("WWW-Authenticate"))
			assert.Equal(t, "UNAUTHORIZED", a.code())
			assert.NotContains(t, a.body, good)
		})
	}

	t.Run("scopes", func(t *testing.T) {
		reader := f.token(f.alice, "toolfs:read")
		writer := f.token(f.alice, "toolfs:write")
		insufficient := map[string]struct {
			method, path, token, body, scope string
		}{
			"write with read":    {"POST", "/tools/write", reader, jsonBody(map[string]any{"file_path": "n.txt", "content": "x"}), "toolfs:write"},
			"edit with read":     {"POST", "/tools/edit", reader, jsonBody(map[string]any{"file_path": "a.txt", "old_string": "hello", "new_string": "bye"}), "toolfs:write"},
			"upload with read":   {"PUT", "/files/up.txt", reader, "", "toolfs:write"},
			"revert with read":   {"POST", "/sessions/s/revert", reader, `{"to":0}`, "toolfs:write"},
			"move with read":     {"POST", "/tools/move", reader, jsonBody(map[string]any{"from": "a.txt", "to": "moved.txt"}), "toolfs:write"},
			"delete with read":   {"POST", "/tools/delete", reader, jsonBody(map[string]any{"file_path": "a.txt"}), "toolfs:write"},
			"mkdir with read":    {"POST", "/tools/mkdir", reader, jsonBody(map[string]any{"path": "made"}), "toolfs:write"},
			"read with write":    {"POST", "/tools/read", writer, read, "toolfs:read"},
			"events with write":  {"GET", "/events", writer, "", "toolfs:read"},
			"metrics with write": {"GET", "/metrics", writer, "", "toolfs:read"},
			"decide with read":   {"POST", "/approvals/x", reader, `{"decision":"approve"}`, "toolfs:approve"},
			"catalog with write": {"GET", "/tools", writer, "", "toolfs:read"},
		}
		for name, c := range insufficient {
			t.Run(name, func(t *testing.T) {
				a := f.do(c.method, c.path, c.token, c.body)
				assert.Equal(t, 403, a.status, a.body)
				assert.Equal(t, `Bearer error="insufficient_scope", scope="`+c.scope+`"`, a.header.Get("WWW-Authenticate"))
				assert.Equal(t, "INSUFFICIENT_SCOPE", a.code())
			})
		}
		a := f.do("POST", "/model/edit", reader, jsonBody(map[string]any{"file_path": "a.txt", "old_string": "hello", "new_string": "bye"}))
		assert.Equal(t, 403, a.status)
		assert.Equal(t, "Error: the access token lacks the scope toolfs:write", a.body, "the model view answers the text alone")
		_, err := os.Stat(filepath.Join(f.srv.Root, "n.txt"))
		assert.True(t, os.IsNotExist(err), "a refused write wrote nothing")
		b, _ := os.ReadFile(filepath.Join(f.srv.Root, "a.txt"))
		assert.Equal(t, "hello\n", string(b))
	})

	t.Run("metrics with read", func(t *testing.T) {
		a := f.do("GET", "/metrics", f.token(f.alice, "toolfs:read"), "")
		assert.Equal(t, 200, a.status, a.body)
		assert.Contains(t, a.body, "\ntoolfs_build_info{")
	})

	t.Run("static token beside identities", func(t *testing.T) {
		for _, p := range []string{"/tools", "/metrics", "/approvals"} {
			assert.Equal(t, 200, f.do("GET", p, staticToken, "").status, p)
		}
	})

	t.Run("metadata", func(t *testing.T) {
		for path, resource := range map[string]string{
			"/.well-known/oauth-protected-resource":     f.srv.URL,
			"/.well-known/oauth-protected-resource/mcp": f.srv.URL + "/mcp",
		} {
			a := f.do("GET", path, "", "")
			require.Equal(t, 200, a.status, path)
			assert.JSONEq(t, `{"resource":"`+resource+`","authorization_servers":["`+f.hydra.Issuer+`"],"scopes_supported":["toolfs:read","toolfs:write","toolfs:approve","toolfs:admin"],"bearer_methods_supported":["header"]}`, a.body)
			assert.Equal(t, "*", a.header.Get("Access-Control-Allow-Origin"))
		}
		assert.Equal(t, 200, f.do("GET", "/healthz", "", "").status)
	})

	t.Run("key rotation", func(t *testing.T) {
		time.Sleep(200 * time.Millisecond) // past this server's 100 ms refetch floor
		f.hydra.RotateKeys(t, "rotated-es256", "ES256")
		tok := f.token(f.alice, "toolfs:read")
		hb, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
		require.Contains(t, string(hb), `"kid":"rotated-es256"`, "Hydra signs with the new key")
		assert.Equal(t, 200, f.do("POST", "/tools/read", tok, read).status)
		assert.Equal(t, 200, f.do("POST", "/tools/read", good, read).status, "a token of the old key still verifies")
	})
}

// sse reads server-sent events' data lines into a channel until the
// response ends.
func sse(t *testing.T, f *idFixture, token string) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	ch := make(chan map[string]any, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e map[string]any
				if json.Unmarshal([]byte(d), &e) == nil {
					ch <- e
				}
			}
		}
	}()
	return ch
}

// nextMutation is the next event of ch with diffs (a tool's change).
func nextMutation(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			require.True(t, ok, "the stream ended")
			if _, ok := e["diffs"]; ok || e["type"] == "approval" {
				return e
			}
		case <-timeout:
			t.Fatal("no event within 10s")
		}
	}
}

func TestIdentitySubjectsAreApart(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	f := newIDFixture(t, server.Config{Audit: audit.Settings{Path: auditLog}})
	for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(f.srv.Root, name), []byte("one\n"), 0o644))
	}
	alice := f.token(f.alice, "toolfs:read", "toolfs:write")
	bob := f.token(f.bob, "toolfs:read", "toolfs:write")
	admin := f.token(f.admin, "toolfs:read", "toolfs:admin")
	aliceFeed, bobFeed, adminFeed := sse(t, f, alice), sse(t, f, bob), sse(t, f, admin)
	edit := func(path, from, to string) string {
		return jsonBody(map[string]any{"file_path": path, "old_string": from, "new_string": to})
	}
	read := func(path string) string { return jsonBody(map[string]any{"file_path": path}) }

	// The same session id, and the default session, are two sessions.
	require.Equal(t, 200, f.do("POST", "/tools/read", alice, read("a.txt"), "X-Session-ID", "shared").status)
	a := f.do("POST", "/tools/edit", bob, edit("a.txt", "one", "bob"), "X-Session-ID", "shared")
	assert.Equal(t, 409, a.status, a.body)
	assert.Equal(t, "FS_NOT_OBSERVED", a.code())
	require.Equal(t, 200, f.do("POST", "/tools/read", alice, read("b.txt")).status)
	a = f.do("POST", "/tools/edit", bob, edit("b.txt", "one", "bob"))
	assert.Equal(t, 409, a.status, "bob's default session is not alice's: %s", a.body)
	require.Equal(t, 200, f.do("POST", "/tools/edit", alice, edit("a.txt", "one", "alice"), "X-Session-ID", "shared").status)

	// The change feed: alice sees her edit, bob does not; the admin does.
	e := nextMutation(t, aliceFeed)
	assert.Equal(t, "a.txt", e["path"])
	assert.Equal(t, "shared", e["session"])
	assert.NotContains(t, e, "subject")
	assert.Equal(t, "a.txt", nextMutation(t, adminFeed)["path"])
	require.Equal(t, 200, f.do("POST", "/tools/read", bob, read("c.txt")).status)
	require.Equal(t, 200, f.do("POST", "/tools/edit", bob, edit("c.txt", "one", "bob")).status)
	assert.Equal(t, "c.txt", nextMutation(t, bobFeed)["path"], "bob's first change event is his own")
	assert.Equal(t, "c.txt", nextMutation(t, adminFeed)["path"])
	select {
	case e := <-aliceFeed:
		if _, ok := e["diffs"]; ok {
			t.Fatalf("alice saw bob's change: %v", e)
		}
	case <-time.After(300 * time.Millisecond):
	}

	// Changes: each subject lists its own session's only.
	var changes struct {
		Changes []struct {
			Path string `json:"path"`
		} `json:"changes"`
	}
	a = f.do("GET", "/sessions/shared/changes", alice, "")
	require.Equal(t, 200, a.status, a.body)
	require.NoError(t, json.Unmarshal([]byte(a.body), &changes))
	require.Len(t, changes.Changes, 1)
	assert.Equal(t, "a.txt", changes.Changes[0].Path)
	a = f.do("GET", "/sessions/shared/changes", bob, "")
	require.NoError(t, json.Unmarshal([]byte(a.body), &changes))
	assert.Empty(t, changes.Changes, "bob's session shared has no changes")
	a = f.do("POST", "/sessions/shared/revert", bob, `{"to":0}`)
	require.Equal(t, 200, a.status, a.body)
	body, _ := os.ReadFile(filepath.Join(f.srv.Root, "a.txt"))
	assert.Equal(t, "alice\n", string(body), "bob's revert of his own empty session undid nothing of alice's")

	// bob forgetting his session leaves alice's: she edits again unread.
	require.Equal(t, 204, f.do("DELETE", "/sessions/shared", bob, "").status)
	require.Equal(t, 200, f.do("POST", "/tools/edit", alice, edit("a.txt", "alice", "alice2"), "X-Session-ID", "shared").status)
	require.Equal(t, 204, f.do("DELETE", "/sessions/shared", alice, "").status)
	a = f.do("POST", "/tools/edit", alice, edit("a.txt", "alice2", "alice3"), "X-Session-ID", "shared")
	assert.Equal(t, "FS_NOT_OBSERVED", a.code(), "her own delete forgot it")

	// The audit log names each change's subject (docs/audit.md).
	lines := auditLines(t, auditLog)
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], `"subject":"`+f.alice.ID+`","session":"shared","transport":"rest","tool":"edit","path":"a.txt"`)
	assert.Contains(t, lines[1], `"subject":"`+f.bob.ID+`","session":"default","transport":"rest","tool":"edit","path":"c.txt"`)
	assert.Contains(t, lines[2], `"subject":"`+f.alice.ID+`","session":"shared"`)
}

func TestIdentityApprovals(t *testing.T) {
	f := newIDFixture(t, server.Config{Tools: tools.Settings{SandboxMode: "workspace-write"}})
	require.NoError(t, os.Mkdir(filepath.Join(f.srv.Root, "sub"), 0o755))
	agent := f.token(f.alice, "toolfs:read", "toolfs:write")
	person := f.token(f.alice, "toolfs:approve") // listing needs no scope, deciding this one
	bob := f.token(f.bob, "toolfs:read", "toolfs:approve")
	admin := f.token(f.admin, "toolfs:read", "toolfs:approve", "toolfs:admin")

	done := make(chan answer, 1)
	go func() {
		done <- f.do("POST", "/tools/write", agent, jsonBody(map[string]any{
			"file_path": "../out.txt", "content": "escalated\n",
			"sandbox_permissions": "danger-full-access", "justification": "write beside the folder",
		}), "X-Session-Cwd", "sub")
	}()
	type list struct {
		Approvals []struct {
			ID      string `json:"id"`
			Subject string `json:"subject"`
		} `json:"approvals"`
	}
	var mine list
	deadline := time.Now().Add(10 * time.Second)
	for len(mine.Approvals) == 0 && time.Now().Before(deadline) {
		a := f.do("GET", "/approvals", person, "")
		require.Equal(t, 200, a.status, a.body)
		require.NoError(t, json.Unmarshal([]byte(a.body), &mine))
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, mine.Approvals, 1)
	id := mine.Approvals[0].ID
	assert.Equal(t, f.alice.ID, mine.Approvals[0].Subject)

	var theirs list
	require.NoError(t, json.Unmarshal([]byte(f.do("GET", "/approvals", bob, "").body), &theirs))
	assert.Empty(t, theirs.Approvals, "bob does not see alice's approval")
	a := f.do("GET", "/approvals?wait=300ms", bob, "")
	require.NoError(t, json.Unmarshal([]byte(a.body), &theirs))
	assert.Empty(t, theirs.Approvals)

	approve := `{"decision":"approve"}`
	a = f.do("POST", "/approvals/"+id, agent, approve)
	assert.Equal(t, 403, a.status, "the agent's token cannot approve its own escalation: %s", a.body)
	assert.Equal(t, `Bearer error="insufficient_scope", scope="toolfs:approve"`, a.header.Get("WWW-Authenticate"))
	a = f.do("POST", "/approvals/"+id, bob, approve)
	assert.Equal(t, 404, a.status, "bob cannot decide alice's approval: %s", a.body)
	var all list
	require.NoError(t, json.Unmarshal([]byte(f.do("GET", "/approvals", admin, "").body), &all))
	require.Len(t, all.Approvals, 1, "the admin sees every subject's")
	select {
	case a := <-done:
		t.Fatalf("the call ran before any decision: %d %s", a.status, a.body)
	default:
	}
	a = f.do("POST", "/approvals/"+id, person, approve)
	require.Equal(t, 204, a.status, a.body)
	a = <-done
	require.Equal(t, 200, a.status, a.body)
	b, _ := os.ReadFile(filepath.Join(f.srv.Root, "out.txt"))
	assert.Equal(t, "escalated\n", string(b))
}

// bearer adds a token to every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpClient(t *testing.T, f *idFixture, token, version string) (*sdk.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "identity-test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: f.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func mcpText(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	require.Len(t, res.Content, 1)
	return res.Content[0].(*sdk.TextContent).Text, res.IsError, nil
}

func TestIdentityMCP(t *testing.T) {
	f := newIDFixture(t, server.Config{Token: noStaticToken})
	require.NoError(t, os.WriteFile(filepath.Join(f.srv.Root, "a.txt"), []byte("one\n"), 0o644))
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			alice := f.token(f.alice, "toolfs:read", "toolfs:write")
			bob := f.token(f.bob, "toolfs:read", "toolfs:write")
			ca, err := mcpClient(t, f, alice, version)
			require.NoError(t, err)
			cb, err := mcpClient(t, f, bob, version)
			require.NoError(t, err)
			_, isErr, err := mcpText(t, ca, "read", map[string]any{"file_path": "a.txt"})
			require.NoError(t, err)
			require.False(t, isErr)
			text, isErr, err := mcpText(t, cb, "edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "bob"})
			require.NoError(t, err)
			assert.True(t, isErr)
			assert.Equal(t, `Error: edit requires reading "`+f.srv.Root+`/a.txt" first — read the file, then retry`, text)
			text, isErr, err = mcpText(t, ca, "edit", map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"})
			require.NoError(t, err)
			require.False(t, isErr, text)
			_, _, err = mcpText(t, ca, "edit", map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "one"})
			require.NoError(t, err)
		})
	}

	t.Run("a read-only token cannot write", func(t *testing.T) {
		reader := f.token(f.alice, "toolfs:read")
		cs, err := mcpClient(t, f, reader, "2025-11-25")
		require.NoError(t, err)
		_, isErr, err := mcpText(t, cs, "read", map[string]any{"file_path": "a.txt"})
		require.NoError(t, err)
		assert.False(t, isErr)
		_, _, err = mcpText(t, cs, "write", map[string]any{"file_path": "n.txt", "content": "x"})
		require.Error(t, err, "the HTTP 403 reaches the client")
		_, serr := os.Stat(filepath.Join(f.srv.Root, "n.txt"))
		assert.True(t, os.IsNotExist(serr))
		a := f.do("POST", "/mcp", reader, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","arguments":{"file_path":"n.txt","content":"x"}}}`,
			"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2026-07-28")
		assert.Equal(t, 403, a.status, a.body)
		assert.Equal(t, `Bearer error="insufficient_scope", scope="toolfs:write"`, a.header.Get("WWW-Authenticate"))
	})

	t.Run("an MCP session is its subject's", func(t *testing.T) {
		alice := f.token(f.alice, "toolfs:read", "toolfs:write")
		bob := f.token(f.bob, "toolfs:read", "toolfs:write")
		ca, err := mcpClient(t, f, alice, "2025-11-25")
		require.NoError(t, err)
		a := f.do("POST", "/mcp", bob, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
			"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", ca.ID())
		assert.Equal(t, 403, a.status, "bob cannot speak in alice's MCP session: %s", a.body)
	})

	t.Run("the tool view asks importers for a bearer token", func(t *testing.T) {
		a := f.do("GET", "/openapi.json", f.token(f.alice, "toolfs:read"), "")
		require.Equal(t, 200, a.status, a.body)
		assert.Contains(t, a.body, `"security":[{"bearerAuth":[]}]`)
		assert.Contains(t, a.body, `"securitySchemes":{"bearerAuth":{"type":"http","scheme":"bearer"}}`)
	})

	t.Run("no token", func(t *testing.T) {
		_, err := mcpClient(t, f, "", "2025-11-25")
		require.Error(t, err)
		a := f.do("POST", "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		assert.Equal(t, 401, a.status)
		assert.Equal(t, fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource"`, f.srv.URL), a.header.Get("WWW-Authenticate"))
	})
}

// TestIdentityAcrossReplicas: two servers on one Redis (docs/deployment.md)
// keep subjects apart as one server does: an approval opened on one is
// listed by its subject on the other and by nobody else's, and an edit's
// event reaches its subject's and the admin's subscribers on the other
// replica, not another subject's.
func TestIdentityAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	store := "redis://" + rs.Addr + "/0"
	f := newIDFixture(t, server.Config{Root: root, SessionStore: store, Tools: tools.Settings{SandboxMode: "workspace-write"}})
	cfg2 := server.Config{Root: root, SessionStore: store, Tools: tools.Settings{SandboxMode: "workspace-write"}, Identity: identity.Settings{Issuer: f.hydra.Issuer}, Token: staticToken,
		Policy: policy.Settings{Enabled: true}, Events: events.Settings{Enabled: true}, Checkpoints: checkpoint.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}}
	two := &idFixture{t: t, hydra: f.hydra, srv: servertest.Start(t, cfg2)}
	// Clients whose tokens may name either replica as their audience.
	aud := []string{f.srv.URL, two.srv.URL}
	person := []string{"toolfs:read", "toolfs:write", "toolfs:approve"}
	alice := f.hydra.CreateClient(t, hydratest.Client{Scopes: person, Audience: aud})
	bob := f.hydra.CreateClient(t, hydratest.Client{Scopes: person, Audience: aud})
	admin := f.hydra.CreateClient(t, hydratest.Client{Scopes: append(person, "toolfs:admin"), Audience: aud})
	on := func(fx *idFixture, c hydratest.Credentials, scopes ...string) string {
		return f.hydra.Token(t, c, scopes, []string{fx.srv.URL})
	}

	bobFeed := sse(t, two, on(two, bob, "toolfs:read"))
	adminFeed := sse(t, two, on(two, admin, "toolfs:read", "toolfs:admin"))
	aliceFeed := sse(t, two, on(two, alice, "toolfs:read"))
	agent := on(f, alice, "toolfs:read", "toolfs:write")
	require.Equal(t, 200, f.do("POST", "/tools/read", agent, jsonBody(map[string]any{"file_path": "a.txt"})).status)
	require.Equal(t, 200, f.do("POST", "/tools/edit", agent, jsonBody(map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"})).status)
	assert.Equal(t, "a.txt", nextMutation(t, aliceFeed)["path"])
	assert.Equal(t, "a.txt", nextMutation(t, adminFeed)["path"])
	select {
	case e := <-bobFeed:
		if _, ok := e["diffs"]; ok {
			t.Fatalf("bob saw alice's change on the other replica: %v", e)
		}
	case <-time.After(500 * time.Millisecond):
	}

	done := make(chan answer, 1)
	go func() {
		done <- f.do("POST", "/tools/write", agent, jsonBody(map[string]any{
			"file_path": "../out.txt", "content": "x\n", "sandbox_permissions": "danger-full-access", "justification": "test",
		}), "X-Session-Cwd", "sub")
	}()
	type list struct {
		Approvals []struct{ ID string } `json:"approvals"`
	}
	var mine list
	require.Eventually(t, func() bool {
		a := two.do("GET", "/approvals", on(two, alice, "toolfs:read", "toolfs:approve"), "")
		return json.Unmarshal([]byte(a.body), &mine) == nil && len(mine.Approvals) == 1
	}, 10*time.Second, 50*time.Millisecond)
	var theirs list
	require.NoError(t, json.Unmarshal([]byte(two.do("GET", "/approvals", on(two, bob, "toolfs:read"), "").body), &theirs))
	assert.Empty(t, theirs.Approvals)
	a := two.do("POST", "/approvals/"+mine.Approvals[0].ID, on(two, bob, "toolfs:approve"), `{"decision":"approve"}`)
	assert.Equal(t, 404, a.status, a.body)
	a = two.do("POST", "/approvals/"+mine.Approvals[0].ID, on(two, alice, "toolfs:approve"), `{"decision":"reject"}`)
	require.Equal(t, 204, a.status, a.body)
	assert.Equal(t, 403, (<-done).status)
}

// mcpPost sends one JSON-RPC message to fx's /mcp on 2025-11-25 with
// token in the MCP session id (method "" sends a DELETE, "GET" a GET).
func mcpPost(fx *idFixture, token, id, method, body string) answer {
	fx.t.Helper()
	headers := []string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", id}
	switch method {
	case "":
		return fx.do("DELETE", "/mcp", token, "", headers...)
	case "GET":
		return fx.do("GET", "/mcp", token, "", append(headers, "Accept", "text/event-stream")...)
	}
	return fx.do(method, "/mcp", token, body, headers...)
}

// mcpCall is the text of a tools/call answered 200 in the MCP session id
// on fx, and whether it is an error.
func mcpCall(fx *idFixture, token, id, tool string, args map[string]any) (string, bool) {
	fx.t.Helper()
	a := mcpPost(fx, token, id, "POST", jsonBody(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}}))
	require.Equal(fx.t, 200, a.status, a.body)
	var res struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
	}
	require.NoError(fx.t, json.Unmarshal([]byte(a.body), &res), a.body)
	require.Len(fx.t, res.Result.Content, 1, a.body)
	return res.Result.Content[0].Text, res.Result.IsError
}

// TestIdentityMCPSessionOwner: a leaked Mcp-Session-Id gives another
// subject nothing (docs/identity.md, "MCP sessions"): its GET, POST and
// DELETE in the session are 403 and change nothing, on the replica that
// minted the session and on one that has not served it yet, so the owner
// goes on in the same session, with what it read, on both.
func TestIdentityMCPSessionOwner(t *testing.T) {
	const list = `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	edit := func(from, to string) map[string]any {
		return map[string]any{"file_path": "a.txt", "old_string": from, "new_string": to}
	}
	// thief tries everything in id on fx: each is 403 (a GET with shared
	// sessions is 405 for anyone: no stream is offered), nothing runs.
	thief := func(t *testing.T, fx *idFixture, shared bool, token, id string) {
		t.Helper()
		for _, method := range []string{"POST", "GET", ""} {
			a := mcpPost(fx, token, id, method, list)
			want := 403
			if method == "GET" && shared {
				want = 405
			}
			assert.Equal(t, want, a.status, "%q: %s", method, a.body)
		}
		a := mcpPost(fx, token, id, "POST", jsonBody(map[string]any{"jsonrpc": "2.0", "id": 8, "method": "tools/call",
			"params": map[string]any{"name": "write", "arguments": map[string]any{"file_path": "stolen.txt", "content": "x"}}}))
		assert.Equal(t, 403, a.status, a.body)
		assert.NoFileExists(t, filepath.Join(fx.srv.Root, "stolen.txt"))
	}

	t.Run("one replica", func(t *testing.T) {
		f := newIDFixture(t, server.Config{Token: noStaticToken})
		require.NoError(t, os.WriteFile(filepath.Join(f.srv.Root, "a.txt"), []byte("one\n"), 0o644))
		alice := f.token(f.alice, "toolfs:read", "toolfs:write")
		bob := f.token(f.bob, "toolfs:read", "toolfs:write")
		ca, err := mcpClient(t, f, alice, "2025-11-25")
		require.NoError(t, err)
		_, isErr, err := mcpText(t, ca, "read", map[string]any{"file_path": "a.txt"})
		require.NoError(t, err)
		require.False(t, isErr)
		thief(t, f, false, bob, ca.ID())
		text, isErr, err := mcpText(t, ca, "edit", edit("one", "two"))
		require.NoError(t, err, "alice's session lives on")
		assert.False(t, isErr, "with what she read: %s", text)
	})

	t.Run("two replicas", func(t *testing.T) {
		rs := redistest.Start(t)
		root, err := filepath.EvalSymlinks(t.TempDir())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
		store := "redis://" + rs.Addr + "/0"
		one := newIDFixture(t, server.Config{Root: root, SessionStore: store, Token: noStaticToken})
		two := &idFixture{t: t, hydra: one.hydra, srv: servertest.Start(t, server.Config{Root: root, SessionStore: store,
			Identity: identity.Settings{Issuer: one.hydra.Issuer}, Policy: policy.Settings{Enabled: true}, Checkpoints: checkpoint.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}})}
		three := &idFixture{t: t, hydra: one.hydra, srv: servertest.Start(t, server.Config{Root: root, SessionStore: store,
			Identity: identity.Settings{Issuer: one.hydra.Issuer}, Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}})}
		aud := []string{one.srv.URL, two.srv.URL, three.srv.URL}
		person := []string{"toolfs:read", "toolfs:write"}
		alice := one.hydra.CreateClient(t, hydratest.Client{Scopes: person, Audience: aud})
		bob := one.hydra.CreateClient(t, hydratest.Client{Scopes: person, Audience: aud})
		on := func(fx *idFixture, c hydratest.Credentials) string {
			return one.hydra.Token(t, c, person, []string{fx.srv.URL})
		}
		ca, err := mcpClient(t, one, on(one, alice), "2025-11-25")
		require.NoError(t, err)
		id := ca.ID()
		_, isErr, err := mcpText(t, ca, "read", map[string]any{"file_path": "a.txt"})
		require.NoError(t, err)
		require.False(t, isErr)

		thief(t, two, true, on(two, bob), id) // first on the replica that has not served the session
		text, isErr := mcpCall(two, on(two, alice), id, "edit", edit("one", "two"))
		assert.False(t, isErr, "alice's session on the other replica, with what she read on the first: %s", text)
		thief(t, two, true, on(two, bob), id)
		thief(t, one, true, on(one, bob), id)
		text, isErr, err = mcpText(t, ca, "edit", edit("two", "three"))
		require.NoError(t, err, "alice's session lives on on the first replica")
		assert.False(t, isErr, text)
		text, isErr = mcpCall(two, on(two, alice), id, "edit", edit("three", "four"))
		assert.False(t, isErr, "and on the second: %s", text)
		got, err := os.ReadFile(filepath.Join(root, "a.txt"))
		require.NoError(t, err)
		assert.Equal(t, "four\n", string(got))

		// While Redis is down, a replica that does not hold the session
		// cannot tell whose it is: 503 to anyone (the client keeps its
		// session); the one that holds it serves its owner. Redis back
		// empty: the owner's next request there shares the session again,
		// with its owner.
		aliceThree, bobThree := one.hydra.Token(t, alice, person, []string{three.srv.URL}), one.hydra.Token(t, bob, person, []string{three.srv.URL})
		rs.Stop()
		for _, token := range []string{aliceThree, bobThree} {
			a := mcpPost(three, token, id, "POST", list)
			assert.Equal(t, 503, a.status, a.body)
		}
		_, isErr, err = mcpText(t, ca, "read", map[string]any{"file_path": "a.txt"})
		require.NoError(t, err, "the replica that holds the session serves it")
		assert.False(t, isErr)
		require.NoError(t, rs.Start())
		_, _, err = mcpText(t, ca, "read", map[string]any{"file_path": "a.txt"})
		require.NoError(t, err)
		thief(t, three, true, bobThree, id)
		assert.Equal(t, 200, mcpPost(three, aliceThree, id, "POST", list).status)
	})
}

// TestIdentityMCPScopeReadsTheBodyAsTheSDK: the write-scope challenge on
// /mcp is decided from the body as the SDK will read it (keys matched
// case-sensitively, escapes applied, what follows the first value
// ignored), and a body it cannot read unambiguously (a deciding key given
// twice or written with escapes) needs the write scope: each is 403 with
// the step-up challenge before anything runs, alone and in a batch, where
// encoding/json's reading had let them through to the tool's own refusal
// (a 200). A read-only token still lists and reads.
func TestIdentityMCPScopeReadsTheBodyAsTheSDK(t *testing.T) {
	f := newIDFixture(t, server.Config{Token: noStaticToken})
	require.NoError(t, os.WriteFile(filepath.Join(f.srv.Root, "a.txt"), []byte("one\n"), 0o644))
	reader := f.token(f.alice, "toolfs:read")
	const args = `"arguments":{"file_path":"n.txt","content":"x"}`
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `}}`
	}
	refused := map[string]string{
		"a case variant of name":   call(`"name":"write","Name":"read",` + args),
		"a case variant of method": `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"tools/list","params":{"name":"write",` + args + `}}`,
		"name twice":               call(`"name":"write",` + args + `,"name":"read"`),
		"method twice":             `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write",` + args + `},"method":"tools/list"}`,
		"params twice":             `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write",` + args + `},"params":{"name":"read"}}`,
		"an escaped key":           call(`"n\u0061me":"write","Name":"read",` + args),
		"an escaped name":          call(`"name":"wr\u0069te",` + args),
		"data after the message":   call(`"name":"write",`+args) + ` {}`,
	}
	challenge := `Bearer error="insufficient_scope", scope="toolfs:write"`
	mcpHeaders := func(version, session string) []string {
		h := []string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", version}
		if session != "" {
			h = append(h, "Mcp-Session-Id", session)
		}
		if version >= "2026-07-28" { // the headers that revision requires, naming what the SDK reads
			h = append(h, "Mcp-Method", "tools/call", "Mcp-Name", "write")
		}
		return h
	}
	check := func(t *testing.T, a answer) {
		t.Helper()
		assert.Equal(t, 403, a.status, a.body)
		assert.Equal(t, challenge, a.header.Get("WWW-Authenticate"))
		assert.Equal(t, "INSUFFICIENT_SCOPE", a.code(), a.body)
		assert.NoFileExists(t, filepath.Join(f.srv.Root, "n.txt"))
	}

	// A session of the read-only token on 2025-03-26, whose batches the SDK
	// still takes.
	a := f.do("POST", "/mcp", reader, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		"Accept", "application/json, text/event-stream")
	require.Equal(t, 200, a.status, a.body)
	session := a.header.Get("Mcp-Session-Id")
	require.NotEmpty(t, session)
	a = f.do("POST", "/mcp", reader, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, mcpHeaders("2025-03-26", session)...)
	require.Equal(t, 202, a.status, a.body)

	for name, body := range refused {
		t.Run(name, func(t *testing.T) {
			check(t, f.do("POST", "/mcp", reader, body, mcpHeaders("2026-07-28", "")...))
			check(t, f.do("POST", "/mcp", reader, body, mcpHeaders("2025-03-26", session)...))
			if !strings.HasSuffix(body, " {}") {
				batch := `[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a.txt"}}},` + body + `]`
				check(t, f.do("POST", "/mcp", reader, batch, mcpHeaders("2025-03-26", session)...))
			}
		})
	}

	t.Run("a read-only token lists and reads", func(t *testing.T) {
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			call(`"name":"read","Name":"write","arguments":{"file_path":"a.txt"}`),
			`[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a.txt"}}},{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`,
		} {
			a := f.do("POST", "/mcp", reader, body, mcpHeaders("2025-03-26", session)...)
			assert.Equal(t, 200, a.status, a.body)
			assert.NotContains(t, a.body, `"isError":true`)
		}
	})
}

// TestIdentityMetricsToken: with identities, a scraper reads /metrics with
// a toolfs:read access token, the static --token, or --metrics-token; the
// metrics token opens no other route (401 with the challenge, as any
// token the server does not accept).
func TestIdentityMetricsToken(t *testing.T) {
	const scrape = "scrape-token-for-prometheus"
	f := newIDFixture(t, server.Config{MetricsToken: scrape})
	for name, tok := range map[string]string{
		"read token":    f.token(f.bob, "toolfs:read"),
		"static token":  staticToken,
		"metrics token": scrape,
	} {
		a := f.do("GET", "/metrics", tok, "")
		assert.Equal(t, 200, a.status, "%s: %s", name, a.body)
		assert.Contains(t, a.body, "\ntoolfs_build_info{", name)
	}
	a := f.do("GET", "/metrics", f.token(f.bob, "toolfs:write"), "")
	assert.Equal(t, 403, a.status)
	assert.Equal(t, `Bearer error="insufficient_scope", scope="toolfs:read"`, a.header.Get("WWW-Authenticate"))

	unauthorized := `Bearer resource_metadata="` + f.srv.URL + `/.well-known/oauth-protected-resource"`
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/tools/read", `{"file_path":"a.txt"}`},
		{"GET", "/tools", ""},
		{"GET", "/events", ""},
		{"GET", "/files", ""},
		{"GET", "/approvals", ""},
		{"DELETE", "/sessions/default", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	} {
		a := f.do(r.method, r.path, scrape, r.body)
		assert.Equal(t, 401, a.status, "%s %s: %s", r.method, r.path, a.body)
		assert.Equal(t, unauthorized, a.header.Get("WWW-Authenticate"), r.path)
	}
}
