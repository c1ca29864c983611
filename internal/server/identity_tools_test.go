package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// TestIdentityToolsFollowScopes: what a token may do, it sees
// (docs/identity.md): with real Hydra tokens, a toolfs:read token's MCP
// tools/list (both kinds of revision), GET /tools (every format) and
// /openapi.json list read, glob, grep and changes, in catalog order, and
// nothing that writes; a token with toolfs:write, and the static token,
// see every tool. A call of an unlisted tool is still refused (403).
func TestIdentityToolsFollowScopes(t *testing.T) {
	f := newIDFixture(t, server.Config{})
	reader := f.token(f.alice, "toolfs:read")
	writer := f.token(f.alice, "toolfs:read", "toolfs:write")
	writes := func(name string) bool { return !slices.Contains([]string{"read", "glob", "grep", "changes"}, name) }

	mcpNames := func(token, version string) []string {
		cs, err := mcpClient(t, f, token, version)
		require.NoError(t, err)
		list, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
		var names []string
		for _, tl := range list.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	all := mcpNames(writer, "2025-11-25")
	require.Contains(t, all, "write")
	require.Contains(t, all, "revert")
	readOnly := slices.DeleteFunc(slices.Clone(all), writes)
	assert.Subset(t, readOnly, []string{"read", "changes"})
	// The instructions are the guidance of the tools it sees (the catalog's).
	a := f.do("GET", "/tools", reader, "")
	var cat struct{ Tools []struct{ Guidance string } }
	require.NoError(t, json.Unmarshal([]byte(a.body), &cat))
	var guidance []string
	for _, tl := range cat.Tools {
		guidance = append(guidance, tl.Guidance)
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		cs, err := mcpClient(t, f, reader, version)
		require.NoError(t, err)
		assert.Equal(t, strings.Join(guidance, "\n\n"), cs.InitializeResult().Instructions, version)
		assert.NotContains(t, cs.InitializeResult().Instructions, "edit tool", version)
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		assert.Equal(t, all, mcpNames(writer, version), version)
		assert.Equal(t, readOnly, mcpNames(reader, version), version)
		assert.Equal(t, readOnly, mcpNames(reader, version), "%s: the same order every time", version)
	}

	catalog := func(token, query string) []string {
		a := f.do("GET", "/tools"+query, token, "")
		require.Equal(t, 200, a.status, a.body)
		var names []string
		switch query {
		case "":
			var c struct{ Tools []struct{ Name string } }
			require.NoError(t, json.Unmarshal([]byte(a.body), &c))
			for _, tl := range c.Tools {
				names = append(names, tl.Name)
			}
		case "?format=openai":
			var c []struct{ Function struct{ Name string } }
			require.NoError(t, json.Unmarshal([]byte(a.body), &c))
			for _, tl := range c {
				names = append(names, tl.Function.Name)
			}
		case "?format=anthropic":
			var c []struct{ Name string }
			require.NoError(t, json.Unmarshal([]byte(a.body), &c))
			for _, tl := range c {
				names = append(names, tl.Name)
			}
		case "?format=mcp":
			var c struct{ Tools []struct{ Name string } }
			require.NoError(t, json.Unmarshal([]byte(a.body), &c))
			for _, tl := range c.Tools {
				names = append(names, tl.Name)
			}
		}
		return names
	}
	full := catalog(writer, "")
	require.Contains(t, full, "write")
	for _, q := range []string{"", "?format=openai", "?format=anthropic", "?format=mcp"} {
		assert.Equal(t, full, catalog(writer, q), q)
		assert.Equal(t, full, catalog(staticToken, q), q)
		assert.Equal(t, slices.DeleteFunc(slices.Clone(full), writes), catalog(reader, q), q)
	}

	view := func(token string) []string {
		a := f.do("GET", "/openapi.json", token, "")
		require.Equal(t, 200, a.status, a.body)
		var doc struct {
			Paths json.RawMessage
		}
		require.NoError(t, json.Unmarshal([]byte(a.body), &doc))
		var ops []string
		dec := json.NewDecoder(bytesReader(doc.Paths))
		dec.Token() // {
		for dec.More() {
			k, _ := dec.Token()
			ops = append(ops, k.(string))
			var skip json.RawMessage
			require.NoError(t, dec.Decode(&skip))
		}
		return ops
	}
	var wantView []string
	for _, n := range slices.DeleteFunc(slices.Clone(full), writes) {
		wantView = append(wantView, "/model/"+n)
	}
	assert.Equal(t, wantView, view(reader))
	assert.Contains(t, view(writer), "/model/write")

	// Unlisted, still refused.
	a = f.do("POST", "/tools/write", reader, `{"file_path":"x.txt","content":"x"}`, "Content-Type", "application/json")
	assert.Equal(t, 403, a.status, a.body)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// TestIdentityElicitationBoundToSubject: an escalation's sealed request
// state (docs/sandbox.md, "Approving in the client") is its subject's:
// with real Hydra tokens, alice's state retried by bob with the same
// arguments in the same session id is refused and writes nothing; alice's
// own retry runs.
func TestIdentityElicitationBoundToSubject(t *testing.T) {
	f := newIDFixture(t, server.Config{Tools: tools.Settings{SandboxMode: "read-only"}, Approvals: approval.Settings{Timeout: time.Minute}})
	connect := func(token string) *sdk.ClientSession {
		c := sdk.NewClient(&sdk.Implementation{Name: "identity-elicit", Version: "v0"}, &sdk.ClientOptions{
			ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
			},
			MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
		})
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
			Endpoint: f.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1,
		}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice := connect(f.token(f.alice, "toolfs:read", "toolfs:write"))
	bob := connect(f.token(f.bob, "toolfs:read", "toolfs:write"))
	args := map[string]any{"file_path": "bound.txt", "content": "alice's\n", "sandbox_permissions": "workspace-write", "justification": "She asked."}
	call := func(cs *sdk.ClientSession, state string, answered bool) *sdk.CallToolResult {
		p := &sdk.CallToolParams{Name: "write", Arguments: args, RequestState: state}
		if answered {
			p.InputResponses = sdk.InputResponseMap{"approval": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
		}
		res, err := cs.CallTool(context.Background(), p)
		require.NoError(t, err)
		return res
	}
	first := call(alice, "", false)
	require.True(t, first.NeedsInput())
	res := call(bob, first.RequestState, true)
	require.True(t, res.IsError)
	assert.Equal(t, "Error: cannot accept the answer to the approval request: it was given for another call", res.Content[0].(*sdk.TextContent).Text)
	assert.NoFileExists(t, filepath.Join(f.srv.Root, "bound.txt"))
	res = call(alice, first.RequestState, true)
	require.False(t, res.IsError, res.Content[0].(*sdk.TextContent).Text)
	b, err := os.ReadFile(filepath.Join(f.srv.Root, "bound.txt"))
	require.NoError(t, err)
	assert.Equal(t, "alice's\n", string(b))
}
