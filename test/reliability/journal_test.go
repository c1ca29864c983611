package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// journalCall sends a request with X-Request-Id id and returns the status
// and body.
func journalCall(t *testing.T, method, url, id, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestJournalPutsBackWhatAPowerLossTook: with the journal (SPEC §28,
// docs/journal.md) a change's kept content, history lines and audit line
// are written without their own sync; only the journal entry holding them
// is synced before the answer. A power loss can take what was not synced;
// the test takes it by hand after a SIGKILL (the audit log and the
// session log cut back to their sizes before the changes; the new kept
// contents, held in memory until the segment's seal, went with the
// process) and starts the server again: it puts every line and
// content back from the dead process's journal segment, so every
// acknowledged change is in the audit log (once) and in the history, and
// a revert restores the file through the kept contents.
//
// Without the audit log ("checkpoints") the entry's commit starts at the
// change line, before its outcome line is in it, so the replay settles
// each change by the next one of the file; before it did, the history
// listed only the first and the last change (2 of 6).
func TestJournalPutsBackWhatAPowerLossTook(t *testing.T) {
	t.Run("audit", func(t *testing.T) { journalPowerLoss(t, true) })
	t.Run("checkpoints", func(t *testing.T) { journalPowerLoss(t, false) })
}

func journalPowerLoss(t *testing.T, withAudit bool) {
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "audit.log")
	file := filepath.Join(root, "f.txt")
	require.NoError(t, os.WriteFile(file, []byte("original\n"), 0o644))
	flags := []string{"--policy=false", "--default-session", "s"}
	if withAudit {
		flags = append(flags, "--audit-log", log)
	}
	srv := startChild(t, root, flags...)
	write := func(id, content string) {
		st, body := journalCall(t, "POST", srv.base+"/tools/write", id, fmt.Sprintf(`{"file_path":%q,"content":%q}`, file, content))
		require.Equal(t, 200, st, body)
	}
	write("warm-up", "zero\n")

	ckpt := filepath.Join(root, ".toolfs-api", "checkpoints")
	sizes := map[string]int64{}
	if withAudit {
		sizes[log] = size(t, log)
	}
	logs, _ := filepath.Glob(filepath.Join(ckpt, "sessions", "*.log"))
	require.Len(t, logs, 1)
	sizes[logs[0]] = size(t, logs[0])
	blobsBefore := names(t, filepath.Join(ckpt, "blobs"))

	const n = 5
	for i := range n {
		write(fmt.Sprintf("w-%d", i), fmt.Sprintf("content %d\n", i))
	}
	srv.kill()
	segments, _ := filepath.Glob(filepath.Join(root, ".toolfs-api", "wal", "*.wal"))
	assert.Len(t, segments, 1, "the killed process's segment stays")

	// The power loss: what was written without a sync is gone.
	for path, sz := range sizes {
		require.NoError(t, os.Truncate(path, sz))
	}
	removed := 0
	for name := range names(t, filepath.Join(ckpt, "blobs")) {
		if !blobsBefore[name] {
			require.NoError(t, os.Remove(filepath.Join(ckpt, "blobs", name)))
			removed++
		}
	}
	// The kept contents wait in memory and in the segment for its seal
	// (docs/journal.md): the SIGKILL took them from memory, none is in
	// blobs/, so only the segment's replay can put them back.
	require.Zero(t, removed, "no kept content is written before the seal")

	srv = startChild(t, root, flags...)
	if withAudit {
		ids, lines := auditRecords(t, log)
		for i := range n {
			assert.True(t, ids[fmt.Sprintf("w-%d", i)], "audit line of w-%d", i)
		}
		assert.Len(t, lines, n+1, "every line once")
	}
	segments, _ = filepath.Glob(filepath.Join(root, ".toolfs-api", "wal", "*.wal"))
	assert.Empty(t, segments, "the replayed segment is removed; the new process makes its own at its first change")

	st, body := journalCall(t, "GET", srv.base+"/sessions/s/changes", "", "")
	require.Equal(t, 200, st, body)
	var listed struct {
		Changes []struct {
			Seq        int64
			Revertible bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &listed), body)
	require.Len(t, listed.Changes, n+1, body)
	for _, c := range listed.Changes {
		assert.True(t, c.Revertible, "change %d", c.Seq)
	}
	st, body = journalCall(t, "POST", srv.base+"/sessions/s/revert", "", `{"to":0}`)
	require.Equal(t, 200, st, body)
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "original\n", string(got))
	srv.stop()
}

// TestJournalPutsBackAMove: a file's move puts both files' records (the
// source's kept content, both history lines of its one seq, both audit
// lines) in one journal entry; a power loss that took them all (taken by
// hand after a SIGKILL) is replayed at the next start, and the move is
// listed and reverts: the source back with its bytes, the destination
// gone.
func TestJournalPutsBackAMove(t *testing.T) {
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "audit.log")
	from, to := filepath.Join(root, "f.txt"), filepath.Join(root, "g.txt")
	require.NoError(t, os.WriteFile(from, []byte("original\n"), 0o644))
	flags := []string{"--audit-log", log, "--policy=false", "--default-session", "s"}
	srv := startChild(t, root, flags...)
	st, body := journalCall(t, "POST", srv.base+"/tools/write", "warm-up", fmt.Sprintf(`{"file_path":%q,"content":"moved\n"}`, from))
	require.Equal(t, 200, st, body)
	logs, _ := filepath.Glob(filepath.Join(root, ".toolfs-api", "checkpoints", "sessions", "*.log"))
	require.Len(t, logs, 1)
	sizes := map[string]int64{log: size(t, log), logs[0]: size(t, logs[0])}
	st, body = journalCall(t, "POST", srv.base+"/tools/move", "mv", fmt.Sprintf(`{"from":%q,"to":%q}`, from, to))
	require.Equal(t, 200, st, body)
	srv.kill()
	for path, sz := range sizes {
		require.NoError(t, os.Truncate(path, sz))
	}

	srv = startChild(t, root, flags...)
	defer srv.stop()
	_, lines := auditRecords(t, log)
	assert.Len(t, lines, 3, "the write's line and the move's two")
	st, body = journalCall(t, "GET", srv.base+"/sessions/s/changes", "", "")
	require.Equal(t, 200, st, body)
	assert.Contains(t, body, "2 move f.txt", body)
	assert.Contains(t, body, "2 move g.txt", body)
	st, body = journalCall(t, "POST", srv.base+"/sessions/s/revert", "", `{"to":1}`)
	require.Equal(t, 200, st, body)
	got, err := os.ReadFile(from)
	require.NoError(t, err)
	assert.Equal(t, "moved\n", string(got))
	assert.NoFileExists(t, to)
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

func names(t *testing.T, dir string) map[string]bool {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, e := range es {
		out[e.Name()] = true
	}
	return out
}

// TestOneSyncForTheRecordsOfAChange counts, under strace, the fsync and
// fdatasync calls of one write over HTTP with checkpoints and the audit
// log on (SPEC §28): the staged content and its folder (SPEC §9), and one
// journal entry for the kept content, the history line and the audit
// line; three in all. Without the journal each record paid its own: the
// kept content, the blobs' folder, the history line and the audit line,
// six in all.
func TestOneSyncForTheRecordsOfAChange(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	root := t.TempDir()
	file := filepath.Join(root, "f.txt")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("x", 60<<10)), 0o644))
	trace := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, "-f", "-e", "trace=fsync,fdatasync", "-e", "signal=none", "-o", trace,
		serverBin, "--root", root, "--addr", "127.0.0.1:0", "--policy=false", "--default-session", "s",
		"--audit-log", filepath.Join(t.TempDir(), "audit.log"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &syncWriter{w: &out}, io.Discard
	// Its own process group: strace and the server it traces die together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(cmd.Stdout.(*syncWriter).String())
		if m != nil {
			base = m[1]
		}
		return base != ""
	}, 20*time.Second, 20*time.Millisecond)
	write := func(content string) {
		st, body := journalCall(t, "POST", base+"/tools/write", "", fmt.Sprintf(`{"file_path":%q,"content":%q}`, file, content))
		require.Equal(t, 200, st, body)
	}
	write("first\n") // the session's log and the folders are made once
	time.Sleep(200 * time.Millisecond)
	before := syncCalls(t, trace)
	write("second\n")
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 3, syncCalls(t, trace)-before, "fsync and fdatasync calls of one write")

	// A file's move, recorded by two Keepers as one change of the history:
	// the source's and the destination's folder syncs (one folder here,
	// synced twice by the move) and one journal entry for the kept source,
	// both history lines and both audit lines. Before the move's records
	// shared the entry: 8.
	before = syncCalls(t, trace)
	st, body := journalCall(t, "POST", base+"/tools/move", "", fmt.Sprintf(`{"from":%q,"to":%q}`, file, filepath.Join(root, "g.txt")))
	require.Equal(t, 200, st, body)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 3, syncCalls(t, trace)-before, "fsync and fdatasync calls of one move")
}

// syncWriter is a buffer written by one goroutine and read by another.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// syncCalls counts the completed fsync and fdatasync calls in an strace
// output.
func syncCalls(t *testing.T, trace string) int {
	t.Helper()
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if (strings.Contains(l, "fsync(") || strings.Contains(l, "fdatasync(")) && !strings.Contains(l, "resumed") {
			n++
		}
	}
	return n
}

// TestHistorySurvivesSIGKILL: the real binary with checkpoints and the
// audit log on (their records journaled), writers each in a session of
// its own doing writes and edits, SIGKILL at a random moment, round after
// round; then every acknowledged change is in its session's history
// (listed, as many as were acknowledged or more: a change in flight at the
// kill may be there too) and has its audit line.
func TestHistorySurvivesSIGKILL(t *testing.T) {
	rounds, writers := 8, 4
	if long {
		rounds = 60
	}
	root := t.TempDir()
	log := filepath.Join(t.TempDir(), "audit.log")
	acked := make([]atomic.Int64, writers)
	var ackedIDs sync.Map
	for r := range rounds {
		srv := startChild(t, root, "--audit-log", log, "--policy=false")
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc := newClient()
				defer hc.CloseIdleConnections()
				file := filepath.Join(root, fmt.Sprintf("h%d.txt", w))
				for s := 0; ctx.Err() == nil; s++ {
					tool, body := "write", fmt.Sprintf(`{"file_path":%q,"content":"%d-%d\nline\n"}`, file, r, s)
					if s%2 == 1 {
						tool, body = "edit", fmt.Sprintf(`{"file_path":%q,"old_string":"line","new_string":"edited"}`, file)
					}
					id := fmt.Sprintf("h%d-w%d-%d", r, w, s)
					req, _ := http.NewRequestWithContext(ctx, "POST", srv.base+"/tools/"+tool, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Session-ID", fmt.Sprintf("writer-%d", w))
					req.Header.Set("X-Request-Id", id)
					resp, err := hc.Do(req)
					if err != nil {
						return
					}
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 {
						return
					}
					acked[w].Add(1)
					ackedIDs.Store(id, true)
				}
			}()
		}
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		srv.kill()
		cancel()
		wg.Wait()
	}
	srv := startChild(t, root, "--audit-log", log, "--policy=false")
	total := int64(0)
	for w := range writers {
		st, body := journalCall(t, "GET", fmt.Sprintf("%s/sessions/writer-%d/changes", srv.base, w), "", "")
		require.Equal(t, 200, st, body)
		var listed struct{ Changes []struct{ Seq int64 } }
		require.NoError(t, json.Unmarshal([]byte(body), &listed))
		assert.GreaterOrEqual(t, int64(len(listed.Changes)), acked[w].Load(), "writer %d", w)
		total += acked[w].Load()
	}
	ids, lines := auditRecords(t, log)
	missing := 0
	ackedIDs.Range(func(k, _ any) bool {
		if !ids[k.(string)] {
			missing++
		}
		return true
	})
	assert.Zero(t, missing, "acknowledged changes without an audit line")
	seen := map[string]bool{}
	for _, l := range lines {
		assert.False(t, seen[l], "a line twice: %s", l)
		seen[l] = true
	}
	t.Logf("history under SIGKILL: %d rounds, %d changes acknowledged, all listed; %d audit lines, %d missing", rounds, total, len(lines), missing)
	srv.stop()
}
