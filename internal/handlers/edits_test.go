package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCatalogProfiles: the default (extended) catalog adds dry_run and
// edits after the original's properties; every other byte is the
// original profile's.
func TestCatalogProfiles(t *testing.T) {
	tools := func(h *harness) []map[string]json.RawMessage {
		r := h.do(http.MethodGet, "/tools", "")
		require.Equal(t, 200, r.Status)
		var cat struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Raw), &cat))
		return cat.Tools
	}
	ext, orig := tools(start(t, options{})), tools(start(t, options{profile: "original"}))
	require.Equal(t, len(orig), len(ext))
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to write, resolved by the filesystem backend."},"content":{"type":"string","description":"Full UTF-8 text content to write."},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path","content"]}`, string(ext[1]["parameters"]))
	assert.Equal(t, `{"type":"object","properties":{"file_path":{"type":"string","description":"Path to edit, resolved by the filesystem backend."},"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."},"edits":{"type":"array","description":"Several edits applied in order, each to the result of the ones before, all or nothing (1-100 items). Send instead of old_string, new_string and replace_all.","minItems":1,"maxItems":100,"items":{"type":"object","properties":{"old_string":{"type":"string","description":"Literal text to replace. Must match exactly."},"new_string":{"type":"string","description":"Literal replacement text. Use an empty string to delete the match."},"replace_all":{"type":"boolean","description":"Replace all matches. Defaults to false; when false, old_string must appear exactly once."}},"required":["old_string","new_string"]}},"dry_run":{"type":"boolean","description":"Check everything (arguments, the read-before-write policy, matching) and return the change as a unified diff without writing anything. Defaults to false."}},"required":["file_path"]}`, string(ext[2]["parameters"]))
	for i := range orig {
		for k, v := range orig[i] {
			if k == "parameters" && (i == 1 || i == 2) {
				continue
			}
			assert.Equal(t, string(v), string(ext[i][k]), "tool %d %s", i, k)
		}
	}
}
