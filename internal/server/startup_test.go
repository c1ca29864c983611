package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// TestStartupBesideAHeldCheckpointLock: a server starts, within the
// bounded wait of docs/checkpoints.md ("Crashes"), while another process
// on the root holds every lock of the change histories (a replica frozen
// in the middle of a change), and serves.
func TestStartupBesideAHeldCheckpointLock(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	cfg := server.Config{Root: root, Policy: policy.Settings{Enabled: true}, Checkpoints: checkpoint.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}}
	first := servertest.Start(t, cfg)
	for _, body := range []string{`{"file_path":"a.txt","content":"one\n"}`, `{"file_path":"a.txt"}`, `{"file_path":"a.txt","content":"two\n"}`} {
		tool := "write"
		if !strings.Contains(body, "content") {
			tool = "read"
		}
		resp, err := http.Post(first.URL+"/tools/"+tool, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
	}
	require.NoError(t, first.Shutdown(context.Background()))

	// Every lock a session's history takes, and the collection's, held
	// the way another process holds them (flock on its own descriptor).
	locks, err := filepath.Glob(filepath.Join(root, ".toolfs-api", "checkpoints", "locks", "*.lock"))
	require.NoError(t, err)
	require.NotEmpty(t, locks, "the write left a history, and its lock file")
	for _, p := range append(locks, filepath.Join(root, ".toolfs-api", "checkpoints", "gc.lock")) {
		f, err := os.Open(p)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB), p)
	}

	start := time.Now()
	second := servertest.Start(t, cfg)
	took := time.Since(start)
	require.Less(t, took, 30*time.Second, "start-up waits for the held locks a bounded time")
	resp, err := http.Post(second.URL+"/tools/read", "application/json", strings.NewReader(`{"file_path":"a.txt"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	t.Logf("started in %v beside the held locks", took.Round(time.Millisecond))
}
