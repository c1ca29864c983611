package mcp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkBytes encodes res as the SDK answers a tools/call (its result encoded
// without HTML escaping, then the JSON-RPC response around it), and a batch
// of such answers as it joins them.
func sdkBytes(t *testing.T, results ...*sdk.CallToolResult) []byte {
	t.Helper()
	var msgs []json.RawMessage
	for i, res := range results {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(res))
		id, err := jsonrpc.MakeID(float64(i + 1))
		require.NoError(t, err)
		msg, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: bytes.TrimSuffix(b.Bytes(), []byte("\n"))})
		require.NoError(t, err)
		msgs = append(msgs, msg)
	}
	if len(msgs) == 1 {
		return msgs[0]
	}
	out, err := json.Marshal(msgs)
	require.NoError(t, err)
	return out
}

// TestHeldAnswersAreTheSDKsBytes: an answer whose texts the SDK carried as
// placeholders, spliced, is byte for byte the answer the SDK makes of the
// texts themselves, alone and in a batch.
func TestHeldAnswersAreTheSDKsBytes(t *testing.T) {
	texts := map[string]string{
		"read":      "<path>/r/a.txt</path>\n<type>file</type>\n<content>\n1: \tif a < b && c > d {\n\n(End of file - total 1 lines)\n</content>",
		"escapes":   "quote \" backslash \\ controls \x00\x01\x1f\r\t del \x7f",
		"unicode":   "é — 日本 \u2028 \u2029 😀",
		"invalid":   "bad \xff\xfe utf-8",
		"empty":     "",
		"lookalike": placeholderPrefix + "0",
	}
	meta, err := json.Marshal(map[string]any{"path": "/r/<a>&b.txt", "lines": []any{map[string]any{"number": 1, "text": "x\u2028y"}}})
	require.NoError(t, err)
	for name, text := range texts {
		t.Run(name, func(t *testing.T) {
			res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: json.RawMessage(meta)}
			failed := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "Error: " + text}}}
			h := &held{}
			lowered, lowFailed := h.lower(res, nil), h.lower(failed, nil)
			require.Contains(t, string(sdkBytes(t, lowered)), `"`+placeholderPrefix, "the SDK sees placeholders")
			assert.Equal(t, string(sdkBytes(t, res)), string(h.splice(sdkBytes(t, lowered))))
			assert.Equal(t, string(sdkBytes(t, failed)), string(h.splice(sdkBytes(t, lowFailed))))
			assert.Equal(t, string(sdkBytes(t, res, failed)), string(h.splice(sdkBytes(t, lowered, lowFailed))))
			assert.Equal(t, text, res.Content[0].(*sdk.TextContent).Text, "the result itself is left as it was")
			// A text encoded beforehand (a read's, readText) in an empty slot.
			encoded, err := json.Marshal(text)
			require.NoError(t, err)
			slot := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{}}, StructuredContent: json.RawMessage(meta)}
			assert.Equal(t, string(sdkBytes(t, res)), string(h.splice(sdkBytes(t, h.lower(slot, encoded)))))
		})
	}
}

// TestSpliceLeavesTheRest: what is not one of the request's placeholders,
// quoted, passes as it is.
func TestSpliceLeavesTheRest(t *testing.T) {
	h := &held{}
	p := h.hold([]byte(`"x"`))
	for _, body := range []string{
		`{"text":"plain"}`,
		`{"text":"` + placeholderPrefix + `"}`,
		`{"text":"` + placeholderPrefix + `1"}`,
		`{"text":"` + placeholderPrefix + `0x"}`,
		`{"text":"` + placeholderPrefix + `0`,
		`{"text":"toolfs-answer-OTHER-0"}`,
		`{"text":` + p + `}`, // not quoted
	} {
		assert.Equal(t, body, string(h.splice([]byte(body))), body)
	}
	assert.Equal(t, `{"a":"x","b":"x"}`, string(h.splice([]byte(`{"a":"`+p+`","b":"`+p+`"}`))))
	var none *held
	assert.Equal(t, `"`+p+`"`, string(none.splice([]byte(`"`+p+`"`))))
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "t"}}}
	assert.Same(t, res, none.lower(res, nil))
}
