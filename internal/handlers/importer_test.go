package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// importer turns an OpenAPI document into model tools and calls them, the
// way Open WebUI's tool servers and LibreChat's actions do (docs/frontends.md):
// it fetches <url>/openapi.json with the connection's bearer token, refuses
// a document without servers[0].url or paths (LibreChat), makes a tool of
// every operation that has an operationId (Open WebUI) with the description
// (else the summary) and the parameters merged from the operation's
// parameters (whatever their "in") and its JSON body schema, and calls a
// tool by POSTing the model's arguments as JSON to servers[0].url + path,
// handing the answer's text to the model ("HTTP error <status>: <text>" on
// failure, as Open WebUI does). Like Open WebUI's backend without
// ENABLE_FORWARD_USER_INFO_HEADERS or header templates (every 0.6 release,
// docs/frontends.md), it sends Content-Type and Authorization and no chat id.
type importer struct {
	token string
	base  string // servers[0].url
	tools map[string]importedTool
}

type importedTool struct {
	Name        string
	Description string
	Parameters  map[string]any // {"type":"object","properties":{...},"required":[...]}
	method      string
	path        string
}

func importTools(t *testing.T, url, token string, specPath ...string) *importer {
	t.Helper()
	spec := "openapi.json" // the connection's path, Open WebUI's default
	if len(specPath) > 0 {
		spec = specPath[0]
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(url, "/")+"/"+spec, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Summary     string `json:"summary"`
			Description string `json:"description"`
			Parameters  []struct {
				Name     string         `json:"name"`
				In       string         `json:"in"`
				Required bool           `json:"required"`
				Schema   map[string]any `json:"schema"`
			} `json:"parameters"`
			RequestBody struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	require.NotEmpty(t, doc.Servers, "LibreChat: Could not find a valid URL in `servers`")
	require.NotEmpty(t, doc.Servers[0].URL)
	require.NotEmpty(t, doc.Paths)

	im := &importer{token: token, base: strings.TrimRight(doc.Servers[0].URL, "/"), tools: map[string]importedTool{}}
	for path, methods := range doc.Paths {
		for method, op := range methods {
			if op.OperationID == "" {
				continue
			}
			props := map[string]any{}
			var required []any
			for _, p := range op.Parameters { // every "in": header ones too
				props[p.Name] = p.Schema
				if p.Required {
					required = append(required, p.Name)
				}
			}
			if body, ok := op.RequestBody.Content["application/json"]; ok {
				for k, v := range body.Schema["properties"].(map[string]any) {
					props[k] = v
				}
				if r, ok := body.Schema["required"].([]any); ok {
					required = append(required, r...)
				}
			}
			desc := op.Description
			if desc == "" {
				desc = op.Summary
			}
			im.tools[op.OperationID] = importedTool{
				Name: op.OperationID, Description: desc,
				Parameters: map[string]any{"type": "object", "properties": props, "required": required},
				method:     strings.ToUpper(method), path: path,
			}
		}
	}
	return im
}

func (im *importer) names() []string {
	var out []string
	for n := range im.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// call runs a tool with the model's arguments and returns what the model
// is handed.
func (im *importer) call(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	tl, ok := im.tools[name]
	require.True(t, ok, name)
	body, err := json.Marshal(args)
	require.NoError(t, err)
	req, err := http.NewRequest(tl.method, im.base+tl.path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+im.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode >= 400 {
		return fmt.Sprintf("HTTP error %d: %s", resp.StatusCode, text)
	}
	return string(text)
}

// TestImporterReadEditRefusedEdit: an importer reads /openapi.json, gets
// exactly the tools with their catalog texts and schemas (and no session
// argument), and runs read → edit → a refused edit through it, with no
// header configuration beyond the token: the session is --default-session,
// here the binary's default id (cmd/toolfs-api's TestOpenWebUIToolServerDefaults
// runs the same through the binary).
func TestImporterReadEditRefusedEdit(t *testing.T) {
	h := start(t, options{token: "tok", sessions: tools.Sessions{Default: "default"}})
	h.file("notes.md", "# Notes\n- todo: ship\n")
	h.file("other.md", "other\n")
	im := importTools(t, h.srv.URL, "tok")

	cat := catalogOf(t, h)
	var want []string
	for _, tl := range cat.Tools {
		want = append(want, tl.Name)
		got := im.tools[tl.Name]
		assert.Equal(t, tl.Description+"\n\n"+tl.Guidance, got.Description)
		var params map[string]any
		require.NoError(t, json.Unmarshal(tl.Parameters, &params))
		gotJSON, _ := json.Marshal(got.Parameters)
		wantJSON, _ := json.Marshal(params)
		assert.JSONEq(t, string(wantJSON), string(gotJSON), "%s: the model sees the catalog's schema", tl.Name)
		for prop := range got.Parameters["properties"].(map[string]any) {
			assert.False(t, strings.HasPrefix(strings.ToLower(prop), "x-"), "%s: header %s became a model argument", tl.Name, prop)
		}
	}
	sort.Strings(want)
	assert.Equal(t, want, im.names())

	p := h.path("notes.md")
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\n1: # Notes\n2: - todo: ship\n\n(End of file - total 2 lines)\n</content>",
		im.call(t, "read", map[string]any{"file_path": "notes.md"}))
	assert.Equal(t, "The file "+p+" has been updated successfully.",
		im.call(t, "edit", map[string]any{"file_path": "notes.md", "old_string": "todo", "new_string": "done"}))
	assert.Equal(t, "# Notes\n- done: ship\n", h.contents("notes.md"))
	assert.Equal(t, `HTTP error 409: Error: edit requires reading "`+h.path("other.md")+`" first — read the file, then retry`,
		im.call(t, "edit", map[string]any{"file_path": "other.md", "old_string": "other", "new_string": "x"}))
	assert.Equal(t, "other\n", h.contents("other.md"))
}

// TestImporterInTheAnchorsDialect: an importer configured with the view
// of the anchors dialect (Open WebUI: the connection's path
// openapi.json?dialect=anchors) gets edit_lines and not edit, and its
// reads, through the path the view names, answer with anchors, so the
// model can cite them (docs/frontends.md, "Edit dialects").
func TestImporterInTheAnchorsDialect(t *testing.T) {
	h := start(t, options{token: "tok", sessions: tools.Sessions{Default: "default"}})
	h.file("notes.md", "# Notes\n- todo: ship\n")
	im := importTools(t, h.srv.URL, "tok", "openapi.json?dialect=anchors")
	assert.Equal(t, []string{"delete", "edit_lines", "glob", "grep", "mkdir", "move", "read", "write"}, im.names())
	p := h.path("notes.md")
	first, second := anchor(1, "# Notes"), anchor(2, "- todo: ship")
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\n"+first+": # Notes\n"+second+": - todo: ship\n\n(End of file - total 2 lines)\n</content>",
		im.call(t, "read", map[string]any{"file_path": "notes.md"}))
	assert.Equal(t, "The file "+p+" has been updated successfully.\nLines 2-2 now:\n"+anchor(2, "- done: ship")+": - done: ship",
		im.call(t, "edit_lines", map[string]any{"file_path": "notes.md", "edits": []any{map[string]any{"op": "replace", "start": second, "text": "- done: ship"}}}))
	assert.Equal(t, "# Notes\n- done: ship\n", h.contents("notes.md"))
}
