package server_test

// Sessions and requests nobody authenticated (docs/identity.md, "Requests
// nobody authenticated never touch a session"; docs/api.md, "Sessions"): the unauthenticated
// routes (/healthz, /readyz, the metadata documents, CORS preflights) and
// the requests auth refuses (401, 403) never create, touch or evict a
// session, so an anonymous client cannot wipe the agents' read state by
// filling the store past --max-sessions.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// floodSessions is more sessions than the store holds (--max-sessions).
const (
	floodMaxSessions = 300
	floodSessions    = 310
)

// flood sends floodSessions requests of each kind nobody authenticated,
// each naming a new session, and checks each was answered as it must be.
func flood(t *testing.T, url string, kinds map[string]floodKind) {
	t.Helper()
	for name, k := range kinds {
		for i := range floodSessions {
			headers := append([]string{"X-Session-ID", fmt.Sprintf("%s-%d", strings.ReplaceAll(name, " ", "-"), i)}, k.headers...)
			a := send(t, k.method, url+k.path, k.token, k.body, headers...)
			if a.status != k.status {
				t.Fatalf("%s #%d: %d %s, want %d", name, i, a.status, a.body, k.status)
			}
		}
	}
}

type floodKind struct {
	method, path, token, body string
	headers                   []string
	status                    int
}

// anonymousKinds are the requests of a client without a credential, on a
// server with --token or --oauth-issuer.
func anonymousKinds(read string) map[string]floodKind {
	preflight := []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}
	return map[string]floodKind{
		"healthz":         {method: "GET", path: "/healthz", status: 200},
		"readyz":          {method: "GET", path: "/readyz", status: 200},
		"preflight":       {method: "OPTIONS", path: "/tools/read", headers: preflight, status: 405},
		"preflight files": {method: "OPTIONS", path: "/files/a.txt", headers: preflight, status: 405},
		"no token":        {method: "POST", path: "/tools/read", body: read, headers: []string{"Content-Type", "application/json"}, status: 401},
		"wrong token":     {method: "POST", path: "/tools/read", token: "not-the-token", body: read, headers: []string{"Content-Type", "application/json"}, status: 401},
		"no token files":  {method: "GET", path: "/files", status: 401},
		"no token mcp":    {method: "POST", path: "/mcp", body: `{}`, status: 401},
	}
}

// agentSurvives: an agent reads, the flood runs, and the agent's edit
// still finds its read (no eviction), with no session created meanwhile.
func agentSurvives(t *testing.T, url, token string, flooding func()) {
	t.Helper()
	read := jsonBody(map[string]any{"file_path": "a.txt"})
	a := send(t, "POST", url+"/tools/read", token, read, "Content-Type", "application/json", "X-Session-ID", "agent")
	require.Equal(t, 200, a.status, a.body)
	before := sessionsGauge(t, url, token)
	flooding()
	assert.Equal(t, before, sessionsGauge(t, url, token), "the flood created no session")
	edit := jsonBody(map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"})
	a = send(t, "POST", url+"/tools/edit", token, edit, "Content-Type", "application/json", "X-Session-ID", "agent")
	assert.Equal(t, 200, a.status, "the agent's read survived the flood: %s", a.body)
}

// sessionsGauge is toolfs_sessions as GET /metrics reports it.
func sessionsGauge(t *testing.T, url, token string) int {
	t.Helper()
	a := send(t, "GET", url+"/metrics", token, "")
	require.Equal(t, 200, a.status, a.body)
	for line := range strings.SplitSeq(a.body, "\n") {
		if v, ok := strings.CutPrefix(line, "toolfs_sessions "); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return int(n)
		}
	}
	t.Fatal("no toolfs_sessions in /metrics")
	return 0
}

func TestAnonymousRequestsKeepSessions(t *testing.T) {
	read := jsonBody(map[string]any{"file_path": "a.txt"})
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			cfg := server.Config{Token: staticToken, Policy: policy.Settings{Enabled: true, MaxSessions: floodMaxSessions}, Sessions: tools.SessionSettings{Default: "default"}}
			if store == "redis" {
				cfg.SessionStore = "redis://" + redistest.Start(t).Addr + "/0"
			}
			srv := servertest.Start(t, cfg)
			require.NoError(t, os.WriteFile(filepath.Join(srv.Root, "a.txt"), []byte("one\n"), 0o644))
			agentSurvives(t, srv.URL, staticToken, func() { flood(t, srv.URL, anonymousKinds(read)) })
		})
	}
}

func TestAnonymousRequestsKeepSessionsWithIdentities(t *testing.T) {
	read := jsonBody(map[string]any{"file_path": "a.txt"})
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			cfg := server.Config{Policy: policy.Settings{MaxSessions: floodMaxSessions}}
			if store == "redis" {
				cfg.SessionStore = "redis://" + redistest.Start(t).Addr + "/0"
			}
			f := newIDFixture(t, cfg)
			require.NoError(t, os.WriteFile(filepath.Join(f.srv.Root, "a.txt"), []byte("one\n"), 0o644))
			agent := f.token(f.admin, "toolfs:read", "toolfs:write", "toolfs:admin")
			reader := f.token(f.bob, "toolfs:read")
			writer := f.token(f.bob, "toolfs:write")
			kinds := anonymousKinds(read)
			kinds["metadata"] = floodKind{method: "GET", path: "/.well-known/oauth-protected-resource", status: 200}
			kinds["metadata mcp"] = floodKind{method: "GET", path: "/.well-known/oauth-protected-resource/mcp", status: 200}
			kinds["metadata preflight"] = floodKind{method: "OPTIONS", path: "/.well-known/oauth-protected-resource",
				headers: []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "GET"}, status: 204}
			kinds["write with read"] = floodKind{method: "POST", path: "/tools/write", token: reader,
				body: jsonBody(map[string]any{"file_path": "n.txt", "content": "x"}), headers: []string{"Content-Type", "application/json"}, status: 403}
			kinds["metrics with write"] = floodKind{method: "GET", path: "/metrics", token: writer, status: 403}
			kinds["mcp write with read"] = floodKind{method: "POST", path: "/mcp", token: reader,
				body:    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","arguments":{"file_path":"n.txt","content":"x"}}}`,
				headers: []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}, status: 403}
			// The agent names its session in the same way as the flood;
			// the agent's token reads the gauge.
			agentSurvives(t, f.srv.URL, agent, func() { flood(t, f.srv.URL, kinds) })
		})
	}
}

// TestAdminNamesSubject: ?subject= on the sessions routes
// (docs/identity.md, "An admin reaches another subject's session"). A
// token without toolfs:admin naming another subject is 403 and touches
// nothing; naming its own is fine; the admin lists, reverts and forgets
// alice's session, the revert reaching alice's feed and the audit line
// naming both who acted and whose session it was.
func TestAdminNamesSubject(t *testing.T) {
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	f := newIDFixture(t, server.Config{Audit: audit.Settings{Path: auditLog}})
	require.NoError(t, os.WriteFile(filepath.Join(f.srv.Root, "a.txt"), []byte("one\n"), 0o644))
	alice := f.token(f.alice, "toolfs:read", "toolfs:write")
	bob := f.token(f.bob, "toolfs:read", "toolfs:write")
	admin := f.token(f.admin, "toolfs:read", "toolfs:write", "toolfs:admin")
	aliceFeed := sse(t, f, alice)
	session := []string{"X-Session-ID", "s1"}
	require.Equal(t, 200, f.do("POST", "/tools/read", alice, jsonBody(map[string]any{"file_path": "a.txt"}), session...).status)
	require.Equal(t, 200, f.do("POST", "/tools/edit", alice, jsonBody(map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "two"}), session...).status)
	nextMutation(t, aliceFeed)
	ofAlice := "?subject=" + f.alice.ID
	changes := func(token, query string) []string {
		t.Helper()
		a := f.do("GET", "/sessions/s1/changes"+query, token, "")
		require.Equal(t, 200, a.status, a.body)
		var res struct {
			Changes []struct{ Tool, Path string } `json:"changes"`
		}
		require.NoError(t, json.Unmarshal([]byte(a.body), &res))
		var out []string
		for _, c := range res.Changes {
			out = append(out, c.Tool+" "+c.Path)
		}
		return out
	}

	t.Run("another subject without admin", func(t *testing.T) {
		before := sessionsGauge(t, f.srv.URL, staticToken)
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/sessions/s1/changes" + ofAlice, ""},
			{"POST", "/sessions/s1/revert" + ofAlice, `{"to":0}`},
			{"DELETE", "/sessions/s1" + ofAlice, ""},
		} {
			a := f.do(c.method, c.path, bob, c.body, "X-Session-ID", "bob-new")
			assert.Equal(t, 403, a.status, "%s %s: %s", c.method, c.path, a.body)
			assert.Equal(t, "INSUFFICIENT_SCOPE", a.code())
			assert.Equal(t, `Bearer error="insufficient_scope", scope="toolfs:admin"`, a.header.Get("WWW-Authenticate"))
			assert.Contains(t, a.body, `"detail":"the access token lacks the scope toolfs:admin: only an admin reaches another subject's session (subject=)"`)
		}
		assert.Equal(t, before, sessionsGauge(t, f.srv.URL, staticToken), "a refused request touched no session")
		assert.Equal(t, []string{"edit a.txt"}, changes(alice, ""), "alice's history is untouched")
		b, _ := os.ReadFile(filepath.Join(f.srv.Root, "a.txt"))
		assert.Equal(t, "two\n", string(b))
	})

	t.Run("its own subject", func(t *testing.T) {
		assert.Equal(t, []string{"edit a.txt"}, changes(alice, ofAlice))
		assert.Empty(t, changes(bob, "?subject="+f.bob.ID), "bob's own session s1 has no changes")
		assert.Equal(t, []string{"edit a.txt"}, changes(alice, "?subject="), "an empty subject is the caller's own")
	})

	t.Run("admin", func(t *testing.T) {
		assert.Empty(t, changes(admin, ""), "without subject, the admin's own session s1")
		assert.Equal(t, []string{"edit a.txt"}, changes(admin, ofAlice))
		assert.Equal(t, []string{"edit a.txt"}, changes(staticToken, ofAlice), "the static token is an admin")

		a := f.do("POST", "/sessions/s1/revert"+ofAlice, admin, `{"to":0}`)
		require.Equal(t, 200, a.status, a.body)
		b, _ := os.ReadFile(filepath.Join(f.srv.Root, "a.txt"))
		assert.Equal(t, "one\n", string(b))
		e := nextMutation(t, aliceFeed)
		assert.Equal(t, "revert", e["type"], "alice's feed shows the revert of her session")
		assert.Equal(t, "s1", e["session"])
		assert.Equal(t, []string{"revert a.txt", "edit a.txt"}, changes(alice, ""))

		lines := auditLines(t, auditLog)
		require.Len(t, lines, 2)
		assert.Contains(t, lines[1], `"subject":"`+f.admin.ID+`","session":"s1","session_subject":"`+f.alice.ID+`","transport":"rest","tool":"revert","path":"a.txt"`)
		assert.NotContains(t, lines[0], "session_subject", "alice's own edit names no other subject")

		require.Equal(t, 204, f.do("DELETE", "/sessions/s1"+ofAlice, admin, "").status)
		assert.Empty(t, changes(alice, ""), "the admin forgot alice's session")
		a = f.do("POST", "/tools/edit", alice, jsonBody(map[string]any{"file_path": "a.txt", "old_string": "one", "new_string": "three"}), session...)
		assert.Equal(t, "FS_NOT_OBSERVED", a.code(), "her observations went with it: %s", a.body)
	})

	t.Run("malformed", func(t *testing.T) {
		a := f.do("GET", "/sessions/s1/changes?subject=a&subject=b", admin, "")
		assert.Equal(t, 400, a.status)
		assert.Contains(t, a.body, `"detail":"give subject at most once"`)
		a = f.do("GET", "/sessions/s1/changes?subject="+strings.Repeat("x", 1025), admin, "")
		assert.Equal(t, 400, a.status)
		assert.Contains(t, a.body, `"detail":"subject must be at most 1024 bytes"`)
	})
}

// TestSubjectWithoutIdentities: a server that verifies no access token has
// no subjects to name.
func TestSubjectWithoutIdentities(t *testing.T) {
	srv := servertest.Start(t, server.Config{Token: staticToken, Policy: policy.Settings{Enabled: true}, Checkpoints: checkpoint.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}})
	a := send(t, "GET", srv.URL+"/sessions/s1/changes?subject=alice", staticToken, "")
	assert.Equal(t, 400, a.status)
	assert.Equal(t, "INVALID_ARGUMENT", a.code())
	assert.Contains(t, a.body, `"detail":"subject names the subject of an access token, and this server verifies none (no --oauth-issuer): omit it"`)
	assert.Equal(t, 200, send(t, "GET", srv.URL+"/sessions/s1/changes?subject=", staticToken, "").status, "an empty subject counts as absent")
}
