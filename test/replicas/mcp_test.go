package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// MCP clients of the load: mcpClientsN official Go SDK clients through
// nginx, half on a revision with protocol sessions (their policy session is
// the one derived from their Mcp-Session-Id, on whichever replica a call
// lands) and half on the sessionless 2026-07-28 (their policy session is
// their X-Session-ID). Each increments its own line of a file shared with
// seven others, as the REST sessions do.
const (
	mcpClientsN    = 16
	mcpSessionful  = "2025-11-25"
	mcpSessionless = "2026-07-28"
	firstMCPLine   = sessionsN // their lines are sNN after the REST sessions'
	mcpCallTimeout = 30 * time.Second
)

type mcpStats struct {
	calls, edits, stale, crossReplica, transportErrors, storeUnavailable, missing atomic.Int64
}

// upstreams is a client's HTTP transport: it adds the token (and the
// session header of a sessionless client) and remembers which replica
// answered its last POST (nginx's X-Toolfs-Upstream).
type upstreams struct {
	header http.Header
	last   atomic.Value // string
	base   http.RoundTripper
}

func (u *upstreams) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range u.header {
		req.Header[k] = v
	}
	resp, err := u.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost {
		u.last.Store(resp.Header.Get("X-Toolfs-Upstream"))
	}
	return resp, err
}

func (u *upstreams) upstream() string {
	s, _ := u.last.Load().(string)
	return s
}

type mcpClient struct {
	*session
	version            string
	cs                 *sdk.ClientSession
	tr                 *upstreams
	mcpID              string // the Mcp-Session-Id it started with ("" when sessionless)
	reads, stale, errs int
	readTime           time.Duration
	lastErr            string
}

// mcpFiles writes the MCP clients' files and returns their sessions.
func mcpFiles(t *testing.T, root string) []*session {
	t.Helper()
	var out []*session
	for f := range mcpClientsN / perFile {
		var b strings.Builder
		for i := range perFile {
			n := firstMCPLine + f*perFile + i
			out = append(out, &session{id: fmt.Sprintf("mcp-%02d", n), file: fmt.Sprintf("m%d.txt", f), line: fmt.Sprintf("s%02d", n)})
			fmt.Fprintf(&b, "s%02d: 0\n", n)
		}
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("m%d.txt", f)), []byte(b.String()), 0o644))
	}
	return out
}

// connectMCP connects one official SDK client through base (nginx).
func connectMCP(t *testing.T, base string, s *session, version string) *mcpClient {
	t.Helper()
	tr := &upstreams{header: http.Header{"Authorization": {"Bearer " + token}}, base: client.Transport}
	if version >= mcpSessionless {
		tr.header.Set("X-Session-ID", s.id)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "replicas-" + s.id, Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: tr},
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err, "%s: connect", s.id)
	t.Cleanup(func() { cs.Close() })
	if version < mcpSessionless {
		require.NotEmpty(t, cs.ID(), "%s: a revision with sessions has an Mcp-Session-Id", s.id)
	}
	return &mcpClient{session: s, version: version, cs: cs, tr: tr, mcpID: cs.ID()}
}

// call runs one tool call: its text, whether it is a tool error, or the
// call's own error (a transport or protocol failure).
func (c *mcpClient) call(tool string, args map[string]any) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mcpCallTimeout)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	if len(res.Content) != 1 {
		return "", true, fmt.Errorf("%d content blocks", len(res.Content))
	}
	text, _ := res.Content[0].(*sdk.TextContent)
	if text == nil {
		return "", true, errors.New("not a text block")
	}
	return text.Text, res.IsError, nil
}

// run is the model's loop over MCP, as session.run is over REST.
func (c *mcpClient) run(st *loadStats, ms *mcpStats, until time.Time) {
	needRead := true
	var readFrom string
	for time.Now().Before(until) {
		if needRead {
			t0 := time.Now()
			text, isErr, err := c.call("read", map[string]any{"file_path": c.file})
			c.readTime += time.Since(t0)
			ms.calls.Add(1)
			switch {
			case errors.Is(err, sdk.ErrSessionMissing):
				ms.missing.Add(1)
				st.problem("%s (%s): read: the session is gone: %v", c.id, c.version, err)
				time.Sleep(200 * time.Millisecond)
			case err != nil:
				ms.transportErrors.Add(1)
				c.errs++
				c.lastErr = err.Error()
				time.Sleep(20 * time.Millisecond)
			case isErr:
				st.problem("%s (%s): read failed: %s", c.id, c.version, text)
				time.Sleep(50 * time.Millisecond)
			default:
				c.reads++
				c.checkOutput(st, text)
				readFrom, needRead = c.tr.upstream(), false
			}
			continue
		}
		text, isErr, err := c.call("edit", map[string]any{"file_path": c.file,
			"old_string": fmt.Sprintf("%s: %d\n", c.line, c.value), "new_string": fmt.Sprintf("%s: %d\n", c.line, c.value+1)})
		ms.calls.Add(1)
		switch {
		case errors.Is(err, sdk.ErrSessionMissing):
			ms.missing.Add(1)
			st.problem("%s (%s): edit: the session is gone: %v", c.id, c.version, err)
			c.pending, needRead = true, true
			time.Sleep(200 * time.Millisecond)
		case err != nil:
			// nginx's 502 (the replica died mid-call) or a broken
			// connection: the edit may or may not have happened.
			ms.transportErrors.Add(1)
			c.errs++
			c.lastErr = err.Error()
			c.pending, needRead = true, true
			time.Sleep(20 * time.Millisecond)
		case !isErr:
			c.value++
			c.acked++
			ms.edits.Add(1)
			if up := c.tr.upstream(); up != readFrom {
				ms.crossReplica.Add(1)
			}
			readFrom = c.tr.upstream()
		case strings.Contains(text, "changed since it was read"):
			ms.stale.Add(1)
			c.stale++
			needRead = true
		case strings.Contains(text, "session store is unavailable"), strings.Contains(text, "SESSION_STORE_UNAVAILABLE"):
			ms.storeUnavailable.Add(1)
			needRead = true
			time.Sleep(20 * time.Millisecond)
		default:
			st.problem("%s (%s): edit failed: %s", c.id, c.version, text)
			needRead = true
		}
	}
}

// settle resolves a pending edit with reads until one answers, and reports
// whether the client still works (not stuck on a 404 or a failed
// connection).
func (c *mcpClient) settle(st *loadStats) bool {
	for range 100 {
		text, isErr, err := c.call("read", map[string]any{"file_path": c.file})
		if err == nil && !isErr {
			c.checkOutput(st, text)
			return true
		}
		if err != nil {
			c.lastErr = err.Error()
		} else {
			c.lastErr = text
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}
