package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// owuiConnection is an Open WebUI OpenAPI tool-server connection as its
// backend loads and calls it (docs/frontends.md, "Open WebUI"): the spec is
// fetched from the connection's URL + "/openapi.json" with Accept and
// Content-Type application/json and the bearer key; a tool call POSTs the
// model's arguments as JSON to the connection's URL + the operation's path
// (the document's servers are not used) with Content-Type and Authorization
// and whatever headers the version adds (none on 0.6: headers is nil).
// aiohttp adds its own Accept, Accept-Encoding and User-Agent, sent here too.
type owuiConnection struct {
	url, key string
	ops      map[string]string // operationId → path, every one a POST
}

func aiohttpHeaders(h http.Header) {
	h.Set("Accept", "*/*")
	h.Set("Accept-Encoding", "gzip, deflate")
	h.Set("User-Agent", "Python/3.11 aiohttp/3.12.15")
}

// owuiLoad fetches the spec; extra are headers of a connection check that
// sends the connection's own headers (0.9.3 on, templates expanded empty).
func owuiLoad(t *testing.T, url, key string, extra http.Header) (*owuiConnection, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/openapi.json", nil)
	require.NoError(t, err)
	aiohttpHeaders(req.Header)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, resp.StatusCode
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	c := &owuiConnection{url: url, key: key, ops: map[string]string{}}
	for path, methods := range doc.Paths {
		for method, op := range methods {
			require.Equal(t, "post", method, path)
			c.ops[op.OperationID] = path
		}
	}
	return c, 200
}

// call sends body (the model's arguments as Python's json.dumps writes
// them) and returns what the model is handed by Open WebUI 0.6.23 and
// later: a text answer as it is; a status of 400 or more as
// {"error": "HTTP error <status>: <text>"}, which Open WebUI serializes with
// json.dumps(indent=2, ensure_ascii=False).
func (c *owuiConnection) call(t *testing.T, tool, body string, headers http.Header) string {
	t.Helper()
	path, ok := c.ops[tool]
	require.True(t, ok, tool)
	req, err := http.NewRequest(http.MethodPost, c.url+path, strings.NewReader(body))
	require.NoError(t, err)
	aiohttpHeaders(req.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	for k, v := range headers {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	// Not JSON: releases before 0.6.23 decoded every answer as JSON and told
	// the model the call failed; later ones hand this text over as it is.
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	if resp.StatusCode >= 400 {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		require.NoError(t, enc.Encode(map[string]string{"error": "HTTP error " + strconv.Itoa(resp.StatusCode) + ": " + string(text)}))
		return strings.TrimSuffix(b.String(), "\n")
	}
	return string(text)
}

// TestOpenWebUIToolServerDefaults: Open WebUI 0.6 (and any later release
// without ENABLE_FORWARD_USER_INFO_HEADERS or a header template) sends no
// chat id; with nothing but the token configured, its read then edit works
// in the default session, and the server cannot tell its chats apart: a read
// in one chat lets another chat edit the file.
func TestOpenWebUIToolServerDefaults(t *testing.T) {
	root := t.TempDir()
	notes := filepath.Join(root, "notes.md")
	require.NoError(t, os.WriteFile(notes, []byte("# Notes\n- todo: ship\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "other.md"), []byte("other\n"), 0o644))
	base, stop := startRun(t, []string{"--root", root, "--addr", "127.0.0.1:0", "--token", "tok", "--lock-dir", "off"})
	defer stop()

	c, status := owuiLoad(t, base, "tok", nil)
	require.Equal(t, 200, status)
	assert.Contains(t, c.ops, "read")
	assert.Contains(t, c.ops, "edit")

	// Chat 1: read, then edit.
	assert.Equal(t, "<path>"+notes+"</path>\n<type>file</type>\n<content>\n1: # Notes\n2: - todo: ship\n\n(End of file - total 2 lines)\n</content>",
		c.call(t, "read", `{"file_path": "notes.md"}`, nil))
	assert.Equal(t, "The file "+notes+" has been updated successfully.",
		c.call(t, "edit", `{"file_path": "notes.md", "old_string": "todo", "new_string": "done"}`, nil))

	// Chat 2 sends the same headers: it is the same session, so chat 1's
	// read lets it edit.
	assert.Equal(t, "The file "+notes+" has been updated successfully.",
		c.call(t, "edit", `{"file_path": "notes.md", "old_string": "ship", "new_string": "shipped"}`, nil))
	b, err := os.ReadFile(notes)
	require.NoError(t, err)
	assert.Equal(t, "# Notes\n- done: shipped\n", string(b))

	// A file no chat read is still refused, and the model is told why.
	other := filepath.Join(root, "other.md")
	assert.Equal(t, "{\n  \"error\": \"HTTP error 409: Error: edit requires reading \\\""+other+"\\\" first — read the file, then retry\"\n}",
		c.call(t, "edit", `{"file_path": "other.md", "old_string": "other", "new_string": "x"}`, nil))
	b, err = os.ReadFile(other)
	require.NoError(t, err)
	assert.Equal(t, "other\n", string(b))
}

// owuiForwarded is what Open WebUI 0.8.0 and later add to a tool-server
// call with ENABLE_FORWARD_USER_INFO_HEADERS=true.
func owuiForwarded(chat, message string) http.Header {
	h := http.Header{}
	h.Set("X-OpenWebUI-User-Name", "Ada Lovelace")
	h.Set("X-OpenWebUI-User-Id", "8f1c2b6e-5d0a-4c1e-9a77-0b3d2e4f6a81")
	h.Set("X-OpenWebUI-User-Email", "ada@example.com")
	h.Set("X-OpenWebUI-User-Role", "user")
	h.Set("X-OpenWebUI-Chat-Id", chat)
	h.Set("X-OpenWebUI-Message-Id", message)
	return h
}

// TestOpenWebUIPerChatSessions: with the chat id forwarded (0.8.0 on,
// ENABLE_FORWARD_USER_INFO_HEADERS=true, and --session-headers
// X-OpenWebUI-Chat-Id) or sent by a header template (0.9.3 on, X-Session-ID:
// {{CHAT_ID}}), each chat is its own session: one chat's read does not let
// another edit. The template's empty expansion during a connection check
// counts as absent; the unexpanded template that releases before 0.9.3 send
// is a malformed id, refused on every route.
func TestOpenWebUIPerChatSessions(t *testing.T) {
	root := t.TempDir()
	notes := filepath.Join(root, "notes.md")
	base, stop := startRun(t, []string{"--root", root, "--addr", "127.0.0.1:0", "--token", "tok", "--lock-dir", "off",
		"--session-headers", "X-OpenWebUI-Chat-Id"})
	defer stop()
	refused := "{\n  \"error\": \"HTTP error 409: Error: edit requires reading \\\"" + notes + "\\\" first — read the file, then retry\"\n}"
	updated := "The file " + notes + " has been updated successfully."

	c, status := owuiLoad(t, base, "tok", nil)
	require.Equal(t, 200, status)
	for _, tc := range []struct {
		name   string
		chats  [2]string
		chatOf func(chat, message string) http.Header
	}{
		{"forwarded X-OpenWebUI-Chat-Id", [2]string{"3c1d9a4e-0001", "3c1d9a4e-0002"}, owuiForwarded},
		{"X-Session-ID template", [2]string{"3c1d9a4e-0003", "3c1d9a4e-0004"},
			func(chat, _ string) http.Header { return http.Header{"X-Session-Id": {chat}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(notes, []byte("one\n"), 0o644))
			a := tc.chatOf(tc.chats[0], "m1")
			other := tc.chatOf(tc.chats[1], "m2")
			assert.Contains(t, c.call(t, "read", `{"file_path": "notes.md"}`, a), "1: one\n")
			assert.Equal(t, refused, c.call(t, "edit", `{"file_path": "notes.md", "old_string": "one", "new_string": "two"}`, other))
			assert.Equal(t, updated, c.call(t, "edit", `{"file_path": "notes.md", "old_string": "one", "new_string": "two"}`, a))
		})
	}

	// A connection check expands {{CHAT_ID}} to "".
	_, status = owuiLoad(t, base, "tok", http.Header{"X-Session-Id": {""}})
	assert.Equal(t, 200, status)
	// Before 0.9.3 the template is sent as it is written.
	_, status = owuiLoad(t, base, "tok", http.Header{"X-Session-Id": {"{{CHAT_ID}}"}})
	assert.Equal(t, 400, status)
	assert.Equal(t, "{\n  \"error\": \"HTTP error 400: Error: malformed X-Session-ID: it must be 1-128 characters of A-Za-z0-9._:-\"\n}",
		c.call(t, "read", `{"file_path": "notes.md"}`, http.Header{"X-Session-Id": {"{{CHAT_ID}}"}}))
}

// TestOpenWebUIDirectToolServer: a user ("direct") tool server is called by
// the browser, which from 0.9.0 sends the chat id as X-Session-Id and no
// other header of the connection's; toolfs-api allows that header in CORS
// and each chat is its own session with no flag but --cors-origins.
func TestOpenWebUIDirectToolServer(t *testing.T) {
	root := t.TempDir()
	notes := filepath.Join(root, "notes.md")
	require.NoError(t, os.WriteFile(notes, []byte("one\n"), 0o644))
	const origin = "https://openwebui.example.com"
	base, stop := startRun(t, []string{"--root", root, "--addr", "127.0.0.1:0", "--token", "tok", "--lock-dir", "off",
		"--cors-origins", origin})
	defer stop()

	req, err := http.NewRequest(http.MethodOptions, base+"/model/edit", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-session-id")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-session-id")

	// The browser's fetch: Content-Type, authorization, X-Session-Id; the
	// body is JSON.stringify of the arguments.
	browser := func(tool, body, chat string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+"/model/"+tool, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("X-Session-Id", chat)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		text, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(text)
	}
	status, text := browser("read", `{"file_path":"notes.md"}`, "chat-a")
	require.Equal(t, 200, status, text)
	status, text = browser("edit", `{"file_path":"notes.md","old_string":"one","new_string":"two"}`, "chat-b")
	assert.Equal(t, 409, status, text)
	status, text = browser("edit", `{"file_path":"notes.md","old_string":"one","new_string":"two"}`, "chat-a")
	assert.Equal(t, 200, status, text)
	assert.Equal(t, "The file "+notes+" has been updated successfully.", text)
}

// TestOpenWebUIMCPTurns: Open WebUI's MCP client opens one MCP session per
// chat request (one answer of the assistant, with all its tool calls) and
// closes it after. Without a chat id the MCP session is the policy session:
// a read and an edit in one answer work; an edit in the next answer of a
// file read in an earlier one is refused until the model reads it again.
// With the chat id forwarded (0.8.0 on) and --session-headers, the chat is
// the session across answers.
func TestOpenWebUIMCPTurns(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "a.txt")
	base, stop := startRun(t, []string{"--root", root, "--addr", "127.0.0.1:0", "--lock-dir", "off",
		"--session-headers", "X-OpenWebUI-Chat-Id"})
	defer stop()

	// answer runs one answer's tool calls in one new MCP session.
	answer := func(h http.Header, calls ...map[string]any) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "mcp", Version: "0.1.0"}, nil).Connect(ctx,
			&mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: headerTransport(h)}, MaxRetries: -1},
			&mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
		require.NoError(t, err)
		defer cs.Close()
		require.NotEmpty(t, cs.ID())
		var out []string
		for _, args := range calls {
			tool := args["tool"].(string)
			delete(args, "tool")
			res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: tool, Arguments: args})
			require.NoError(t, err)
			out = append(out, res.Content[0].(*mcpsdk.TextContent).Text)
		}
		return out
	}
	read := func() map[string]any { return map[string]any{"tool": "read", "file_path": "a.txt"} }
	edit := func(from, to string) map[string]any {
		return map[string]any{"tool": "edit", "file_path": "a.txt", "old_string": from, "new_string": to}
	}
	updated := "The file " + file + " has been updated successfully."
	refused := `Error: edit requires reading "` + file + `" first — read the file, then retry`

	require.NoError(t, os.WriteFile(file, []byte("one\n"), 0o644))
	got := answer(nil, read(), edit("one", "two"))
	assert.Equal(t, updated, got[1], "one answer, one MCP session")
	got = answer(nil, edit("two", "three"))
	assert.Equal(t, refused, got[0], "the next answer is a new MCP session")

	chat := owuiForwarded("c0ffee00-1", "m1")
	answer(chat, read())
	got = answer(chat, edit("two", "three"))
	assert.Equal(t, updated, got[0], "the forwarded chat id carries the read across answers")
}
