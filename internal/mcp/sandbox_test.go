package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/handlers"
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
	srv := servertest.Start(t, server.Options{
		Policy:    true,
		Sessions:  policy.Config{TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		REST:      handlers.Config{MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second},
		Sandbox:   tools.SandboxReadOnly,
		Approvals: approval.Config{Timeout: 30 * time.Second},
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
