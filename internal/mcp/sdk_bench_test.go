package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/require"
)

// BenchmarkSDK measures the Go SDK alone, none of toolfs-api: one
// tools/call served by sdk.NewStreamableHTTPHandler (JSON answers, no
// socket: an httptest recorder) to a raw tool handler that returns a fixed
// text, on the sessionless revision (a session built and closed per
// request) and in one 2025-11-25 session; beside it the floor, a handler
// that decodes the same body with encoding/json and writes the same
// answer with one json.Marshal. "read" is a small call answered with a
// 51 KB window's text, "write" a 60 KiB content answered with one line,
// "small" a small call answered with one line: the SDK's cost per call
// that no payload explains.
// docs/performance.md, "MCP at the speed of REST", has the figures.
//
//	go test -run '^$' -bench BenchmarkSDK -benchmem ./internal/mcp
func BenchmarkSDK(b *testing.B) {
	window := strings.Repeat("1234: \tv1234 := compute(a, b) * 0042 // <xx>\n", 1150)
	calls := map[string]struct {
		args   map[string]any
		answer string
	}{
		"read":  {map[string]any{"file_path": "src.go"}, window},
		"write": {map[string]any{"file_path": "src.go", "content": benchFile()}, "<path>/r/src.go</path>\n<type>file</type>\n<content>\nUpdated file\n</content>"},
		"small": {map[string]any{"file_path": "src.go"}, "The file /r/src.go has been updated successfully."},
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "v0"}, nil)
	for name, c := range calls {
		srv.AddTool(&sdk.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: c.answer}}}, nil
			})
	}
	get := func(*http.Request) *sdk.Server { return srv }
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: 32 << 20})
	stateful := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{JSONResponse: true, MaxRequestBodyBytes: 32 << 20})

	serve := func(b *testing.B, h http.Handler, body []byte, headers ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		for i := 0; i+1 < len(mcpPost); i += 2 {
			r.Header.Set(mcpPost[i], mcpPost[i+1])
		}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code/100 != 2 || bytes.Contains(w.Body.Bytes(), []byte(`"error"`)) {
			b.Fatalf("%d %.300s", w.Code, w.Body.Bytes())
		}
		return w
	}
	rpc := func(method string, id int, params map[string]any) []byte {
		out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		require.NoError(b, err)
		return out
	}
	init := serve(b, stateful, rpc("initialize", 0, map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "b", "version": "0"}}))
	session := init.Header().Get("Mcp-Session-Id")
	serve(b, stateful, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), "Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-11-25")

	// floor: what any JSON-RPC-over-HTTP server must do for the same call.
	floor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": calls[msg.Params.Name].answer}}}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	})

	for _, name := range []string{"small", "read", "write"} {
		args := calls[name].args
		meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
		sessionless := rpc("tools/call", 1, map[string]any{"name": name, "arguments": args, "_meta": meta})
		inSession := rpc("tools/call", 1, map[string]any{"name": name, "arguments": args})
		b.Run("floor/"+name, func(b *testing.B) {
			reportCPU(b)
			for b.Loop() {
				serve(b, floor, inSession)
			}
		})
		b.Run("2026-07-28/"+name, func(b *testing.B) {
			reportCPU(b)
			for b.Loop() {
				serve(b, stateless, sessionless, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name)
			}
		})
		b.Run("2025-11-25/"+name, func(b *testing.B) {
			reportCPU(b)
			for b.Loop() {
				serve(b, stateful, inSession, "Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-11-25")
			}
		})
	}
}

// BenchmarkSDKDecode is the SDK's one decode of a tools/call's params, as
// its internal/json.Unmarshal makes it (a segmentio Decoder over a
// bytes.Reader, whose first read allocates a 32 KiB buffer whatever the
// size of the input), beside the same decode by segmentio's Parse over the
// bytes, with the same flag. The SDK makes about twelve such decodes per
// sessionless tools/call and about six in a session, whatever the size of
// the call (docs/performance.md, "What the SDK costs").
//
//	go test -run '^$' -bench BenchmarkSDKDecode -benchmem ./internal/mcp
func BenchmarkSDKDecode(b *testing.B) {
	body := []byte(`{"name":"read","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	type params struct {
		Meta      map[string]any  `json:"_meta,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}
	b.Run("decoder", func(b *testing.B) {
		for b.Loop() {
			var p params
			d := segjson.NewDecoder(bytes.NewReader(body))
			d.DontMatchCaseInsensitiveStructFields()
			if err := d.Decode(&p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			var p params
			rest, err := segjson.Parse(body, &p, segjson.DontMatchCaseInsensitiveStructFields)
			if err != nil || len(bytes.TrimSpace(rest)) != 0 {
				b.Fatal(err, rest)
			}
		}
	})
}
