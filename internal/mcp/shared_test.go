package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// spread is a client transport that sends each request to the next of
// several replicas (round robin, as nginx does), or only to the ones left
// once others are "dead"; it records the Mcp-Session-Id of every answer.
type spread struct {
	mu    sync.Mutex
	bases []string
	dead  map[int]bool
	n     int
	ids   map[string]int
	codes []int
}

func (s *spread) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	i := s.n % len(s.bases)
	for s.dead[i] {
		s.n++
		i = s.n % len(s.bases)
	}
	s.n++
	base := s.bases[i]
	s.mu.Unlock()
	u, _ := url.Parse(base)
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = u.Host, u.Host
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		s.mu.Lock()
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			s.ids[id]++
		}
		s.codes = append(s.codes, resp.StatusCode)
		s.mu.Unlock()
	}
	return resp, err
}

// replicas starts n servers on one root sharing one Redis.
func replicas(t *testing.T, n int) ([]*servertest.Server, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	var out []*servertest.Server
	for range n {
		out = append(out, servertest.Start(t, server.Config{
			Root: root, Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100}, SessionStore: rs.URL(3),
			MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
		}))
	}
	return out, rs
}

// TestSessionAcrossReplicas: an MCP session of a revision with sessions,
// its requests spread over two replicas sharing Redis, reads on one and
// edits on the other in one policy session, goes on on the survivor when
// the other is gone (without initializing again), and once its client ends
// it (DELETE) no replica knows it.
func TestSessionAcrossReplicas(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			reps, rs := replicas(t, 2)
			require.NoError(t, os.WriteFile(filepath.Join(reps[0].Root, "a.txt"), []byte("n: 0\n"), 0o644))
			tr := &spread{bases: []string{reps[0].URL, reps[1].URL}, dead: map[int]bool{}, ids: map[string]int{}}
			c := sdk.NewClient(&sdk.Implementation{Name: "replicas", Version: "v0"}, nil)
			ctx := context.Background()
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: reps[0].URL + "/mcp", HTTPClient: &http.Client{Transport: tr}}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			require.NoError(t, err)
			id := cs.ID()
			require.NotEmpty(t, id)

			call := func(tool string, args map[string]any) string {
				t.Helper()
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
				require.NoError(t, err)
				text := res.Content[0].(*sdk.TextContent).Text
				require.False(t, res.IsError, text)
				return text
			}
			edit := func(k int) {
				call("edit", map[string]any{"file_path": "a.txt", "old_string": fmt.Sprintf("n: %d", k), "new_string": fmt.Sprintf("n: %d", k+1)})
			}
			// One read, then edits alternate replicas: each is allowed only
			// because every replica derives the same policy session.
			assert.Contains(t, call("read", map[string]any{"file_path": "a.txt"}), "n: 0")
			for k := range 6 {
				edit(k)
			}
			// And read, then edit, each on the other replica; an external
			// change between them each time (a new version to read).
			for k := 6; k < 12; k++ {
				b, err := os.ReadFile(filepath.Join(reps[0].Root, "a.txt"))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(reps[0].Root, "a.txt"), append(b, "x\n"...), 0o644))
				call("read", map[string]any{"file_path": "a.txt"})
				edit(k)
			}
			tr.mu.Lock()
			tr.dead[0] = true // replica 0 is gone: everything reaches replica 1
			tr.mu.Unlock()
			require.NoError(t, reps[0].Shutdown(ctx))
			for k := 12; k < 16; k++ {
				edit(k)
			}
			b, err := os.ReadFile(filepath.Join(reps[0].Root, "a.txt"))
			require.NoError(t, err)
			assert.Equal(t, "n: 16\n"+strings.Repeat("x\n", 6), string(b))
			assert.Equal(t, id, cs.ID(), "the same MCP session, never initialized again")
			tr.mu.Lock()
			assert.Len(t, tr.ids, 1, "every answer named the client's session: %v", tr.ids)
			assert.NotContains(t, tr.codes, 404)
			tr.mu.Unlock()

			// In Redis: one key, expiring, small.
			rc := redis.NewClient(&redis.Options{Addr: rs.Addr, DB: 3})
			defer rc.Close()
			keys, err := rc.Keys(ctx, "toolfs:mcp:*").Result()
			require.NoError(t, err)
			require.Len(t, keys, 1)
			ttl, err := rc.TTL(ctx, keys[0]).Result()
			require.NoError(t, err)
			assert.Greater(t, ttl, 59*time.Minute)
			v, err := rc.Get(ctx, keys[0]).Result()
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(v, `1{"_meta":{"toolfs/owner":""},"capabilities"`), "no subject without identities: %s", v)
			mem, err := rc.MemoryUsage(ctx, keys[0]).Result()
			require.NoError(t, err)
			t.Logf("Redis: %d bytes of value, MEMORY USAGE %d bytes for one MCP session", len(v), mem)

			require.NoError(t, cs.Close()) // DELETE
			for _, base := range []string{reps[1].URL} {
				status, _, _ := rawMCP(t, base, id, version)
				assert.Equal(t, 404, status, "an ended session is unknown on every replica")
			}
		})
	}
}

// TestSessionEndedOnAnotherReplica: a DELETE on one replica ends the
// session on the replica that minted it too; an id no replica minted is
// 404 everywhere.
func TestSessionEndedOnAnotherReplica(t *testing.T) {
	reps, _ := replicas(t, 2)
	status, id, body := rawInit(t, reps[0].URL)
	require.Equal(t, 200, status, body)
	status, _, body = rawMCP(t, reps[1].URL, id, "2025-11-25")
	require.Equal(t, 200, status, body)
	status, _, _ = rawMCP(t, reps[0].URL, "NOTMINTEDBYANYREPLICA", "2025-11-25")
	assert.Equal(t, 404, status)
	req, err := http.NewRequest(http.MethodDelete, reps[1].URL+"/mcp", nil)
	require.NoError(t, err)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 204, resp.StatusCode)
	for _, r := range reps {
		status, _, _ = rawMCP(t, r.URL, id, "2025-11-25")
		assert.Equal(t, 404, status)
	}
}

// TestSharedSessionsRedisDown: while Redis is down, a replica that holds
// the session serves it and one that does not adopts it unchecked (no
// client loses its session to the outage). A Redis that came back empty
// learns the session again from the next request on a replica that holds
// it.
func TestSharedSessionsRedisDown(t *testing.T) {
	for _, persisted := range []bool{true, false} {
		t.Run(fmt.Sprintf("persisted=%v", persisted), func(t *testing.T) {
			reps, rs := replicas(t, 2)
			status, id, body := rawInit(t, reps[0].URL)
			require.Equal(t, 200, status, body)
			if persisted {
				rc := redis.NewClient(&redis.Options{Addr: rs.Addr})
				require.NoError(t, rc.Save(context.Background()).Err())
				rc.Close()
			}
			rs.Stop()
			status, _, body = rawMCP(t, reps[0].URL, id, "2025-11-25")
			assert.Equal(t, 200, status, body)
			status, _, body = rawMCP(t, reps[1].URL, id, "2025-11-25")
			assert.Equal(t, 200, status, body)
			require.NoError(t, rs.Start())
			if !persisted {
				require.Eventually(t, func() bool {
					status, _, _ = rawMCP(t, reps[0].URL, id, "2025-11-25")
					return status == 200
				}, 10*time.Second, 100*time.Millisecond)
			}
			require.Eventually(t, func() bool {
				status, _, _ = rawMCP(t, reps[1].URL, id, "2025-11-25")
				return status == 200
			}, 10*time.Second, 100*time.Millisecond)
		})
	}
}

func rawInit(t testing.TB, base string) (int, string, string) {
	t.Helper()
	return post(t, base, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
}

// rawMCP sends a tools/list in the session.
func rawMCP(t testing.TB, base, id, version string) (int, string, string) {
	t.Helper()
	return post(t, base, id, version, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
}

func post(t testing.TB, base, id, version, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b.String()
}
