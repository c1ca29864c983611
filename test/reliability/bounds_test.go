package reliability

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
)

// flood sends reads of distinct missing paths from..to-1 over a few
// keep-alive connections; read i uses session(i) and records an observation
// (confirmed absence) for it. Every answer must be 404. It speaks HTTP/1.1
// on raw connections because the flood must stay cheap under -race: the
// client's cost, not the server's, would otherwise set the pace.
func flood(t *testing.T, base string, from, to int, session func(i int) string) {
	t.Helper()
	const workers = 4
	addr := strings.TrimPrefix(base, "http://")
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- floodConn(addr, &next, to, session)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func floodConn(addr string, next *atomic.Int64, to int, session func(i int) string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	var batch bytes.Buffer
	for {
		// Pipeline a batch of requests, then read their answers in order.
		first := int(next.Add(floodBatch) - floodBatch)
		if first >= to {
			return nil
		}
		last := min(first+floodBatch, to)
		batch.Reset()
		for i := first; i < last; i++ {
			body := fmt.Sprintf(`{"file_path":"missing/%s/f-%d.txt"}`, floodPad, i)
			fmt.Fprintf(&batch, "POST /tools/read HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Session-ID: %s\r\nContent-Length: %d\r\n\r\n%s",
				addr, session(i), len(body), body)
		}
		if _, err := conn.Write(batch.Bytes()); err != nil {
			return err
		}
		for i := first; i < last; i++ {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return err
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if resp.StatusCode != 404 || !bytes.Contains(raw, []byte(`"code":"FS_NOT_FOUND"`)) {
				return fmt.Errorf("read %d: %d %s", i, resp.StatusCode, raw)
			}
		}
	}
}

const floodBatch = 32

// floodPad lengthens paths and session ids to about 100 bytes each, so a
// store that kept them would grow visibly.
var floodPad = strings.Repeat("p", 80)

func floodSession(i int) string { return fmt.Sprintf("flood-%s-%d", floodPad, i) }

// TestSessionStoreStaysBounded drives distinct session ids and paths
// through HTTP against an in-process server (so -race watches the store
// under concurrent load) with small session caps: the store keeps exactly
// its caps, and an evicted session fails closed (it must read again).
// TestSessionMemoryBoundedChild measures the memory.
func TestSessionStoreStaysBounded(t *testing.T) {
	n := 5_000
	if long {
		n = 50_000
	}
	const maxSessions, maxPaths = 64, 8
	srv := startInProcess(t, inProcessOptions{store: policy.Config{TTL: time.Hour, MaxSessions: maxSessions, MaxPathsPerSession: maxPaths}})
	require.NoError(t, os.WriteFile(filepath.Join(srv.root, "keep.txt"), []byte("keep\n"), 0o644))
	hc := newClient()
	defer hc.CloseIdleConnections()
	require.Equal(t, 200, mustCall(t, hc, srv.base, "read", "early", obj{"file_path": "keep.txt"}).Status)
	started := time.Now()

	// One session, many paths: it keeps its most recent maxPaths.
	flood(t, srv.base, 0, 1_000, func(int) string { return "one" })
	sessions, observations := srv.store.Stats()
	assert.Equal(t, 2, sessions)
	assert.Equal(t, 1+maxPaths, observations, `"early" keeps one, "one" keeps its cap`)

	// Many sessions, one path each: the most recent maxSessions stay.
	flood(t, srv.base, 1_000, 1_000+n, floodSession)
	sessions, observations = srv.store.Stats()
	assert.Equal(t, maxSessions, sessions)
	assert.Equal(t, maxSessions, observations)

	// The first session was evicted: its edit is refused until it reads again.
	a := mustCall(t, hc, srv.base, "edit", "early", obj{"file_path": "keep.txt", "old_string": "keep", "new_string": "kept"})
	assert.Equal(t, 409, a.Status, a.Raw)
	assert.Equal(t, "FS_NOT_OBSERVED", a.Code)
	require.Equal(t, 200, mustCall(t, hc, srv.base, "read", "early", obj{"file_path": "keep.txt"}).Status)
	assert.Equal(t, 200, mustCall(t, hc, srv.base, "edit", "early", obj{"file_path": "keep.txt", "old_string": "keep", "new_string": "kept"}).Status)

	t.Logf("session store: %d sessions and 1,000 paths of one session through HTTP, kept %d sessions / %d observations, %s",
		n, sessions, observations, time.Since(started).Round(time.Millisecond))
}

// TestSessionMemoryBoundedChild floods a server process (--max-sessions 64,
// --max-paths-per-session 8) with distinct sessions and paths and reads its
// heap from /metrics: it must stay flat once the caps are reached. GOGC=10
// keeps the sampled heap close to the live heap, so a growing store would
// show: TOOLFS_TEST_MAX_SESSIONS=1000000 is the control run, and fails
// (measured: +30 MiB over 45,000 sessions).
func TestSessionMemoryBoundedChild(t *testing.T) {
	n := 50_000
	if long {
		n = 500_000
	}
	maxSessions := os.Getenv("TOOLFS_TEST_MAX_SESSIONS")
	if maxSessions == "" {
		maxSessions = "64"
	}
	srv := startChildEnv(t, []string{"GOGC=10"}, t.TempDir(),
		"--max-sessions", maxSessions, "--max-paths-per-session", "8")
	started := time.Now()
	hc := newClient()
	defer hc.CloseIdleConnections()
	flood(t, srv.base, 0, n/10, floodSession)
	warm := srv.metrics(hc, "go_memstats_heap_alloc_bytes")[0]
	flood(t, srv.base, n/10, n, floodSession)
	m := srv.metrics(hc, "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes")
	end, rss := m[0], m[1]
	growth := end - warm
	assert.Less(t, growth, float64(4<<20), "heap %.0f → %.0f bytes", warm, end)
	srv.stop()
	t.Logf("server process: %d sessions and paths, heap %.1f MiB after %d, %.1f MiB at the end (%+.1f MiB), RSS %.1f MiB, %s",
		n, warm/(1<<20), n/10, end/(1<<20), growth/(1<<20), rss/(1<<20), time.Since(started).Round(time.Millisecond))
}
