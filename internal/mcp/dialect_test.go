package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// connectTo opens an MCP session at path (with its query) instead of /mcp.
func (h *harness) connectTo(path, version string) *client {
	h.t.Helper()
	rec := &recorder{header: http.Header{}}
	c := sdk.NewClient(&sdk.Implementation{Name: "toolfs-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: h.srv.URL + path, HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { cs.Close() })
	return &client{cs, rec}
}

func toolNames(t *testing.T, c *client) []string {
	t.Helper()
	list, err := c.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var out []string
	for _, tool := range list.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// TestDialectOverMCP: the URL a client is configured with chooses its
// dialect: /mcp?dialect=anchors lists edit_lines and not edit (with
// destructiveHint), its instructions recommend edit_lines, and its read
// answers with anchors; all lists every edit tool; none keeps today's list.
// On every protocol revision, with and without MCP sessions.
func TestDialectOverMCP(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "hello\nworld\n")
	for _, v := range versions[:2] {
		t.Run(v.name, func(t *testing.T) {
			a := h.connectTo("/mcp?dialect=anchors", v.ask)
			assert.Equal(t, []string{"read", "write", "edit_lines", "glob", "grep", "move", "delete", "mkdir"}, toolNames(t, a))
			list, err := a.ListTools(context.Background(), nil)
			require.NoError(t, err)
			ann := list.Tools[2].Annotations
			require.NotNil(t, ann.DestructiveHint)
			assert.True(t, *ann.DestructiveHint)
			assert.False(t, ann.ReadOnlyHint)
			var cat tools.Catalog
			require.NoError(t, json.Unmarshal([]byte(h.raw(http.MethodGet, "/tools?dialect=anchors", "").body), &cat))
			assert.Equal(t, cat.Tools[2].Description, list.Tools[2].Description)
			assert.Contains(t, a.InitializeResult().Instructions, "prefer edit_lines for targeted changes")
			assert.Contains(t, a.InitializeResult().Instructions, "Use the edit_lines tool")

			text, isErr := a.call(t, "read", map[string]any{"file_path": "a.txt"})
			require.False(t, isErr, text)
			assert.Equal(t, "<path>"+filepathOf(h, "a.txt")+"</path>\n<type>file</type>\n<content>\n1#SW: hello\n2#TP: world\n\n(End of file - total 2 lines)\n</content>", text)

			assert.Equal(t, []string{"read", "write", "edit", "apply_patch", "edit_lines", "glob", "grep", "move", "delete", "mkdir"}, toolNames(t, h.connectTo("/mcp?dialect=all", v.ask)))
			assert.Equal(t, []string{"read", "write", "apply_patch", "glob", "grep", "move", "delete", "mkdir"}, toolNames(t, h.connectTo("/mcp?dialect=apply_patch", v.ask)))
			plain := h.connectTo("/mcp", v.ask)
			assert.Equal(t, []string{"read", "write", "edit", "glob", "grep", "move", "delete", "mkdir"}, toolNames(t, plain))
			text, _ = plain.call(t, "read", map[string]any{"file_path": "a.txt"})
			assert.Contains(t, text, "\n1: hello\n")
			assert.Equal(t, []string{"read", "write", "edit", "glob", "grep", "move", "delete", "mkdir"}, toolNames(t, h.connectTo("/mcp?dialect=str_replace", v.ask)))
		})
	}
	r := h.raw(http.MethodPost, "/mcp?dialect=hashline", initialize, mcpPost...)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, r.body, `unknown edit dialect \"hashline\": use dialect=str_replace, dialect=apply_patch, dialect=anchors or dialect=all`)
}

// TestEditLinesOverMCPIsREST: edit_lines's texts over MCP are the REST
// outputs, byte for byte: an anchored read, a replace, an insert, a
// delete, a stale anchor with the lines around it, a relocation, an
// ambiguous one, an overlap.
func TestEditLinesOverMCPIsREST(t *testing.T) {
	h := start(t, options{policyOff: true})
	c := h.connectTo("/mcp?dialect=anchors", "")
	var file strings.Builder
	for _, l := range []string{"line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8", "line 9", "line 10"} {
		file.WriteString(l + "\r\n")
	}
	calls := []struct {
		name string
		file string
		tool string
		args map[string]any
		err  bool
	}{
		{"read", file.String(), "read", map[string]any{"file_path": "a.txt"}, false},
		{"replace", file.String(), "edit_lines", map[string]any{"file_path": "a.txt", "edits": []any{map[string]any{"op": "replace", "start": "2#MH", "end": "3#SR", "text": "two\nthree"}}}, false},
		{"insert", file.String(), "edit_lines", map[string]any{"file_path": "a.txt", "edits": []any{map[string]any{"op": "insert_after", "at": "10#DC", "text": "eleven"}}}, false},
		{"delete", file.String(), "edit_lines", map[string]any{"file_path": "a.txt", "edits": []any{map[string]any{"op": "replace", "start": "1#NR", "text": ""}}}, false},
		{"stale", file.String(), "edit_lines", map[string]any{"file_path": "a.txt", "edits": []any{map[string]any{"op": "replace", "start": "5#KT", "text": ""}}}, true},
		{"relocated", "x\r\n" + file.String(), "edit_lines", map[string]any{"file_path": "a.txt", "edits": []any{map[string]any{"op": "replace", "start": "4#HK", "text": "four"}}}, false},
		{"ambiguous", file.String(), "edit_lines", map[string]any{"file_path": "a.txt", "edits": []any{map[string]any{"op": "replace", "start": "5#SR", "text": ""}}}, true},
		{"overlap", file.String(), "edit_lines", map[string]any{"file_path": "a.txt", "edits": []any{
			map[string]any{"op": "replace", "start": "2#MH", "end": "3#SR", "text": ""}, map[string]any{"op": "insert_before", "at": "3#SR", "text": "x"}}}, true},
	}
	for _, cl := range calls {
		h.file("a.txt", cl.file)
		text, isErr := c.call(t, cl.tool, cl.args)
		assert.Equal(t, cl.err, isErr, "%s: %s", cl.name, text)
		mcpFile := h.contents("a.txt")
		h.file("a.txt", cl.file)
		r := h.rest(cl.tool, cl.args, "X-Session-ID", "s")
		if cl.tool == "read" {
			body, _ := json.Marshal(cl.args)
			r.Output = h.raw(http.MethodPost, "/model/read?dialect=anchors", string(body), "Content-Type", "application/json").body
		}
		assert.Equal(t, r.Output, text, cl.name)
		assert.Equal(t, h.contents("a.txt"), mcpFile, cl.name)
		if cl.name == "replace" {
			assert.Equal(t, "line 1\r\ntwo\r\nthree\r\nline 4\r\n", mcpFile[:len("line 1\r\ntwo\r\nthree\r\nline 4\r\n")], "a CRLF file stays CRLF")
			assert.Equal(t, "The file "+filepathOf(h, "a.txt")+" has been updated successfully.\nLines 2-3 now:\n"+render.Anchor(2, render.TagString("two"))+": two\n"+render.Anchor(3, render.TagString("three"))+": three", text)
		}
		if cl.name == "relocated" {
			assert.Contains(t, text, "\nAnchors found 1 line(s) lower.\n")
		}
		if cl.name == "overlap" {
			assert.Equal(t, "Error: edits[0] and edits[1] overlap", text)
		}
	}
}

// TestDialectOfTheServer: --edit-dialect anchors makes /mcp's default list
// edit_lines; ?dialect=str_replace still asks for edit.
func TestDialectOfTheServer(t *testing.T) {
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Tools: tools.Settings{EditDialect: "anchors"}})
	h := &harness{t: t, srv: srv}
	assert.Equal(t, []string{"read", "write", "edit_lines", "glob", "grep", "move", "delete", "mkdir"}, toolNames(t, h.connectTo("/mcp", "")))
	assert.Equal(t, []string{"read", "write", "edit", "glob", "grep", "move", "delete", "mkdir"}, toolNames(t, h.connectTo("/mcp?dialect=str_replace", "")))
}

func filepathOf(h *harness, rel string) string { return h.srv.Root + "/" + rel }

// TestAnchoredReadsCachedApart: with the read cache on, a plain and an
// anchored window of one version are two entries: neither is answered
// from the other's, over REST or MCP, in either order.
func TestAnchoredReadsCachedApart(t *testing.T) {
	h := start(t, options{cached: true})
	h.file("a.txt", "hello\nworld\n")
	p := filepathOf(h, "a.txt")
	plain := "<path>" + p + "</path>\n<type>file</type>\n<content>\n1: hello\n2: world\n\n(End of file - total 2 lines)\n</content>"
	anchored := "<path>" + p + "</path>\n<type>file</type>\n<content>\n1#SW: hello\n2#TP: world\n\n(End of file - total 2 lines)\n</content>"
	a, s := h.connectTo("/mcp?dialect=anchors", ""), h.connectTo("/mcp", "")
	body := `{"file_path":"a.txt"}`
	for i := 0; i < 3; i++ { // the first read fills the cache, the others hit it
		assert.Equal(t, plain, h.raw(http.MethodPost, "/model/read", body, "Content-Type", "application/json").body, "REST plain, read %d", i)
		assert.Equal(t, anchored, h.raw(http.MethodPost, "/model/read?dialect=anchors", body, "Content-Type", "application/json").body, "REST anchored, read %d", i)
		text, _ := a.call(t, "read", map[string]any{"file_path": "a.txt"})
		assert.Equal(t, anchored, text, "MCP anchored, read %d", i)
		text, _ = s.call(t, "read", map[string]any{"file_path": "a.txt"})
		assert.Equal(t, plain, text, "MCP plain, read %d", i)
		r := h.raw(http.MethodPost, "/tools/read?dialect=anchors", body, "Content-Type", "application/json")
		assert.Contains(t, r.body, `{"number":1,"text":"hello","tag":"SW"}`, "REST JSON anchored, read %d", i)
		r = h.raw(http.MethodPost, "/tools/read", body, "Content-Type", "application/json")
		assert.Contains(t, r.body, `{"number":1,"text":"hello"}`, "REST JSON plain, read %d", i)
	}
	m := h.raw(http.MethodGet, "/metrics", "").body
	assert.Contains(t, m, `toolfs_cache_hits_total{cache="window"}`)
}
