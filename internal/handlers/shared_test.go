package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// TestApprovalsSharedThroughRedis: two servers on one root and one Redis
// session store are one approvals surface (docs/deployment.md, "Approvals
// and the change feed"): an escalation waiting on A is listed by B and
// decided through B, and A's call runs. While Redis is down, listing and
// deciding answer 503 SESSION_STORE_UNAVAILABLE, with these texts.
func TestApprovalsSharedThroughRedis(t *testing.T) {
	rs := redistest.Start(t)
	o := sbServerOptions(sbOptions{mode: "read-only"})
	o.SessionStore = rs.URL(0)
	a := &sb{t: t, srv: servertest.Start(t, o)}
	o.Root = a.srv.Root
	b := &sb{t: t, srv: servertest.Start(t, o)}
	a.file("ws/app.conf", "debug = false\n")
	require.Equal(t, 200, a.tool("read", "ws", map[string]any{"file_path": "app.conf"}).Status)
	done := a.async("edit", "ws", map[string]any{"file_path": "app.conf", "old_string": "false", "new_string": "true",
		"sandbox_permissions": "workspace-write", "justification": "The user asked to turn debugging on."})
	ps := b.pending(1, "")
	assert.Equal(t, "--- "+a.srv.Root+"/ws/app.conf\n+++ "+a.srv.Root+"/ws/app.conf\n@@ -1,1 +1,1 @@\n-debug = false\n+debug = true", ps[0].Diff)
	require.Equal(t, http.StatusNoContent, b.decide(ps[0].ID, "approve", "").Status)
	select {
	case r := <-done:
		assert.Equal(t, 200, r.Status, r.Body)
	case <-time.After(time.Second):
		t.Fatal("A's call did not run within a second of B's decision")
	}
	assert.Equal(t, "debug = true\n", a.contents("ws/app.conf"))

	rs.Stop()
	r, err := b.request(t.Context(), http.MethodGet, "/approvals", "", "")
	require.NoError(t, err)
	assert.Equal(t, 503, r.Status)
	assert.Equal(t, "SESSION_STORE_UNAVAILABLE", r.Code)
	assert.Equal(t, "Error: cannot list approvals: the session store is unavailable; retry shortly", r.Output)
	r, err = b.request(t.Context(), http.MethodGet, "/approvals?wait=1s", "", "")
	require.NoError(t, err)
	assert.Equal(t, 503, r.Status, r.Body)
	r = b.decide("81755a09777a3798e8137e30009b330e", "approve", "")
	assert.Equal(t, 503, r.Status)
	assert.Equal(t, "SESSION_STORE_UNAVAILABLE", r.Code)
	assert.Equal(t, `Error: cannot decide approval "81755a09777a3798e8137e30009b330e": the session store is unavailable; retry shortly`, r.Output)
}
