package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const writeArgs = `"arguments":{"file_path":"n.txt","content":"x"}`

func toolsCall(params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `}}`
}

// scopeCases are bodies and whether callsWritingTool holds them to the
// write scope.
var scopeCases = map[string]bool{
	toolsCall(`"name":"write",` + writeArgs):                                                                    true,
	toolsCall(`"name":"read","arguments":{"file_path":"a"}`):                                                    false,
	toolsCall(`"name":"write","Name":"read",` + writeArgs):                                                      true, // the SDK matches keys exactly
	toolsCall(`"name":"read","Name":"write","arguments":{}`):                                                    false,
	toolsCall(`"name":"write",` + writeArgs + `,"name":"read"`):                                                 true, // twice: ambiguous
	toolsCall(`"n\u0061me":"write",` + writeArgs):                                                               true, // an escaped key
	toolsCall(`"name":"wr\u0069te",` + writeArgs):                                                               true, // an escaped value, unescaped
	toolsCall(`"name":"edit","arguments":{}`):                                                                   true,
	toolsCall(`"name":"revert","arguments":{"to":0}`):                                                           true,
	toolsCall(`"name":"write",`+writeArgs) + " {}":                                                              true, // not one JSON value
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"ping","params":{"name":"write"}}`:                  true,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"write"}}`:            true,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write"},"params":{"name":"read"}}`:         true,
	`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"write"}}`:                                 true,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"write"}}`:                                  false,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write"},"jsonrpc":"2.0"}`:                  true,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"},"jsonrpc":"2.0"}`:                   false, // a key twice that decides nothing
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["write"]}`:                                         false,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`:                                        false,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`:                                                    false,
	`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},` + toolsCall(`"name":"write","Name":"read"`) + `]`:        true,
	`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},` + toolsCall(`"name":"read","arguments":{}`) + `, 3, []]`: false,
	`{"method":"tools/call"}`: false, // no params
	`[]`:                      false,
	``:                        true,
	`{`:                       true,
}

func TestCallsWritingTool(t *testing.T) {
	for body, want := range scopeCases {
		assert.Equal(t, want, callsWritingTool([]byte(body)), body)
	}
}

// sdkCalls are the tools the SDK would call for body, read as its
// streamable transport reads a POST (readBatch, jsonrpc2.DecodeMessage,
// then the params with its case-sensitive segmentio decoder).
func sdkCalls(body []byte) []string {
	decode := func(b []byte, v any) error {
		d := segjson.NewDecoder(bytes.NewReader(b))
		d.DontMatchCaseInsensitiveStructFields()
		return d.Decode(v)
	}
	var raws []json.RawMessage
	if decode(body, &raws) != nil {
		raws = []json.RawMessage{body}
	}
	var names []string
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || req.Method != "tools/call" {
			continue
		}
		var p struct {
			Name string `json:"name"`
		}
		if decode(req.Params, &p) == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// FuzzCallsWritingTool: a body that callsWritingTool lets through without
// the write scope never makes the SDK call a tool that writes.
func FuzzCallsWritingTool(f *testing.F) {
	for body := range scopeCases {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if callsWritingTool(body) {
			return
		}
		for _, name := range sdkCalls(body) {
			switch name {
			case "write", "edit", "revert":
				t.Fatalf("%q lets the SDK call %s", body, name)
			}
		}
	})
}

// TestSDKReadsCallsAsScopeAssumes pins what callsWritingTool relies on in
// the SDK pinned in go.mod, through its own stateful HTTP handler on
// 2025-03-26: it matches params' keys exactly, takes the last of a key
// given twice, unescapes keys, and ignores what follows the first JSON
// value.
func TestSDKReadsCallsAsScopeAssumes(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	srv := sdk.NewServer(&sdk.Implementation{Name: "pin", Version: "0"}, nil)
	for _, name := range []string{"read", "write"} {
		srv.AddTool(&sdk.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: true})
	post := func(session, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
			r.Header.Set("MCP-Protocol-Version", "2025-03-26")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Equal(t, 200, w.Code, w.Body.String())
	session := w.Header().Get("Mcp-Session-Id")
	require.Equal(t, 202, post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Code)
	for body, tool := range map[string]string{
		toolsCall(`"name":"write","Name":"read","arguments":{}`): "write",
		toolsCall(`"name":"write","arguments":{},"name":"read"`): "read",
		toolsCall(`"n\u0061me":"write","arguments":{}`):          "write",
		toolsCall(`"name":"write","arguments":{}`) + ` {}`:       "write",
	} {
		mu.Lock()
		ran = nil
		mu.Unlock()
		w := post(session, body)
		require.Equal(t, 200, w.Code, w.Body.String())
		mu.Lock()
		assert.Equal(t, []string{tool}, ran, body)
		mu.Unlock()
		assert.True(t, callsWritingTool([]byte(body)), body)
		assert.Equal(t, []string{tool}, sdkCalls([]byte(body)), "the fuzz target's model of the SDK: %s", body)
	}
}
