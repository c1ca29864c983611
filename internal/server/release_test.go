package server_test

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/diagnostics"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// TestFailedStartupReleasesWhatItMade: a start-up that fails late, after
// the provider, the change histories, the change feed and its watcher, the
// approvals and the Redis client were made, leaves nothing behind: every
// goroutine it started has ended and every descriptor it opened (the
// root, the private folder, inotify, sockets) is closed, as after a
// Shutdown (docs/architecture.md, "Start-up and shutdown").
func TestFailedStartupReleasesWhatItMade(t *testing.T) {
	// A Redis nobody listens on: start-up does not wait for it, so only
	// its clients' goroutines tell that it was used.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	unreachable := "redis://" + ln.Addr().String() + "/0"
	require.NoError(t, ln.Close())

	for _, tc := range []struct {
		name string
		cfg  func(root string) server.Config
		want string
	}{
		{"a bad --diagnostics file", func(root string) server.Config {
			bad := filepath.Join(t.TempDir(), "checkers.json")
			require.NoError(t, os.WriteFile(bad, []byte(`{"checkers": [`), 0o644))
			return server.Config{Diagnostics: diagnostics.Settings{File: bad}}
		}, "--diagnostics "},
		{"an --audit-log in a missing folder, with Redis", func(root string) server.Config {
			return server.Config{SessionStore: unreachable, Audit: audit.Settings{Path: filepath.Join(t.TempDir(), "missing", "audit.log")}}
		}, "--audit-log "},
		{"a bad --diagnostics file, with Redis", func(root string) server.Config {
			bad := filepath.Join(t.TempDir(), "checkers.json")
			require.NoError(t, os.WriteFile(bad, []byte(`{"checkers": [`), 0o644))
			return server.Config{SessionStore: unreachable, Diagnostics: diagnostics.Settings{File: bad}}
		}, "--diagnostics "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			require.NoError(t, err)
			cfg := tc.cfg(root)
			cfg.Root = root
			cfg.Policy = policy.Settings{Enabled: true}
			cfg.Sessions = tools.SessionSettings{Default: "default"}
			cfg.Events = events.Settings{Enabled: true, MaxWatches: 64}
			cfg.Checkpoints = checkpoint.Settings{Enabled: true}

			// A first server of the same kind, so that what lives once per
			// process (the sandbox's start-up proof, go-redis's logger,
			// the runtime's own) is there before counting.
			warm := cfg
			warm.Diagnostics, warm.Audit = diagnostics.Settings{}, audit.Settings{}
			s, err := server.New(warm, nil)
			require.NoError(t, err)
			require.NoError(t, s.Shutdown(t.Context()))
			settle()

			goroutines, files := runtime.NumGoroutine(), openFiles(t)
			_, err = server.New(cfg, nil)
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), tc.want), err.Error())

			var left int
			var leaked map[string]int
			deadline := time.Now().Add(10 * time.Second)
			for {
				settle()
				left, leaked = runtime.NumGoroutine()-goroutines, opened(files, openFiles(t))
				if left <= 0 && len(leaked) == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			assert.LessOrEqual(t, left, 0, "goroutines the failed start-up left running:\n%s", stacks())
			assert.Empty(t, leaked, "descriptors the failed start-up left open")
		})
	}
}

// settle lets goroutines that were told to stop finish stopping.
func settle() {
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
}

// opened is what after holds open that before did not.
func opened(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range after {
		if n > before[k] {
			out[k] = n - before[k]
		}
	}
	return out
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
