package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLiftArgs(t *testing.T) {
	lifted := map[string]string{ // body: the arguments lifted out
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a"}}}`:                                                     `{"file_path":"a"}`,
		" {\n \"params\" : { \"arguments\" :\t{ \"x\" : [1, {\"y\":\"}\\\"\"}] } , \"name\":\"w\" }, \"method\":\"tools/call\",\"id\":\"s\",\"jsonrpc\":\"2.0\"}\n": `{ "x" : [1, {"y":"}\""}] }`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{},"name":"edit","_meta":{"k":"\u00e9"}}}`:                                             `{}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write","arguments":{"content":"a\\\\"}}}`:                                                  `{"content":"a\\\\"}`,
	}
	for body, args := range lifted {
		spliced, got, ok := liftArgs([]byte(body))
		require.True(t, ok, body)
		assert.Equal(t, args, string(got), body)
		at := strings.Index(body, args)
		assert.Equal(t, body[:at]+"{}"+body[at+len(args):], string(spliced))
	}
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a"}}}]`, // a batch
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}`,             // another method
		`{"jsonrpc":"2.0","id":1,"params":{"name":"read","arguments":{"file_path":"a"}}}`,                         // no method
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","argu\u006dents":{"file_path":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"read","arguments":{"file_path":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","p\u0061rams":{"name":"read","arguments":{"file_path":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a"},"arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{}},"params":{"name":"read","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a"}}} {}`, // trailing data
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a}}}`,     // invalid
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}}`,
		``, `null`, `{}`,
	} {
		_, _, ok := liftArgs([]byte(body))
		assert.False(t, ok, body)
	}
}

// FuzzLiftArgs: whatever is lifted is what the SDK's own decoding finds as
// the call's arguments, and the body the SDK gets instead decodes to the
// same message but for {} in their place.
func FuzzLiftArgs(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a"}}}`,
		`{"method":"tools/call","params":{"arguments":{"s":"\"}\\"},"name":"x"},"id":"1","jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a"},"arguments":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spliced, args, ok := liftArgs(body)
		if !ok {
			return
		}
		orig, oerr := jsonrpc.DecodeMessage(body)
		got, gerr := jsonrpc.DecodeMessage(spliced)
		if oerr != nil { // refused either way, with the same words
			require.Error(t, gerr)
			assert.Equal(t, oerr.Error(), gerr.Error())
			return
		}
		require.NoError(t, gerr)
		oreq, greq := orig.(*jsonrpc.Request), got.(*jsonrpc.Request)
		require.Equal(t, "tools/call", oreq.Method)
		assert.Equal(t, oreq.Method, greq.Method)
		assert.Equal(t, oreq.ID, greq.ID)
		var op, gp map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(oreq.Params, &op))
		require.NoError(t, json.Unmarshal(greq.Params, &gp))
		assert.True(t, bytes.Equal(op["arguments"], args), "%s", body)
		assert.Equal(t, "{}", string(gp["arguments"]))
		delete(op, "arguments")
		delete(gp, "arguments")
		assert.Equal(t, op, gp)
	})
}
