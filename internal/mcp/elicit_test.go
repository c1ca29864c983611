package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// fenced starts a server whose writes are fenced read-only, so every
// write escalates (docs/sandbox.md).
func fenced(t testing.TB, approveBy string, timeout time.Duration, more ...func(*server.Config)) *harness {
	t.Helper()
	cfg := server.Config{
		Policy:       policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
		Tools: tools.Settings{SandboxMode: string(tools.FenceReadOnly)}, Approvals: approval.Settings{Timeout: timeout}, ApproveBy: approveBy,
	}
	for _, f := range more {
		f(&cfg)
	}
	return &harness{t: t, srv: servertest.Start(t, cfg)}
}

// asked records what the client's user was asked and answers as told.
type asked struct {
	mu     sync.Mutex
	params []*sdk.ElicitParams
	answer func(context.Context) *sdk.ElicitResult
}

func (a *asked) handle(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	a.mu.Lock()
	a.params = append(a.params, req.Params)
	a.mu.Unlock()
	return a.answer(ctx), nil
}

func (a *asked) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.params)
}

func answer(decision string) func(context.Context) *sdk.ElicitResult {
	return func(context.Context) *sdk.ElicitResult {
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}
	}
}

// connectAsking connects a Go SDK client with an elicitation handler.
func (h *harness) connectAsking(version string, a *asked, opts *sdk.ClientOptions, headers ...string) *client {
	h.t.Helper()
	rec := &recorder{header: http.Header{}}
	for i := 0; i+1 < len(headers); i += 2 {
		rec.header.Add(headers[i], headers[i+1])
	}
	if opts == nil {
		opts = &sdk.ClientOptions{}
	}
	if a != nil {
		opts.ElicitationHandler = a.handle
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "toolfs-test", Version: "v0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: h.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { cs.Close() })
	return &client{cs, rec}
}

func escalated(path, content string) map[string]any {
	return map[string]any{"file_path": path, "content": content, "sandbox_permissions": "workspace-write", "justification": "The user asked for it."}
}

func textOf(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	require.Len(t, res.Content, 1)
	return res.Content[0].(*sdk.TextContent).Text
}

func (h *harness) approvalsMetric(decision, via string) string {
	m := regexp.MustCompile(`(?m)^toolfs_approvals_total\{decision="` + decision + `",via="` + via + `"\} (\d+)$`).FindStringSubmatch(h.raw(http.MethodGet, "/metrics", "").body)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestEscalationAskedByElicitation: a client that declared elicitation is
// asked in the client, on every protocol revision (in the session, or as
// an input_required result answered on the retry, which the Go SDK's
// client makes by itself): the form shows the tool, the path, the reason
// and the diff; approve runs exactly that write, reject answers the
// original's text and writes nothing; counted via elicitation.
func TestEscalationAskedByElicitation(t *testing.T) {
	h := fenced(t, "", 30*time.Second)
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			for _, decision := range []string{"reject", "approve"} {
				rel := "elicit-" + v.name + "-" + decision + ".txt"
				a := &asked{answer: answer(decision)}
				c := h.connectAsking(v.ask, a, nil, "X-Session-ID", "e-"+v.name)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "write", Arguments: escalated(rel, "new\n")})
				cancel()
				require.NoError(t, err)
				text := textOf(t, res)
				require.Equal(t, 1, a.count(), "asked once")
				p := a.params[0]
				assert.Equal(t, "form", p.Mode)
				full := filepath.Join(h.srv.Root, rel)
				assert.Equal(t, "toolfs-api asks for your approval.\nTool: write\nPath: "+full+"\n"+
					"Reason: escalate sandbox to workspace-write: The user asked for it.\n\n"+
					"--- "+full+"\n+++ "+full+"\n@@ -0,0 +1,1 @@\n+new", p.Message)
				schema, err := json.Marshal(p.RequestedSchema)
				require.NoError(t, err)
				assert.JSONEq(t, `{"type":"object","required":["decision"],"properties":{"decision":{"type":"string","title":"Decision","description":"approve runs exactly the change shown; reject refuses it","enum":["approve","reject"]}}}`, string(schema))
				if decision == "reject" {
					assert.True(t, res.IsError)
					assert.Equal(t, `Error: the user rejected escalating this operation to "workspace-write"`, text)
					assert.NoFileExists(t, full)
					continue
				}
				assert.False(t, res.IsError, text)
				assert.Equal(t, "<path>"+full+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>", text)
				assert.Equal(t, "new\n", h.contents(rel))
			}
		})
	}
	assert.Equal(t, "4", h.approvalsMetric("approve", "elicitation"))
	assert.Equal(t, "4", h.approvalsMetric("reject", "elicitation"))
	assert.Equal(t, "0", h.approvalsMetric("approve", "approvals"))
}

// TestElicitationAndApprovalsRace: with --approve-by both, on a revision
// with sessions, the escalation waits at /approvals while the client's
// user is asked; a person deciding at /approvals first withdraws the
// question (the client's handler sees its context end) and the call runs
// once; the client's answer first ends the pending approval (a later
// decision at /approvals is 404).
func TestElicitationAndApprovalsRace(t *testing.T) {
	h := fenced(t, "", 30*time.Second)
	reached, withdrawn := make(chan struct{}), make(chan struct{})
	a := &asked{answer: func(ctx context.Context) *sdk.ElicitResult {
		close(reached)
		<-ctx.Done()
		close(withdrawn)
		return &sdk.ElicitResult{Action: "cancel"}
	}}
	c := h.connectAsking("2025-11-25", a, nil, "X-Session-ID", "race")
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: escalated("race.txt", "by approvals\n")})
		if err != nil {
			res = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	id := h.pendingID()
	// Decided only once the question is with the client: a decision
	// before it arrives withdraws a question the client never sees.
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not asked")
	}
	r := h.raw(http.MethodPost, "/approvals/"+id, `{"decision":"approve"}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusNoContent, r.status, r.body)
	res := <-done
	assert.False(t, res.IsError, textOf(t, res))
	assert.Equal(t, "by approvals\n", h.contents("race.txt"))
	select {
	case <-withdrawn:
	case <-time.After(5 * time.Second):
		t.Fatal("the question was not withdrawn")
	}
	assert.Equal(t, "1", h.approvalsMetric("approve", "approvals"))

	// The client's user answers first.
	b := &asked{answer: answer("approve")}
	c = h.connectAsking("2025-11-25", b, nil, "X-Session-ID", "race")
	res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: escalated("race2.txt", "by the client\n")})
	require.NoError(t, err)
	assert.False(t, res.IsError, textOf(t, res))
	assert.Equal(t, "by the client\n", h.contents("race2.txt"))
	assert.Equal(t, "1", h.approvalsMetric("approve", "elicitation"))
	var l struct {
		Approvals []approval.Approval `json:"approvals"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.raw(http.MethodGet, "/approvals", "").body), &l))
	assert.Empty(t, l.Approvals)
}

// pendingID waits for one pending approval and returns its id.
func (h *harness) pendingID() string {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		var l struct {
			Approvals []approval.Approval `json:"approvals"`
		}
		require.NoError(h.t, json.Unmarshal([]byte(h.raw(http.MethodGet, "/approvals?wait=2s", "").body), &l))
		if len(l.Approvals) == 1 {
			return l.Approvals[0].ID
		}
	}
	h.t.Fatal("no approval appeared")
	return ""
}

// TestApproveByApprovals: --approve-by approvals never asks the client,
// even one that declared elicitation; the escalation waits at /approvals.
func TestApproveByApprovals(t *testing.T) {
	h := fenced(t, "approvals", 30*time.Second)
	for _, v := range versions[:2] {
		t.Run(v.name, func(t *testing.T) {
			a := &asked{answer: answer("approve")}
			c := h.connectAsking(v.ask, a, nil, "X-Session-ID", "only-"+v.name)
			done := make(chan *sdk.CallToolResult, 1)
			go func() {
				res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: escalated("only-"+v.name+".txt", "x\n")})
				require.NoError(t, err)
				done <- res
			}()
			id := h.pendingID()
			r := h.raw(http.MethodPost, "/approvals/"+id, `{"decision":"reject"}`, "Content-Type", "application/json")
			require.Equal(t, http.StatusNoContent, r.status, r.body)
			res := <-done
			assert.Equal(t, `Error: the user rejected escalating this operation to "workspace-write"`, textOf(t, res))
			assert.Zero(t, a.count(), "the client was not asked")
		})
	}
}

// rawCall is a tools/call whose input_required answer comes back as it is
// (the client's automatic retry disabled), so a test can send any retry.
func rawCall(t *testing.T, c *client, args map[string]any, state string, responses sdk.InputResponseMap) *sdk.CallToolResult {
	t.Helper()
	res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: args, RequestState: state, InputResponses: responses})
	require.NoError(t, err)
	return res
}

func approveResponse() sdk.InputResponseMap {
	return sdk.InputResponseMap{"approval": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
}

// TestRequestStateRefused: on the sessionless revision, a retry whose
// request state is forged, altered, expired, replayed or another call's is
// refused with its reason and runs nothing; a retry after the change shown
// changed is asked again.
func TestRequestStateRefused(t *testing.T) {
	h := fenced(t, "", 2*time.Second)
	noRetry := &sdk.ClientOptions{MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true}}
	c := h.connectAsking("", &asked{answer: answer("approve")}, noRetry, "X-Session-ID", "states")
	args := escalated("s.txt", "one\n")
	first := rawCall(t, c, args, "", nil)
	require.True(t, first.NeedsInput(), "input_required")
	require.Empty(t, first.Content)
	require.Contains(t, first.InputRequests, "approval")
	state := first.RequestState
	require.True(t, strings.HasPrefix(state, "v1."), state)

	refused := func(name, state string, args map[string]any, responses sdk.InputResponseMap, reason string) {
		t.Helper()
		res := rawCall(t, c, args, state, responses)
		assert.True(t, res.IsError, name)
		assert.Equal(t, "Error: cannot accept the answer to the approval request: "+reason, textOf(t, res), name)
		assert.NoFileExists(t, filepath.Join(h.srv.Root, "s.txt"), name)
	}
	forgedReason := "its request state was not issued by this server, or was altered"
	refused("forged", "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", args, approveResponse(), forgedReason)
	altered := []byte(state)
	altered[len(altered)/2] ^= 1
	refused("altered", string(altered), args, approveResponse(), forgedReason)
	refused("not a state", "approve", args, approveResponse(), forgedReason)
	other := escalated("s.txt", "two\n")
	refused("another call", state, other, approveResponse(), "it was given for another call")
	refused("no answer", state, args, nil, `the retry carries no answer to "approval"`)

	// The one good retry runs the write once; a replay runs nothing, even
	// once the file is as it was and read again.
	res := rawCall(t, c, args, state, approveResponse())
	require.False(t, res.IsError, textOf(t, res))
	assert.Equal(t, "one\n", h.contents("s.txt"))
	require.NoError(t, os.Remove(filepath.Join(h.srv.Root, "s.txt")))
	_, isErr := c.call(t, "read", map[string]any{"file_path": "s.txt"})
	require.True(t, isErr) // read confirms absence
	refused("replayed", state, args, approveResponse(), "it was used already; call again without inputResponses and requestState to be asked again")

	// The change shown is no longer the change: asked again, nothing runs.
	h.file("s.txt", "zero\n")
	_, isErr = c.call(t, "read", map[string]any{"file_path": "s.txt"})
	require.False(t, isErr)
	asked1 := rawCall(t, c, args, "", nil)
	require.True(t, asked1.NeedsInput())
	h.file("s.txt", "zero!\n")
	_, isErr = c.call(t, "read", map[string]any{"file_path": "s.txt"})
	require.False(t, isErr)
	again := rawCall(t, c, args, asked1.RequestState, approveResponse())
	require.True(t, again.NeedsInput(), "asked again about the change as it is now")
	assert.Contains(t, again.InputRequests["approval"].(*sdk.ElicitParams).Message, "@@ -1,1 +1,1 @@\n-zero!\n+one")
	assert.Equal(t, "zero!\n", h.contents("s.txt"))

	// Expired: the state outlives --approval-timeout.
	time.Sleep(2100 * time.Millisecond)
	res = rawCall(t, c, args, again.RequestState, approveResponse())
	assert.Equal(t, "Error: cannot accept the answer to the approval request: it expired; call again without inputResponses and requestState to be asked again", textOf(t, res))
	assert.Equal(t, "zero!\n", h.contents("s.txt"))
}

// TestElicitationAcrossReplicas: two replicas sharing Redis share the key
// that seals the request state and the answers taken: asked on one, the
// retry runs on the other, and a replay of it on the first is refused.
func TestElicitationAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	var hs []*harness
	for range 2 {
		hs = append(hs, fenced(t, "", 30*time.Second, func(c *server.Config) { c.Root, c.SessionStore, c.Sessions.Default = root, rs.URL(4), "default" }))
	}
	noRetry := &sdk.ClientOptions{MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true}}
	c0 := hs[0].connectAsking("", &asked{answer: answer("approve")}, noRetry, "X-Session-ID", "across")
	c1 := hs[1].connectAsking("", &asked{answer: answer("approve")}, noRetry, "X-Session-ID", "across")
	args := escalated("r.txt", "replicated\n")
	first := rawCall(t, c0, args, "", nil)
	require.True(t, first.NeedsInput())
	res := rawCall(t, c1, args, first.RequestState, approveResponse())
	require.False(t, res.IsError, textOf(t, res))
	assert.Equal(t, "replicated\n", hs[0].contents("r.txt"))
	require.NoError(t, os.Remove(filepath.Join(root, "r.txt")))
	_, isErr := c0.call(t, "read", map[string]any{"file_path": "r.txt"})
	require.True(t, isErr)
	res = rawCall(t, c0, args, first.RequestState, approveResponse())
	assert.Equal(t, "Error: cannot accept the answer to the approval request: it was used already; call again without inputResponses and requestState to be asked again", textOf(t, res))
	assert.NoFileExists(t, filepath.Join(root, "r.txt"))

	// The SDK's own retry, across the two (round robin).
	tr := &spread{bases: []string{hs[0].srv.URL, hs[1].srv.URL}, dead: map[int]bool{}, ids: map[string]int{}}
	a := &asked{answer: answer("approve")}
	cl := sdk.NewClient(&sdk.Implementation{Name: "replicas", Version: "v0"}, &sdk.ClientOptions{ElicitationHandler: a.handle})
	cs, err := cl.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: hs[0].srv.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: escalated("rr.txt", "round robin\n")})
	require.NoError(t, err)
	require.False(t, res.IsError, textOf(t, res))
	assert.Equal(t, 1, a.count())
	assert.Equal(t, "round robin\n", hs[1].contents("rr.txt"))
}

// TestElicitedDecisionAudited: with --audit-log, a decision of the
// client's own user is recorded (via "elicitation", never file contents)
// before the write it approves, on both kinds of revision.
func TestElicitedDecisionAudited(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	h := fenced(t, "", 30*time.Second, func(c *server.Config) { c.Audit.Path = log })
	for _, v := range versions[:2] {
		c := h.connectAsking(v.ask, &asked{answer: answer("approve")}, nil, "X-Session-ID", "audited")
		res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: escalated("audited-"+v.name+".txt", "x\n")})
		require.NoError(t, err)
		require.False(t, res.IsError, textOf(t, res))
	}
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	require.Len(t, lines, 4, string(b))
	for i, v := range versions[:2] {
		decision, write := lines[2*i], lines[2*i+1]
		assert.Equal(t, "approve", decision["decision"], v.name)
		assert.Equal(t, "elicitation", decision["via"], v.name)
		assert.Equal(t, "write", decision["tool"], v.name)
		assert.Equal(t, "audited-"+v.name+".txt", decision["path"], v.name)
		assert.Equal(t, "audited", decision["session"], v.name)
		assert.Nil(t, write["decision"], v.name)
		assert.Equal(t, "audited-"+v.name+".txt", write["path"], v.name)
	}
	assert.NotEmpty(t, lines[2]["approval"], "in the session, the pending approval it decided")
}

// TestSessionElicitationFallsBackAcrossReplicas: with the MCP sessions
// shared through Redis there is no standalone stream to carry an
// elicitation request (docs/mcp.md, "Sessions across replicas"), so on a
// revision with sessions the escalation, even with --approve-by
// elicitation, waits at /approvals, where a person decides it.
func TestSessionElicitationFallsBackAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	var hs []*harness
	for range 2 {
		hs = append(hs, fenced(t, "elicitation", 30*time.Second, func(c *server.Config) { c.Root, c.SessionStore, c.Sessions.Default = root, rs.URL(5), "default" }))
	}
	tr := &spread{bases: []string{hs[0].srv.URL, hs[1].srv.URL}, dead: map[int]bool{}, ids: map[string]int{}}
	a := &asked{answer: answer("approve")}
	cl := sdk.NewClient(&sdk.Implementation{Name: "replicas", Version: "v0"}, &sdk.ClientOptions{ElicitationHandler: a.handle})
	cs, err := cl.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: hs[0].srv.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer cs.Close()
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "write", Arguments: escalated("fallback.txt", "decided at /approvals\n")})
		if err != nil {
			res = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	id := hs[1].pendingID()
	r := hs[1].raw(http.MethodPost, "/approvals/"+id, `{"decision":"approve"}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusNoContent, r.status, r.body)
	res := <-done
	require.False(t, res.IsError, textOf(t, res))
	assert.Equal(t, "decided at /approvals\n", hs[0].contents("fallback.txt"))
	assert.Zero(t, a.count())
}
