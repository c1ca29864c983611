package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// TestEscalationOverMCP: the sandbox and its escalation work over /mcp as
// over REST (the executor owns both): tools/list advertises the two
// properties, a denied edit gives the original's text, an escalated one
// waits for a decision made through REST's /approvals; approve runs it
// once, reject answers the original's text; for every protocol revision.
func TestEscalationOverMCP(t *testing.T) {
	srv := servertest.Start(t, server.Config{
		Policy:       policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
		Tools:     tools.Settings{SandboxMode: string(tools.FenceReadOnly)},
		Approvals: approval.Settings{Timeout: 30 * time.Second},
	})
	h := &harness{t: t, srv: srv}
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			c := h.connect(v.ask, "X-Session-ID", "m-"+v.name)
			list, err := c.ListTools(context.Background(), nil)
			require.NoError(t, err)
			for _, tl := range list.Tools {
				schema, err := json.Marshal(tl.InputSchema)
				require.NoError(t, err)
				if tl.Name == "write" || tl.Name == "edit" {
					// The client decodes the schema into maps: keys sorted.
					assert.Contains(t, string(schema), `"sandbox_permissions":{"description":"The wider sandbox mode this file operation needs. Only valid as a one-shot retry of an operation the sandbox just denied; requires justification and user approval.","enum":["workspace-write","danger-full-access"],"type":"string"}`)
					assert.Contains(t, string(schema), `"justification":{"description":"Required with sandbox_permissions: one sentence for the user explaining why this exact file operation needs the wider access.","type":"string"}`)
				}
			}

			rel := "mcp-" + v.name + ".txt"
			h.file(rel, "old\n")
			text, isErr := c.call(t, "read", map[string]any{"file_path": rel})
			require.False(t, isErr, text)
			edit := map[string]any{"file_path": rel, "old_string": "old", "new_string": "new"}
			text, isErr = c.call(t, "edit", edit)
			assert.True(t, isErr)
			assert.Equal(t, "Error: [sandbox: file access denied under read-only mode]\n[sandbox: escalation available \u2014 retry this exact operation once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]", text)

			for _, decision := range []string{"reject", "approve"} {
				edit["sandbox_permissions"] = "workspace-write"
				edit["justification"] = "The user asked for it."
				done := make(chan *sdk.CallToolResult, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "edit", Arguments: edit})
					if err != nil {
						res = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
					}
					done <- res
				}()
				var pending []approval.Approval
				for deadline := time.Now().Add(10 * time.Second); len(pending) == 0; {
					require.True(t, time.Now().Before(deadline), "no approval appeared")
					r := h.raw(http.MethodGet, "/approvals?wait=2s", "")
					var l struct {
						Approvals []approval.Approval `json:"approvals"`
					}
					require.NoError(t, json.Unmarshal([]byte(r.body), &l), r.body)
					pending = l.Approvals
				}
				require.Len(t, pending, 1)
				assert.Equal(t, "edit", pending[0].Tool)
				assert.Equal(t, filepath.Join(srv.Root, rel), pending[0].Path)
				assert.Equal(t, "escalate sandbox to workspace-write: The user asked for it.", pending[0].Reason)
				r := h.raw(http.MethodPost, "/approvals/"+pending[0].ID, `{"decision":"`+decision+`"}`, "Content-Type", "application/json")
				require.Equal(t, http.StatusNoContent, r.status, r.body)
				res := <-done
				require.Len(t, res.Content, 1)
				text := res.Content[0].(*sdk.TextContent).Text
				if decision == "reject" {
					assert.True(t, res.IsError)
					assert.Equal(t, `Error: the user rejected escalating this operation to "workspace-write"`, text)
					assert.Equal(t, "old\n", h.contents(rel))
					continue
				}
				assert.False(t, res.IsError, text)
				assert.Equal(t, "The file "+filepath.Join(srv.Root, rel)+" has been updated successfully.", text)
				assert.Equal(t, "new\n", h.contents(rel))
			}
		})
	}
}

// TestApprovalWithdrawnWhenCallEnds: an escalated tools/call waiting for a
// person's approval ends, and its pending approval is withdrawn (gone from
// GET /approvals, a late decision 409, counted as cancelled, nothing
// written), however its caller gives up: the SDK client's call context
// cancelled; a notifications/cancelled alone, the HTTP request kept open;
// the HTTP request carrying it broken, with no notification and no DELETE.
// A stateful session's calls outlive their request in the SDK, though no
// one could ever receive the answer (docs/mcp.md, "Cancellation"). Every
// protocol revision; the sessionless one has no session to carry a
// notification, so there only the request's end applies.
func TestApprovalWithdrawnWhenCallEnds(t *testing.T) {
	srv := servertest.Start(t, server.Config{
		Policy:       policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
		Tools: tools.Settings{SandboxMode: string(tools.FenceReadOnly)},
		// Long enough that no withdrawal here can be a timeout.
		Approvals: approval.Settings{Timeout: 10 * time.Minute},
	})
	h := &harness{t: t, srv: srv}
	h.file("a.txt", "old\n")
	pending := func(session string) []approval.Approval {
		r := h.raw(http.MethodGet, "/approvals", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
		var l struct {
			Approvals []approval.Approval `json:"approvals"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &l), r.body)
		var its []approval.Approval
		for _, a := range l.Approvals {
			if a.Session == session {
				its = append(its, a)
			}
		}
		return its
	}
	cancelled := func() int {
		r := h.raw(http.MethodGet, "/metrics", "")
		m := regexp.MustCompile(`(?m)^toolfs_approvals_total\{decision="cancelled",via="approvals"\} (\d+)$`).FindStringSubmatch(r.body)
		if m == nil {
			return 0
		}
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n
	}
	const (
		callCancelled = "call context cancelled"
		notification  = "notifications/cancelled alone"
		broken        = "request broken"
	)
	for _, v := range versions {
		for i, how := range []string{callCancelled, notification, broken} {
			if how == notification && !v.stateful {
				continue
			}
			t.Run(v.name+"/"+how, func(t *testing.T) {
				session := fmt.Sprintf("w-%s-%d", v.name, i)
				cut := &cutter{
					// A client's own carrier header names no request of the
					// server's (it would end every call at once if it did).
					header: http.Header{"X-Session-Id": {session}, "X-Toolfs-Mcp-Carrier": {"999999"}},
					keep:   how == notification, mute: how != callCancelled,
				}
				c := sdk.NewClient(&sdk.Implementation{Name: "toolfs-test", Version: "v0"}, nil)
				cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
					Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: cut}, MaxRetries: -1,
				}, &sdk.ClientSessionOptions{ProtocolVersion: v.ask})
				require.NoError(t, err)
				t.Cleanup(func() { cs.Close() })
				t.Cleanup(cut.breakCalls) // first: Close waits for open calls
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": "a.txt"}})
				require.NoError(t, err)
				require.False(t, res.IsError, "%+v", res.Content)
				before := cancelled()

				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "edit", Arguments: map[string]any{
						"file_path": "a.txt", "old_string": "old", "new_string": "new",
						"sandbox_permissions": "workspace-write", "justification": "The user asked for it.",
					}})
					if err == nil {
						err = fmt.Errorf("the call answered %+v", res.Content[0])
					}
					done <- err
				}()
				var open []approval.Approval
				_, ok := waitUntil(func() bool {
					open = pending(session)
					return len(open) > 0 || len(done) > 0
				})
				require.True(t, ok, "no approval appeared")
				select {
				case err := <-done:
					t.Fatalf("the call ended before its approval appeared: %v", err)
				default:
				}
				require.Len(t, open, 1)
				require.Equal(t, session, open[0].Session)

				switch how {
				case callCancelled:
					cancel()
					require.ErrorIs(t, <-done, context.Canceled)
				case notification:
					cut.notifyCancelled(t, srv.URL+"/mcp")
				case broken:
					cut.breakCalls()
				}
				_, ok = waitUntil(func() bool { return len(pending(session)) == 0 })
				require.True(t, ok, "the approval %s is still pending after its call ended", open[0].ID)
				r := h.raw(http.MethodPost, "/approvals/"+open[0].ID, `{"decision":"approve"}`, "Content-Type", "application/json")
				assert.Equal(t, http.StatusConflict, r.status, r.body)
				// The counter is told after the approval leaves the list.
				_, ok = waitUntil(func() bool { return cancelled() >= before+1 })
				assert.True(t, ok)
				assert.Equal(t, before+1, cancelled())
				assert.Equal(t, "old\n", h.contents("a.txt"))
			})
		}
	}
}

// waitUntil polls cond until it holds, for at most 20 s.
func waitUntil(cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > 20*time.Second {
			return time.Since(start), false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start), true
}

// cutter is an MCP client's HTTP transport that lets a test end a
// tools/call in one way at a time. keep: a tools/call's HTTP request
// outlives its caller's context (notifyCancelled then ends the call by
// notification alone). mute: notifications/cancelled and DELETE from the
// SDK client never reach the server (answered 202 here), so breakCalls,
// which cuts the open tools/call requests, is the only sign the server
// gets.
type cutter struct {
	header     http.Header
	keep, mute bool
	mu         sync.Mutex
	cuts       []context.CancelFunc
	last       *http.Request   // the last tools/call sent
	lastID     json.RawMessage // and its JSON-RPC id
}

func (c *cutter) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	if c.mute && (req.Method == http.MethodDelete || bytes.Contains(body, []byte(`"notifications/cancelled"`))) {
		return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	ctx := req.Context()
	call := bytes.Contains(body, []byte(`"tools/call"`))
	if call {
		if c.keep {
			ctx = context.WithoutCancel(ctx)
		}
		var cut context.CancelFunc
		ctx, cut = context.WithCancel(ctx)
		c.mu.Lock()
		c.cuts = append(c.cuts, cut)
		c.mu.Unlock()
	}
	req = req.Clone(ctx)
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if call {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &msg) == nil {
			c.mu.Lock()
			c.last, c.lastID = req, msg.ID
			c.mu.Unlock()
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// breakCalls cuts every tools/call request still open.
func (c *cutter) breakCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cut := range c.cuts {
		cut()
	}
}

// notifyCancelled sends notifications/cancelled for the last tools/call,
// in its MCP session, as a request of its own.
func (c *cutter) notifyCancelled(t *testing.T, endpoint string) {
	t.Helper()
	c.mu.Lock()
	last, id := c.last, c.lastID
	c.mu.Unlock()
	require.NotNil(t, last)
	body := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(id) + `,"reason":"the user gave up"}}`
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	require.NoError(t, err)
	req.Header = last.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}
