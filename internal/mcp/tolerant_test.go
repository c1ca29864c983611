package mcp_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTolerantEditSameText: an edit found at each disclosed level of the
// tolerant edit (docs/edits.md, "Tolerant edits"), and a batch, answer over
// MCP exactly the REST output, disclosure included; an ambiguous place at a
// tolerant level is the same error text.
func TestTolerantEditSameText(t *testing.T) {
	h := start(t, options{policyOff: true})
	c := h.connect("")
	for _, tc := range []struct {
		name, file string
		args       map[string]any
	}{
		{"prefixes", "a\n  b\nc\n", map[string]any{"old_string": "2:   b", "new_string": "2:   B"}},
		{"trailing whitespace", "x  \ny\n", map[string]any{"old_string": "x\ny", "new_string": "z"}},
		{"indentation", "  a\n  b\n", map[string]any{"old_string": "a\nb", "new_string": "c"}},
		{"escapes", "a\nb\n", map[string]any{"old_string": `a\nb`, "new_string": "c"}},
		{"punctuation", "“q”\n", map[string]any{"old_string": `"q"`, "new_string": "q"}},
		{"batch", "one\n  two\n", map[string]any{"edits": []map[string]any{{"old_string": "one", "new_string": "1"}, {"old_string": "two ", "new_string": "2"}}}},
		{"ambiguous", "  a\n    a\n", map[string]any{"old_string": "a ", "new_string": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"file_path": "f.txt"}
			for k, v := range tc.args {
				args[k] = v
			}
			h.file("f.txt", tc.file)
			text, isErr := c.call(t, "edit", args)
			mcpFile := h.contents("f.txt")
			h.file("f.txt", tc.file)
			r := h.rest("edit", args)
			assert.Equal(t, r.Output, text)
			assert.Equal(t, r.Status != http.StatusOK, isErr)
			assert.Equal(t, h.contents("f.txt"), mcpFile)
		})
	}
	h.file("f.txt", "  a\n  b\n")
	text, isErr := c.call(t, "edit", map[string]any{"file_path": "f.txt", "old_string": "a\nb", "new_string": "c"})
	require.False(t, isErr)
	assert.Equal(t, "The file "+filepath.Join(h.srv.Root, "f.txt")+" has been updated successfully.\nMatched after ignoring indentation at lines 1-2.", text)
	assert.Equal(t, "  c\n", h.contents("f.txt"))
}
