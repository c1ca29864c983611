package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditCall posts body to base/tools/<tool> with X-Request-Id id. A
// transport error is returned: after a SIGKILL it is expected.
func auditCall(ctx context.Context, hc *http.Client, base, tool, id string, body any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tools/"+tool, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sink bytes.Buffer
	if _, err := sink.ReadFrom(resp.Body); err != nil {
		return 0, err // the answer was cut: not acknowledged
	}
	return resp.StatusCode, nil
}

// auditRecords reads every line of the audit log: each must be JSON; it
// returns the request ids and the lines.
func auditRecords(t *testing.T, path string) (map[string]bool, []string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	ids := map[string]bool{}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			RequestID string `json:"request_id"`
			Tool      string `json:"tool"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "line %d: %q", len(lines)+1, sc.Text())
		ids[rec.RequestID] = true
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	return ids, lines
}

// TestAuditSurvivesSIGKILL: the real binary with --audit-log, writers
// doing writes and edits over HTTP, SIGKILL at a random moment, again for
// several rounds: every mutation answered 200 has its line in the log
// (docs/audit.md), every line is JSON, and no line holds a file's content.
func TestAuditSurvivesSIGKILL(t *testing.T) {
	rounds, writers := 12, 8
	if long {
		rounds = 100
	}
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "audit.log")
	const marker = "CONTENT-MARKER-" // in every content, never in the log

	var acked sync.Map // request id → tool
	var nAcked, kills, midFlight atomic.Int64
	started := time.Now()
	for r := range rounds {
		srv := startChild(t, root, "--audit-log", log, "--policy=false")
		var killed atomic.Bool
		var inFlight atomic.Int32
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failures []string
		ctx, cancel := context.WithCancel(context.Background())
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc := newClient()
				defer hc.CloseIdleConnections()
				file := filepath.Join(root, fmt.Sprintf("w%d.txt", w))
				for s := 0; ctx.Err() == nil; s++ {
					tool, id := "write", fmt.Sprintf("r%d-w%d-%d-write", r, w, s)
					body := any(obj{"file_path": file, "content": fmt.Sprintf("%s%d-%d-%d\nsecond line\n", marker, r, w, s)})
					if s%2 == 1 {
						tool, id = "edit", fmt.Sprintf("r%d-w%d-%d-edit", r, w, s)
						body = obj{"file_path": file, "old_string": "second line", "new_string": marker + "edited"}
					}
					inFlight.Add(1)
					st, err := auditCall(ctx, hc, srv.base, tool, id, body)
					inFlight.Add(-1)
					if err != nil {
						if !killed.Load() && ctx.Err() == nil {
							mu.Lock()
							failures = append(failures, fmt.Sprintf("%s: %v", id, err))
							mu.Unlock()
						}
						return
					}
					if st == 200 {
						acked.Store(id, tool)
						nAcked.Add(1)
					} else if !killed.Load() {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("%s: status %d", id, st))
						mu.Unlock()
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		killed.Store(true)
		if inFlight.Load() > 0 {
			midFlight.Add(1)
		}
		srv.kill()
		cancel()
		wg.Wait()
		kills.Add(1)
		require.Empty(t, failures, "round %d", r)
	}

	ids, lines := auditRecords(t, log)
	missing := 0
	acked.Range(func(k, _ any) bool {
		if !ids[k.(string)] {
			missing++
			t.Errorf("acknowledged %s has no audit line", k)
		}
		return true
	})
	for _, l := range lines {
		if strings.Contains(l, marker) {
			t.Fatalf("an audit line holds file content: %s", l)
		}
	}
	require.Positive(t, nAcked.Load())
	t.Logf("audit under SIGKILL: %d rounds (%d kills with a mutation in flight), %d mutations acknowledged, %d lines in the log, %d missing, %s",
		kills.Load(), midFlight.Load(), nAcked.Load(), len(lines), missing, time.Since(started).Round(time.Millisecond))
}

// TestAuditReopensOnSIGHUP: log rotation with the real binary. After the
// file is renamed and the process gets SIGHUP, new lines go to a new file
// at the path and the renamed one keeps the old lines.
func TestAuditReopensOnSIGHUP(t *testing.T) {
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "audit.log")
	srv := startChild(t, root, "--audit-log", log, "--policy=false")
	hc := newClient()
	file := filepath.Join(root, "a.txt")
	st, err := auditCall(context.Background(), hc, srv.base, "write", "before-rotation", obj{"file_path": file, "content": "one\n"})
	require.NoError(t, err)
	require.Equal(t, 200, st)

	require.NoError(t, os.Rename(log, log+".1"))
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(srv.log(), "SIGHUP: audit log reopened") }, 10*time.Second, 10*time.Millisecond)
	st, err = auditCall(context.Background(), hc, srv.base, "write", "after-rotation", obj{"file_path": file, "content": "two\n"})
	require.NoError(t, err)
	require.Equal(t, 200, st)

	old, _ := auditRecords(t, log+".1")
	cur, _ := auditRecords(t, log)
	assert.Equal(t, map[string]bool{"before-rotation": true}, old)
	assert.Equal(t, map[string]bool{"after-rotation": true}, cur)
	info, err := os.Stat(log)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	srv.stop()
}
