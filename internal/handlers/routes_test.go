package handlers_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// TestEveryOperationIsRouted: routes.go, written by hand, serves exactly the
// operations of api/openapi.yaml (raw ones included): each answers with its
// method, every other method on its path is 405 METHOD_NOT_ALLOWED, and a
// path the contract does not name is 404 NOT_FOUND, as JSON problems except
// under /model/, where they are text.
func TestEveryOperationIsRouted(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromData(api.SpecYAML)
	require.NoError(t, err)
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Events: events.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}})
	require.NoError(t, os.WriteFile(filepath.Join(srv.Root, "f.txt"), []byte("f"), 0o644))
	do := func(method, path string) (int, string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			return resp.StatusCode, "", "" // GET /events streams on
		}
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}
	operations := 0
	for path, item := range spec.Paths.Map() {
		url := strings.ReplaceAll(strings.ReplaceAll(path, "{id}", "x"), "{path}", "f.txt")
		for _, m := range methods {
			status, ctype, body := do(m, url)
			if item.GetOperation(m) != nil {
				operations++
				assert.NotContains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, status, "%s %s: %s", m, path, body)
				continue
			}
			assert.Equal(t, http.StatusMethodNotAllowed, status, "%s %s: %s", m, path, body)
			if strings.HasPrefix(path, "/model/") {
				assert.Equal(t, "Error: method "+m+" is not allowed on "+url, body)
			} else {
				assert.Equal(t, "application/problem+json", ctype, "%s %s", m, path)
				assert.Contains(t, body, `"code":"METHOD_NOT_ALLOWED"`, "%s %s", m, path)
			}
		}
	}
	assert.Equal(t, 38, operations, "the contract's operations")
	for _, path := range []string{"/", "/nope", "/tools/nope", "/tools/read/x", "/sessions/", "/approvals/", "/approvals/x/y", "/healthz/", "/readyz/", "/mcp/", "/model"} {
		status, ctype, body := do(http.MethodGet, path)
		assert.Equal(t, http.StatusNotFound, status, "%s: %s", path, body)
		assert.Equal(t, "application/problem+json", ctype, path)
		assert.Contains(t, body, `"detail":"no such endpoint: GET `+path+`"`)
	}
	status, _, body := do(http.MethodPost, "/model/nope")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "Error: no such endpoint: POST /model/nope", body)
}
