package mcp_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCachedReadIsRESTOutput: reads of an unchanged file, whose text is
// encoded once from the cached window and kept with it, answer REST's
// output, over every revision, for a whole file and for a window.
func TestCachedReadIsRESTOutput(t *testing.T) {
	h := start(t, options{policyOff: true, cached: true})
	h.file("a.go", "package a\n\n\tif a < b && c > \"d\" {\u2028}\n")
	h.file("big.txt", strings.Repeat("0123456789abcdef <&> 0123456789abcdef\n", 3000))
	time.Sleep(10 * time.Millisecond) // past the nanosecond racy window
	for _, args := range []map[string]any{{"file_path": "a.go"}, {"file_path": "big.txt"}, {"file_path": "big.txt", "offset": 100, "limit": 7}} {
		want := h.rest("read", args)
		require.Equal(t, http.StatusOK, want.Status, want.Output)
		for _, v := range versions {
			c := h.connect(v.ask)
			for range 3 { // a miss or a hit, then hits
				text, isErr := c.call(t, "read", args)
				assert.False(t, isErr)
				assert.Equal(t, want.Output, text, "%s %v", v.name, args)
			}
		}
	}
}
