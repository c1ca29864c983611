package mcp_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLiftedAndNotLiftedCallsAnswerAlike: a tools/call whose arguments the
// transport takes out of the body before the SDK reads it, and calls it
// leaves to the SDK (a key written with an escape, which the SDK decodes as
// the same key), run the same tool and answer the same bytes, over a
// session revision and the sessionless one.
func TestLiftedAndNotLiftedCallsAnswerAlike(t *testing.T) {
	h := start(t, options{policyOff: true})
	sessionless := append(append([]string{}, mcpPost...), "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "write")
	for name, headers := range map[string][]string{"2025-11-25": h.open(t, "2025-11-25"), "2026-07-28": sessionless} {
		t.Run(name, func(t *testing.T) {
			meta := ""
			if name == "2026-07-28" {
				meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
			}
			var answers []string
			for i, key := range []string{`"arguments"`, `"argu\u006dents"`, `"arguments"`} {
				content := "line one\n\tline <two> & \"three\"\n"
				args, _ := json.Marshal(map[string]any{"file_path": "w.txt", "content": content})
				body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write",` + key + `:` + string(args) + meta + `}}`
				if i == 2 { // spaces everywhere, members reordered
					body = "{ \"params\" : { " + key + " :\n" + string(args) + " , \"name\" : \"write\"" + meta + " } ,\n\"id\" : 7 , \"method\" : \"tools/call\" , \"jsonrpc\" : \"2.0\" }"
				}
				h.file("w.txt", "old\n")
				r := h.raw(http.MethodPost, "/mcp", body, headers...)
				require.Equal(t, http.StatusOK, r.status, r.body)
				assert.Equal(t, content, h.contents("w.txt"))
				answers = append(answers, r.body)
			}
			assert.Contains(t, answers[0], `Updated file`)
			assert.NotContains(t, answers[0], `isError`)
			assert.Equal(t, answers[0], answers[1])
			assert.Equal(t, answers[0], answers[2])
		})
	}
}
