package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsToken: --metrics-token is accepted on GET /metrics and
// nowhere else. Beside --token, /metrics takes either; alone, it closes
// /metrics to everyone without it while the other routes stay open as
// without a token.
func TestMetricsToken(t *testing.T) {
	get := func(url, token string) int {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Run("beside --token", func(t *testing.T) {
		base, stop := startRun(t, []string{"--root", t.TempDir(), "--addr", "127.0.0.1:0", "--lock-dir", "off", "--token", "agent-token", "--metrics-token", "scrape-token"})
		defer stop()
		assert.Equal(t, 200, get(base+"/metrics", "scrape-token"))
		assert.Equal(t, 200, get(base+"/metrics", "agent-token"))
		assert.Equal(t, 401, get(base+"/metrics", ""))
		assert.Equal(t, 401, get(base+"/metrics", "wrong"))
		for _, p := range []string{"/tools", "/openapi.yaml", "/events", "/files", "/approvals"} {
			assert.Equal(t, 401, get(base+p, "scrape-token"), p)
			assert.Equal(t, 200, get(base+p, "agent-token"), p)
		}
		req, err := http.NewRequest("POST", base+"/tools/read", strings.NewReader(`{"file_path":"a.txt"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer scrape-token")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 401, resp.StatusCode)
	})
	t.Run("alone", func(t *testing.T) {
		base, stop := startRun(t, []string{"--root", t.TempDir(), "--addr", "127.0.0.1:0", "--lock-dir", "off", "--metrics-token", "scrape-token"})
		defer stop()
		assert.Equal(t, 200, get(base+"/metrics", "scrape-token"))
		assert.Equal(t, 401, get(base+"/metrics", ""))
		assert.Equal(t, 200, get(base+"/tools", ""))
	})
	t.Run("without", func(t *testing.T) {
		base, stop := startRun(t, []string{"--root", t.TempDir(), "--addr", "127.0.0.1:0", "--lock-dir", "off"})
		defer stop()
		assert.Equal(t, 200, get(base+"/metrics", ""))
	})
}
