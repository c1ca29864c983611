package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// auditClient sends requests to a test server with a request id each.
type auditClient struct {
	t     *testing.T
	base  string
	token string
}

func (c auditClient) send(method, path, body, requestID string, headers ...string) (int, http.Header, string) {
	c.t.Helper()
	first := []string{"Content-Type", "application/json", "X-Session-ID", "s1"}
	if requestID != "" {
		first = append(first, "X-Request-Id", requestID)
	}
	a := send(c.t, method, c.base+path, c.token, body, append(first, headers...)...)
	return a.status, a.header, a.body
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var (
	auditTime    = regexp.MustCompile(`"time":"([^"]+)"`)
	auditVersion = regexp.MustCompile(`"version":"[^"]+"`)
)

// auditLines reads the log's lines, checks each is JSON with a UTC time,
// and returns them with the time and versions (which vary from run to
// run) replaced by T and V.
func auditLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &v), line)
		m := auditTime.FindStringSubmatch(line)
		require.NotNil(t, m, line)
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		require.NoError(t, err)
		assert.Equal(t, time.UTC, ts.Location())
		assert.WithinDuration(t, time.Now(), ts, time.Minute)
		line = auditTime.ReplaceAllString(line, `"time":"T"`)
		out = append(out, auditVersion.ReplaceAllString(line, `"version":"V"`))
	}
	return out
}

// TestAuditLineFormat: the exact line of each mutation (write, edit,
// revert, upload, delete) and of an approval decision (docs/audit.md):
// fields in order, root-relative paths, before/after {version, sha256,
// bytes} or null, the client's X-Request-Id, subjects "none" without a
// token and "token" with --token; never the contents.
func TestAuditLineFormat(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, Checkpoints: checkpoint.Settings{Enabled: true}, Audit: audit.Settings{Path: log}})
	c := auditClient{t: t, base: srv.URL}
	a := filepath.Join(srv.Root, "a.txt")

	st, _, body := c.send("POST", "/tools/write", `{"file_path":"`+a+`","content":"one\n"}`, "r-write")
	require.Equal(t, 200, st, body)
	st, _, body = c.send("POST", "/tools/read", `{"file_path":"`+a+`"}`, "")
	require.Equal(t, 200, st, body)
	st, _, body = c.send("POST", "/tools/edit", `{"file_path":"`+a+`","old_string":"one","new_string":"three"}`, "r-edit")
	require.Equal(t, 200, st, body)
	st, _, body = c.send("POST", "/sessions/s1/revert", `{"to":1}`, "r-revert")
	require.Equal(t, 200, st, body)
	st, hdr, body := c.send("PUT", "/files/d/b.bin", "bin", "r-upload", "If-None-Match", "*")
	require.Equal(t, 201, st, body)
	st, _, body = c.send("DELETE", "/files/d/b.bin", "", "r-delete", "If-Match", hdr.Get("ETag"))
	require.Equal(t, 204, st, body)
	st, _, body = c.send("POST", "/tools/write", `{"file_path":"`+a+`.dry","content":"dry\n","dry_run":true}`, "r-dry")
	require.Equal(t, 200, st, body)

	one, three, bin := sha("one\n"), sha("three\n"), sha("bin")
	assert.Equal(t, []string{
		`{"time":"T","subject":"none","session":"s1","transport":"rest","tool":"write","path":"a.txt","before":null,"after":{"version":"V","sha256":"` + one + `","bytes":4},"request_id":"r-write"}`,
		`{"time":"T","subject":"none","session":"s1","transport":"rest","tool":"edit","path":"a.txt","before":{"version":"V","sha256":"` + one + `","bytes":4},"after":{"version":"V","sha256":"` + three + `","bytes":6},"request_id":"r-edit"}`,
		`{"time":"T","subject":"none","session":"s1","transport":"rest","tool":"revert","path":"a.txt","before":{"version":"V","sha256":"` + three + `","bytes":6},"after":{"version":"V","sha256":"` + one + `","bytes":4},"request_id":"r-revert"}`,
		`{"time":"T","subject":"none","session":"s1","transport":"rest","tool":"upload","path":"d/b.bin","before":null,"after":{"version":"V","sha256":"` + bin + `","bytes":3},"request_id":"r-upload"}`,
		`{"time":"T","subject":"none","session":"s1","transport":"rest","tool":"delete","path":"d/b.bin","before":{"version":"V","sha256":"` + bin + `","bytes":3},"after":null,"request_id":"r-delete"}`,
	}, auditLines(t, log), "a dry run writes no line")

	// A decision, with --token: the escalated write waits for it.
	log2 := filepath.Join(t.TempDir(), "audit.log")
	srv2 := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, Token: "tok", Tools: tools.Settings{SandboxMode: "read-only"},
		Approvals: approval.Settings{Timeout: time.Minute}, Audit: audit.Settings{Path: log2}})
	c2 := auditClient{t: t, base: srv2.URL, token: "tok"}
	b := filepath.Join(srv2.Root, "b.txt")
	done := make(chan string, 1)
	go func() {
		_, _, body := c2.send("POST", "/tools/write", `{"file_path":"`+b+`","content":"two\n","sandbox_permissions":"workspace-write","justification":"test"}`, "r-escalated")
		done <- body
	}()
	var id string
	require.Eventually(t, func() bool {
		_, _, body := c2.send("GET", "/approvals", "", "")
		var l struct{ Approvals []struct{ ID string } }
		require.NoError(t, json.Unmarshal([]byte(body), &l))
		if len(l.Approvals) == 1 {
			id = l.Approvals[0].ID
		}
		return id != ""
	}, 10*time.Second, 10*time.Millisecond)
	st, _, body = c2.send("POST", "/approvals/"+id, `{"decision":"approve"}`, "r-decision")
	require.Equal(t, 204, st, body)
	<-done
	lines := auditLines(t, log2)
	assert.ElementsMatch(t, []string{
		`{"time":"T","subject":"token","session":"s1","transport":"rest","tool":"write","path":"b.txt","before":null,"after":null,"request_id":"r-decision","approval":"` + id + `","decision":"approve"}`,
		`{"time":"T","subject":"token","session":"s1","transport":"rest","tool":"write","path":"b.txt","before":null,"after":{"version":"V","sha256":"` + sha("two\n") + `","bytes":4},"request_id":"r-escalated"}`,
	}, lines)
}

// fullTmpfs mounts a tiny tmpfs and fills it; it skips the test where
// mount is refused (not root).
func fullTmpfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	f, err := os.Create(filepath.Join(dir, "fill"))
	require.NoError(t, err)
	buf := make([]byte, 16<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	require.NoError(t, f.Close())
	return dir
}

// TestAuditUnavailableChangesNothing: with the audit log on a full disk,
// every mutation (write, edit, revert, upload, delete) and a decision
// fails with 503 AUDIT_UNAVAILABLE before anything changes: the files
// are as they were, no upload is left, the approval still pending;
// toolfs_audit_write_errors_total counts each refusal.
func TestAuditUnavailableChangesNothing(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	a, b := filepath.Join(root, "a.txt"), filepath.Join(root, "b.txt")
	require.NoError(t, os.WriteFile(b, []byte("bee\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	// A first server, without the audit log, gives session s1 a history.
	first, err := server.New(server.Config{Root: root, Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, Checkpoints: checkpoint.Settings{Enabled: true}}, nil)
	require.NoError(t, err)
	hs := httptest.NewServer(first.Handler)
	c := auditClient{t: t, base: hs.URL}
	st, _, body := c.send("POST", "/tools/write", `{"file_path":"`+a+`","content":"one\n"}`, "")
	require.Equal(t, 200, st, body)
	hs.Close()
	require.NoError(t, first.Shutdown(context.Background()))

	log := filepath.Join(fullTmpfs(t), "audit.log")
	srv := servertest.Start(t, server.Config{Root: root, Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, Checkpoints: checkpoint.Settings{Enabled: true},
		Tools: tools.Settings{SandboxMode: "workspace-write"}, Approvals: approval.Settings{Timeout: 3 * time.Second}, Audit: audit.Settings{Path: log}})
	c = auditClient{t: t, base: srv.URL}
	for _, p := range []string{a, b} {
		st, _, body = c.send("POST", "/tools/read", `{"file_path":"`+p+`"}`, "")
		require.Equal(t, 200, st, body)
	}
	_, hdr, _ := c.send("GET", "/files/b.txt", "", "")
	refused := func(name string, st int, body string) {
		t.Helper()
		assert.Equal(t, 503, st, name)
		assert.Contains(t, body, `"code":"AUDIT_UNAVAILABLE"`, name)
		assert.Contains(t, body, "so nothing was changed", name)
	}
	st, _, body = c.send("POST", "/tools/write", `{"file_path":"`+a+`","content":"two\n"}`, "")
	refused("write", st, body)
	st, _, body = c.send("POST", "/tools/edit", `{"file_path":"`+a+`","old_string":"one","new_string":"two"}`, "")
	refused("edit", st, body)
	st, _, body = c.send("POST", "/tools/edit", `{"file_path":"`+a+`","edits":[{"old_string":"one","new_string":"two"}]}`, "")
	refused("batch edit", st, body)
	st, _, body = c.send("POST", "/sessions/s1/revert", `{"to":0}`, "")
	refused("revert", st, body)
	st, _, body = c.send("PUT", "/files/c.bin", "new", "", "If-None-Match", "*")
	refused("upload", st, body)
	st, _, body = c.send("DELETE", "/files/b.txt", "", "", "If-Match", hdr.Get("ETag"))
	refused("delete", st, body)

	// An escalation outside the fence waits for a decision the log refuses.
	done := make(chan string, 1)
	go func() {
		_, _, body := c.send("POST", "/tools/write", `{"file_path":"`+filepath.Join(root, "e.txt")+`","content":"x","sandbox_permissions":"danger-full-access","justification":"test"}`, "", "X-Session-Cwd", "sub")
		done <- body
	}()
	var id string
	require.Eventually(t, func() bool {
		_, _, body := c.send("GET", "/approvals", "", "")
		var l struct{ Approvals []struct{ ID string } }
		require.NoError(t, json.Unmarshal([]byte(body), &l))
		if len(l.Approvals) == 1 {
			id = l.Approvals[0].ID
		}
		return id != ""
	}, 10*time.Second, 10*time.Millisecond)
	st, _, body = c.send("POST", "/approvals/"+id, `{"decision":"approve"}`, "")
	refused("decision", st, body)
	_, _, body = c.send("GET", "/approvals", "", "")
	assert.Contains(t, body, id, "still pending")
	assert.Contains(t, <-done, `"code":"ESCALATION_DENIED"`, "the call waited on, until its timeout")

	got, err := os.ReadFile(a)
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(got))
	got, err = os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, "bee\n", string(got))
	assert.NoFileExists(t, filepath.Join(root, "c.bin"))
	assert.NoFileExists(t, filepath.Join(root, "e.txt"))
	info, err := os.Stat(log)
	require.NoError(t, err)
	assert.Zero(t, info.Size())
	_, _, metrics := c.send("GET", "/metrics", "", "")
	assert.Contains(t, metrics, "toolfs_audit_write_errors_total 7\n")
}

// TestAuditLostRecordAnswers503: when the record cannot be written after
// the change (the write of the line fails: /dev/full), the change stands
// and the call answers 503 AUDIT_UNAVAILABLE saying it was applied, so no
// change is acknowledged without its record (docs/audit.md, "How a record is made").
func TestAuditLostRecordAnswers503(t *testing.T) {
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, Audit: audit.Settings{Path: "/dev/full"}})
	c := auditClient{t: t, base: srv.URL}
	a := filepath.Join(srv.Root, "a.txt")
	st, _, body := c.send("POST", "/tools/write", `{"file_path":"`+a+`","content":"one\n"}`, "")
	assert.Equal(t, 503, st)
	assert.Contains(t, body, `"code":"AUDIT_UNAVAILABLE"`)
	assert.Contains(t, body, "the change was applied, but its audit record could not be written")
	got, err := os.ReadFile(a)
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(got))
	_, _, metrics := c.send("GET", "/metrics", "", "")
	assert.Contains(t, metrics, "toolfs_audit_write_errors_total 1\n")
}

// requestIDs gives each request of an MCP client its own X-Request-Id,
// mcp-1, mcp-2, ..., and remembers the id of each tools/call by the tool
// it names, in order.
type requestIDs struct {
	mu    sync.Mutex
	n     int
	calls []string // "tool id"
}

func (r *requestIDs) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	r.mu.Lock()
	r.n++
	id := fmt.Sprintf("mcp-%d", r.n)
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &m) == nil && m.Method == "tools/call" {
			r.calls = append(r.calls, m.Params.Name+" "+id)
		}
	}
	r.mu.Unlock()
	req.Header.Set("X-Request-Id", id)
	return http.DefaultTransport.RoundTrip(req)
}

// TestAuditMCPRequestIDs: over MCP each audit line carries the request id
// of the HTTP request that carried its tools/call, not that of the
// session's initialize (docs/audit.md), in a stateful session and
// sessionless.
func TestAuditMCPRequestIDs(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-03-26", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "audit.log")
			srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, Audit: audit.Settings{Path: log}})
			ids := &requestIDs{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "audit-test", Version: "v0"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: ids}, MaxRetries: -1,
			}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			require.NoError(t, err)
			defer cs.Close()
			a := filepath.Join(srv.Root, "a.txt")
			for _, call := range []sdk.CallToolParams{
				{Name: "write", Arguments: map[string]any{"file_path": a, "content": "one\n"}},
				{Name: "read", Arguments: map[string]any{"file_path": a}},
				{Name: "edit", Arguments: map[string]any{"file_path": a, "old_string": "one", "new_string": "two"}},
				{Name: "write", Arguments: map[string]any{"file_path": a + ".b", "content": "bee\n"}},
			} {
				res, err := cs.CallTool(ctx, &call)
				require.NoError(t, err)
				require.False(t, res.IsError, "%s: %v", call.Name, res.Content)
			}
			ids.mu.Lock()
			calls := slices.Clone(ids.calls)
			ids.mu.Unlock()
			require.Len(t, calls, 4)
			var want, got []string
			for _, c := range calls {
				if tool, id, _ := strings.Cut(c, " "); tool != "read" {
					want = append(want, tool+" "+id)
				}
			}
			for _, line := range auditLines(t, log) {
				var rec struct {
					Tool      string `json:"tool"`
					RequestID string `json:"request_id"`
					Transport string `json:"transport"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &rec))
				assert.Equal(t, "mcp", rec.Transport)
				got = append(got, rec.Tool+" "+rec.RequestID)
			}
			assert.Equal(t, want, got, "each line names the request of its own call")
		})
	}
}
