package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server"
)

// BenchmarkEditShared is an edit through the whole handler stack with the
// session store in memory and in Redis, each with the change feed off and
// on, in one run (docs/deployment.md, "What Redis costs"): with Redis the
// feed's announcement and event are one round trip each on the call's way,
// beside the policy's decision and record.
//
//	go test -run '^$' -bench EditShared -benchtime 2000x ./internal/handlers/
func BenchmarkEditShared(b *testing.B) {
	rs := redistest.Start(b)
	for _, store := range []string{"memory", "redis"} {
		for _, feed := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/events=%v", store, feed), func(b *testing.B) {
				root, err := filepath.EvalSymlinks(b.TempDir())
				require.NoError(b, err)
				require.NoError(b, os.WriteFile(filepath.Join(root, "a.txt"), []byte("x: 0\n"), 0o644))
				cfg := server.Config{Root: root, Policy: policy.Settings{Enabled: true}, Events: events.Settings{Enabled: feed}, MaxBodyBytes: 32 << 20, StreamWriteWindow: 10 * time.Second}
				if store == "redis" {
					cfg.SessionStore = rs.URL(0)
					cfg.SessionKeyPrefix = fmt.Sprintf("bench-%d:", time.Now().UnixNano())
				}
				srv, err := server.New(cfg, nil)
				require.NoError(b, err)
				b.Cleanup(func() { srv.Shutdown(context.Background()) })
				h := srv.Handler
				serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"a.txt"}`, 10, "X-Session-ID", "bench")
				edits := [2]string{`{"file_path":"a.txt","old_string":"x: 0","new_string":"x: 1"}`, `{"file_path":"a.txt","old_string":"x: 1","new_string":"x: 0"}`}
				b.ResetTimer()
				for i := range b.N {
					serve(b, h, http.MethodPost, "/tools/edit", edits[i%2], 10, "X-Session-ID", "bench")
				}
			})
		}
	}
}
