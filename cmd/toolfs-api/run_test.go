package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/redistest"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRunServesAndDrains(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hi\n"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--lock-dir", "off"},
			env(map[string]string{"TOOLFS_ROOT": root, "TOOLFS_LOG_FORMAT": "json"}), &stdout, &stderr)
	}()

	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(stdout.String())
		if m == nil {
			return false
		}
		base = m[1]
		return true
	}, 5*time.Second, 10*time.Millisecond)

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)

	resp, err = http.Post(base+"/tools/read", "application/json", strings.NewReader(`{"file_path":"a.txt"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), `1: hi`)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not shut down")
	}
	assert.Contains(t, stderr.String(), `"msg":"shutting down`)
}

func TestRunRefusesBadConfig(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"missing root", []string{"--root", "/definitely/not/here"}, nil, "--root"},
		{"bad number flag", []string{"--read-limit", "lots"}, nil, "read-limit"},
		{"zero limit", []string{"--read-limit", "0"}, nil, "--read-limit must be positive"},
		{"bad env twin", nil, map[string]string{"TOOLFS_READ_MAX_BYTES": "x"}, "TOOLFS_READ_MAX_BYTES"},
		{"bad duration", []string{"--session-ttl", "soon"}, nil, "session-ttl"},
		{"bad log format", []string{"--log-format", "xml"}, nil, "--log-format"},
		{"bad profile", []string{"--profile", "fancy"}, nil, `--profile must be extended or original, not "fancy"`},
		{"bad profile env", nil, map[string]string{"TOOLFS_PROFILE": "orig"}, `--profile`},
		{"bad edit dialect", []string{"--edit-dialect", "hashline"}, nil, `--edit-dialect must be str_replace, apply_patch, anchors or all, not "hashline"`},
		{"bad edit dialect env", nil, map[string]string{"TOOLFS_EDIT_DIALECT": "Anchors"}, `--edit-dialect must be str_replace, apply_patch, anchors or all, not "Anchors"`},
		{"edit dialect of the original profile", []string{"--profile", "original", "--edit-dialect", "anchors"}, nil, "--edit-dialect anchors needs --profile extended: the original profile is the original's surface, whose one edit tool is edit"},
		{"bad search sandbox", []string{"--search-sandbox", "off"}, nil, `--search-sandbox must be require or best-effort, not "off"`},
		{"bad search sandbox env", nil, map[string]string{"TOOLFS_SEARCH_SANDBOX": "none"}, `--search-sandbox must be require or best-effort, not "none"`},
		{"public without token", []string{"--addr", "0.0.0.0:0"}, nil, "--token"},
		{"stray argument", []string{"serve"}, nil, "unexpected argument"},
		{"unknown session store", []string{"--session-store", "mysql://db"}, nil, `--session-store must be memory, redis://host:port/db or rediss://host:port/db, not "mysql://db"`},
		{"empty key prefix", []string{"--session-key-prefix", ""}, nil, "--session-key-prefix must not be empty"},
		{"bad redis url", nil, map[string]string{"TOOLFS_SESSION_STORE": "redis://u:hunter2@h:6379/notadb"}, `--session-store "redis://u:xxxxx@h:6379/notadb"`},
		{"bad default session", []string{"--default-session", "has space"}, nil, "--default-session"},
		{"empty default session", []string{"--default-session", ""}, nil, "--default-session must not be empty: use --require-session to serve requests that name no session without one"},
		{"require and default session", []string{"--require-session"}, map[string]string{"TOOLFS_DEFAULT_SESSION": "x"}, "--require-session and --default-session contradict each other: with --require-session a request that names no session has none"},
		{"bad session header", nil, map[string]string{"TOOLFS_SESSION_HEADERS": "X-Chat-Id, bad header"}, `--session-headers: "bad header" is not a header name`},
		{"public url without scheme", []string{"--public-url", "tools.example.com"}, nil, `--public-url "tools.example.com": it must be an absolute http:// or https:// URL`},
		{"public url with query", nil, map[string]string{"TOOLFS_PUBLIC_URL": "https://tools.example.com/?x=1"}, `--public-url "https://tools.example.com/?x=1"`},
		{"public url ftp", []string{"--public-url", "ftp://tools.example.com"}, nil, `--public-url "ftp://tools.example.com"`},
		{"public url with user", []string{"--public-url", "https://u:p@tools.example.com"}, nil, `no user, query or fragment`},
		{"negative cache bytes", []string{"--cache-bytes", "-1"}, nil, "--cache-bytes must be 0 (off) or positive"},
		{"negative racy window", nil, map[string]string{"TOOLFS_CACHE_RACY_WINDOW": "-1s"}, "--cache-racy-window must not be negative"},
		{"bad sandbox mode", []string{"--sandbox-mode", "full"}, nil, `--sandbox-mode must be off, read-only, workspace-write or danger-full-access, not "full"`},
		{"bad sandbox mode env", nil, map[string]string{"TOOLFS_SANDBOX_MODE": "readonly"}, `--sandbox-mode must be off, read-only, workspace-write or danger-full-access, not "readonly"`},
		{"approver token is the agent's", []string{"--token", "t", "--approver-token", "t"}, nil, "--approver-token must differ from --token"},
		{"metrics token is the agent's", []string{"--token", "t"}, map[string]string{"TOOLFS_METRICS_TOKEN": "t"}, "--metrics-token must differ from --token and --approver-token: it is given to whatever scrapes /metrics, and reaches nothing else"},
		{"metrics token is the approver's", []string{"--token", "t", "--approver-token", "a", "--metrics-token", "a"}, nil, "--metrics-token must differ from --token and --approver-token"},
		{"zero approval timeout", []string{"--approval-timeout", "0s"}, nil, "--approval-timeout must be positive"},
		{"zero max approvals", nil, map[string]string{"TOOLFS_MAX_APPROVALS": "0"}, "--max-approvals must be positive"},
		{"zero upload rate", []string{"--upload-min-rate", "0"}, nil, "--upload-min-rate must be positive"},
		{"negative upload rate env", nil, map[string]string{"TOOLFS_UPLOAD_MIN_RATE": "-5"}, "--upload-min-rate must be positive"},
		{"bad upload window", []string{"--upload-rate-window", "soon"}, nil, "upload-rate-window"},
		{"short upload window env", nil, map[string]string{"TOOLFS_UPLOAD_RATE_WINDOW": "500ms"}, "--upload-rate-window must be at least 1s, not 500ms: a shorter window would cut uploads on an ordinary pause of the network"},
		{"lock folder path", []string{"--lock-dir", "/tmp/locks"}, nil, `--lock-dir must be empty or off, not "/tmp/locks": lock files live in the workspace root's .toolfs-api folder`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(context.Background(), tc.args, env(tc.env), io.Discard, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error()+stderr.String(), tc.want)
			assert.NotContains(t, err.Error()+stderr.String(), "hunter2", "a password never reaches the logs")
		})
	}
}

// A private folder someone else prepared (here a symlink out of the root)
// stops start-up with the reason, and nothing is made through it.
func TestRunRefusesHostilePrivateFolder(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(out, filepath.Join(root, ".toolfs-api")))
	err := run(context.Background(), []string{"--root", root, "--addr", "127.0.0.1:0"}, env(nil), io.Discard, io.Discard)
	require.EqualError(t, err, "--root: fs: the server's private folder .toolfs-api in the workspace root is refused: .toolfs-api is not a folder (a symlink or a file); remove it and restart")
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestFlagWinsOverEnv(t *testing.T) {
	c, err := parseConfig([]string{"--read-limit", "10"}, env(map[string]string{"TOOLFS_READ_LIMIT": "20", "TOOLFS_POLICY": "false"}))
	require.NoError(t, err)
	assert.Equal(t, 10, c.Tools.ReadLimit)
	assert.False(t, c.Policy.Enabled)

	c, err = parseConfig([]string{"--session-headers", " X-OpenWebUI-Chat-Id ,X-Chat,", "--default-session", "shared:1"}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, []string{"X-OpenWebUI-Chat-Id", "X-Chat"}, c.Sessions.Sessions().Aliases)
	assert.Equal(t, "shared:1", c.Sessions.Default)
}

// TestUploadPaceFlags: --upload-min-rate and --upload-rate-window (and
// their TOOLFS_* twins) set an upload's pace; by default 1 KiB/s over a
// minute (docs/files.md, "Slow uploads").
func TestUploadPaceFlags(t *testing.T) {
	c, err := parseConfig(nil, env(nil))
	require.NoError(t, err)
	assert.Equal(t, int64(1024), c.Upload.MinRate)
	assert.Equal(t, time.Minute, c.Upload.Window)
	c, err = parseConfig([]string{"--upload-min-rate", "65536"}, env(map[string]string{"TOOLFS_UPLOAD_RATE_WINDOW": "30s", "TOOLFS_UPLOAD_MIN_RATE": "1"}))
	require.NoError(t, err)
	assert.Equal(t, int64(65536), c.Upload.MinRate)
	assert.Equal(t, 30*time.Second, c.Upload.Window)
}

// TestCacheFlags: --cache-racy-window and --cache-bytes reach the read
// caches, as their counters on /metrics show; --cache-bytes 0 turns them
// off.
func TestCacheFlags(t *testing.T) {
	for _, tc := range []struct {
		name                string
		args                []string
		hits, misses, reads string
	}{
		{"defaults: the file is too recent (racy window from the kernel)", nil, "0", "6", "6"},
		{"racy window 1ms", []string{"--cache-racy-window", "1ms"}, "5", "1", "6"},
		{"off", []string{"--cache-racy-window", "1ms", "--cache-bytes", "0"}, "0", "0", "6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hi\n"), 0o644))
			time.Sleep(20 * time.Millisecond)
			base, stop := startRun(t, append([]string{"--root", root, "--addr", "127.0.0.1:0", "--lock-dir", "off"}, tc.args...))
			first := call(t, "POST", base+"/tools/read", "", `{"file_path":"a.txt"}`).body
			assert.Contains(t, first, "1: hi")
			for range 2 { // a hit encodes the answer once, then writes the kept bytes
				assert.Equal(t, first, call(t, "POST", base+"/tools/read", "", `{"file_path":"a.txt"}`).body)
			}
			for range 3 { // streamed: the same text whether line by line or kept whole
				req, err := http.NewRequest("POST", base+"/tools/read", strings.NewReader(`{"file_path":"a.txt"}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "text/plain")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, "<path>"+filepath.Join(root, "a.txt")+"</path>\n<type>file</type>\n<content>\n1: hi\n\n(End of file - total 1 lines)\n</content>", string(b))
				assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
				assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
			}
			m := call(t, "GET", base+"/metrics", "", "").body
			assert.Contains(t, m, `toolfs_cache_hits_total{cache="window"} `+tc.hits+"\n")
			assert.Contains(t, m, `toolfs_cache_misses_total{cache="window"} `+tc.misses+"\n")
			assert.Contains(t, m, `toolfs_read_footers_total{footer="eof"} `+tc.reads+"\n")
			assert.Contains(t, m, `toolfs_fs_stat_calls_total `+tc.reads+"\n")
			stop()
		})
	}
}

// TestCacheMmapWrites: a write through a shared memory map into a page
// already dirty changes the file's bytes but not its stat until the kernel
// writes the page back (docs/performance.md, "Caches"). With the default
// racy window, the kernel's writeback bound, a file so written is not
// cached, so each read answers the bytes the map holds now; a fixed 2 s
// window cached it and answered the first content again.
func TestCacheMmapWrites(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "m.txt")
	require.NoError(t, os.WriteFile(p, []byte("one\n"), 0o644))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, 4, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	require.NoError(t, err)
	defer syscall.Munmap(m)
	copy(m, "two\n") // the page's first write: the kernel sets mtime and ctime once
	var before syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &before))

	base, stop := startRun(t, []string{"--root", root, "--addr", "127.0.0.1:0", "--lock-dir", "off"})
	defer stop()
	// Past a 2 s window, far inside the kernel's (35 s with its defaults).
	time.Sleep(time.Until(time.Unix(before.Ctim.Unix()).Add(2100 * time.Millisecond)))
	read := func() string { return call(t, "POST", base+"/tools/read", "", `{"file_path":"m.txt"}`).body }
	for range 2 {
		assert.Contains(t, read(), `1: two\n\n(End of file`)
	}
	copy(m, "six\n") // no fault: the page is still dirty and writable
	var after syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &after))
	require.Equal(t, [3]any{before.Size, before.Mtim, before.Ctim}, [3]any{after.Size, after.Mtim, after.Ctim},
		"the premise: the second write through the map left the stat as it was (was the page written back meanwhile?)")
	assert.Contains(t, read(), `1: six\n\n(End of file`)
	hits := regexp.MustCompile(`(?m)^toolfs_cache_hits_total\{cache="window"\} .*$`).FindString(call(t, "GET", base+"/metrics", "", "").body)
	assert.Equal(t, `toolfs_cache_hits_total{cache="window"} 0`, hits)
}

// startRun starts the whole server in-process and returns its base URL and
// a function that stops it and returns its log.
func startRun(t *testing.T, args []string) (string, func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done, exited := make(chan error, 1), make(chan struct{})
	go func() { done <- run(ctx, args, env(nil), &stdout, &stderr); close(exited) }()
	var base string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(stdout.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "server did not start: %s", &stderr)
	stop := func() string {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("server did not shut down")
		}
		return stderr.String()
	}
	// Wait for the shutdown: it still writes in the root (the journal's
	// seal puts held contents in blobs/), which the root's TempDir cleanup,
	// run after this one, removes.
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	return base, stop
}

type answer struct {
	status int
	body   string
}

func call(t *testing.T, method, url, session, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, string(b)}
}

// TestSessionStoreRedis runs two servers on one root and one redis-server
// (docs/deployment.md): a session that read through one edits through the other; while
// Redis is down, reads answer, writes, edits and forgets answer 503
// SESSION_STORE_UNAVAILABLE and write nothing, and /healthz stays 200;
// once Redis is back the same servers work again without a restart.
func TestSessionStoreRedis(t *testing.T) {
	rs := redistest.Start(t)
	root := t.TempDir()
	file := filepath.Join(root, "a.txt")
	require.NoError(t, os.WriteFile(file, []byte("one\n"), 0o644))
	args := []string{"--addr", "127.0.0.1:0", "--root", root, "--session-store", rs.URL(3), "--log-format", "json"}
	a, stopA := startRun(t, args)
	b, stopB := startRun(t, args)

	assert.Equal(t, 200, call(t, "POST", a+"/tools/read", "s1", `{"file_path":"a.txt"}`).status)
	got := call(t, "POST", b+"/tools/edit", "s1", `{"file_path":"a.txt","old_string":"one","new_string":"two"}`)
	assert.Equal(t, 200, got.status, got.body)
	got = call(t, "POST", a+"/tools/edit", "s1", `{"file_path":"a.txt","old_string":"two","new_string":"three"}`)
	assert.Equal(t, 200, got.status, "B's write recorded the new version for A: %s", got.body)
	got = call(t, "POST", a+"/tools/edit", "s2", `{"file_path":"a.txt","old_string":"three","new_string":"four"}`)
	assert.Equal(t, 409, got.status, "another session read nothing: %s", got.body)
	other, stopOther := startRun(t, append(args, "--session-key-prefix", "other-workspace:"))
	got = call(t, "POST", other+"/tools/edit", "s1", `{"file_path":"a.txt","old_string":"three","new_string":"four"}`)
	assert.Equal(t, 409, got.status, "another key prefix is another store: %s", got.body)
	assert.Contains(t, got.body, `"code":"FS_NOT_OBSERVED"`)
	stopOther()
	assert.Contains(t, call(t, "GET", b+"/metrics", "", "").body, "\ntoolfs_sessions 2\n", "the gauge counts every server's sessions")

	rs.Stop()
	assert.Equal(t, 200, call(t, "GET", a+"/healthz", "", "").status, "liveness does not depend on Redis")
	got = call(t, "POST", b+"/tools/read", "s1", `{"file_path":"a.txt"}`)
	assert.Equal(t, 200, got.status, "reads answer without Redis")
	assert.Contains(t, got.body, "1: three")
	for _, c := range []struct{ path, body, tool string }{
		{"/tools/write", `{"file_path":"a.txt","content":"lost\n"}`, "write"},
		{"/tools/edit", `{"file_path":"a.txt","old_string":"three","new_string":"lost"}`, "edit"},
		{"/tools/write", `{"file_path":"new.txt","content":"lost\n"}`, "write"},
	} {
		got := call(t, "POST", a+c.path, "s1", c.body)
		assert.Equal(t, 503, got.status, c.body)
		assert.Contains(t, got.body, `"code":"SESSION_STORE_UNAVAILABLE"`)
		p := regexp.MustCompile(`"file_path":"([^"]+)"`).FindStringSubmatch(c.body)[1]
		assert.Contains(t, got.body, `"output":"Error: cannot `+c.tool+` \"`+filepath.Join(root, p)+`\": the session store is unavailable, nothing was written; retry shortly"`)
	}
	got = call(t, "DELETE", a+"/sessions/s1", "", "")
	assert.Equal(t, 503, got.status, "a forget that did not happen is not a 204")
	assert.Contains(t, got.body, `"code":"SESSION_STORE_UNAVAILABLE"`)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "three\n", string(data), "nothing was written during the outage")
	assert.NoFileExists(t, filepath.Join(root, "new.txt"))
	metrics := call(t, "GET", a+"/metrics", "", "").body
	assert.Contains(t, metrics, "\ntoolfs_sessions -1\n", "the gauge says Redis cannot be reached")
	assert.Contains(t, metrics, `toolfs_session_store_errors_total{op="decide"} 3`)
	assert.Contains(t, metrics, `toolfs_session_store_errors_total{op="forget"} 1`)
	assert.Contains(t, metrics, `toolfs_tool_calls_total{code="SESSION_STORE_UNAVAILABLE",tool="write",transport="rest"} 2`)

	// This Redis keeps nothing on disk: after its restart every session
	// must read again (fails closed), then works through any server.
	require.NoError(t, rs.Start())
	got = call(t, "POST", b+"/tools/edit", "s1", `{"file_path":"a.txt","old_string":"three","new_string":"five"}`)
	assert.Equal(t, 409, got.status, "the clients reconnect on their own: %s", got.body)
	assert.Contains(t, got.body, `"code":"FS_NOT_OBSERVED"`)
	// A read answers even when its observation could not be recorded
	// (docs/deployment.md), and the first command on a pooled connection
	// from before the restart may fail: read again until the edit is
	// allowed, a bounded number of times.
	for range 20 {
		assert.Equal(t, 200, call(t, "POST", a+"/tools/read", "s1", `{"file_path":"a.txt"}`).status)
		got = call(t, "POST", b+"/tools/edit", "s1", `{"file_path":"a.txt","old_string":"three","new_string":"five"}`)
		if got.status != 409 || !strings.Contains(got.body, `"code":"FS_NOT_OBSERVED"`) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, 200, got.status, got.body)
	data, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "five\n", string(data))

	logA := stopA()
	stopB()
	assert.Contains(t, logA, `"msg":"session store unavailable"`)
	assert.NotContains(t, logA, "panic")
}

// TestMCPEndpointAndStructuredFlag: the binary serves /mcp, and
// --mcp-structured adds the metadata as structuredContent.
func TestMCPEndpointAndStructuredFlag(t *testing.T) {
	for _, structured := range []bool{false, true} {
		root := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
		args := []string{"--addr", "127.0.0.1:0", "--root", root}
		if structured {
			args = append(args, "--mcp-structured")
		}
		base, stop := startRun(t, args)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "0"}, nil).
			Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
		require.NoError(t, err)
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": "a.txt"}})
		require.NoError(t, err)
		require.Len(t, res.Content, 1)
		assert.Contains(t, res.Content[0].(*mcpsdk.TextContent).Text, "1: one\n")
		if structured {
			meta, ok := res.StructuredContent.(map[string]any)
			require.True(t, ok, "%T", res.StructuredContent)
			assert.Equal(t, float64(1), meta["totalLines"])
		} else {
			assert.Nil(t, res.StructuredContent)
		}
		cs.Close()
		cancel()
		stop()
	}
}

// TestShutdownEndsMCPStreams: SIGTERM drains and exits 0 while a stateful
// MCP client holds its GET stream open (docs/mcp.md, "Shutdown").
func TestShutdownEndsMCPStreams(t *testing.T) {
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", t.TempDir(), "--shutdown-grace", "20s"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "0"}, nil).
		Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp"}, &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer cs.Close()
	_, err = cs.ListTools(ctx, nil)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // the client's GET stream is open
	began := time.Now()
	stop()
	assert.Less(t, time.Since(began), 5*time.Second, "shutdown did not wait out the grace for the GET stream")
}

// TestRedisRoundTripsPerCall: with --session-store redis, a request's use of
// its session (TTL restarted, most recently used, created if new) travels in
// the call's first decision or record: a read is one script call, a write or
// edit two (decide, record), a call refused before the policy one (the use
// alone), on REST, /model and /mcp (docs/performance.md §7). Redis itself
// counts them (INFO commandstats). The change feed is off: with Redis it
// adds its own two per write or edit (docs/deployment.md, "What Redis
// costs").
func TestRedisRoundTripsPerCall(t *testing.T) {
	rs := redistest.Start(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	base, stop := startRun(t, []string{"--addr", "127.0.0.1:0", "--root", root, "--session-store", rs.URL(0), "--log-format", "json", "--events=false"})
	defer stop()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rc.Close()
	scripts := func() int {
		info, err := rc.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		n := 0
		for _, m := range regexp.MustCompile(`(?m)^cmdstat_(?:evalsha|eval):calls=(\d+),`).FindAllStringSubmatch(info, -1) {
			c, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			n += c
		}
		return n
	}
	// The first call loads the script (EVALSHA answered NOSCRIPT, then EVAL).
	require.Equal(t, 200, call(t, "POST", base+"/tools/read", "warm", `{"file_path":"a.txt"}`).status)

	steps := []struct {
		name, method, path, session, body string
		status, want                      int
	}{
		{"read", "POST", "/tools/read", "s1", `{"file_path":"a.txt"}`, 200, 1},
		{"edit", "POST", "/tools/edit", "s1", `{"file_path":"a.txt","old_string":"one","new_string":"two"}`, 200, 2},
		{"write", "POST", "/tools/write", "s1", `{"file_path":"a.txt","content":"three\n"}`, 200, 2},
		{"write of a new file", "POST", "/tools/write", "s1", `{"file_path":"b.txt","content":"b\n"}`, 200, 2},
		{"dry run", "POST", "/tools/write", "s1", `{"file_path":"b.txt","content":"c\n","dry_run":true}`, 200, 1},
		{"read of a missing file", "POST", "/tools/read", "s1", `{"file_path":"none.txt"}`, 404, 1},
		{"read through /model", "POST", "/model/read", "s1", `{"file_path":"a.txt"}`, 200, 1},
		{"edit of an unread file, a new session", "POST", "/tools/edit", "s2", `{"file_path":"a.txt","old_string":"three","new_string":"x"}`, 409, 1},
		{"argument error, a new session", "POST", "/tools/edit", "s3", `{"file_path":"a.txt"}`, 400, 1},
		{"catalog", "GET", "/tools", "s1", "", 200, 1},
	}
	for _, s := range steps {
		before := scripts()
		got := call(t, s.method, base+s.path, s.session, s.body)
		require.Equal(t, s.status, got.status, "%s: %s", s.name, got.body)
		n := scripts() - before
		assert.Equal(t, s.want, n, "%s: script calls", s.name)
		t.Logf("%s %s (%s): %d round trips", s.method, s.path, s.name, n)
	}
	// The use was counted even where no decision or record was made: the
	// new sessions exist, as a separate touch made them.
	for _, id := range []string{"s2", "s3"} {
		_, err := rc.ZScore(ctx, "toolfs:lru", id).Result()
		assert.NoError(t, err, "session %s", id)
	}

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "0"}, nil).
		Connect(cctx, &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp"}, &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer cs.Close()
	for _, s := range []struct {
		tool string
		args map[string]any
		want int
	}{
		{"read", map[string]any{"file_path": "a.txt"}, 1},
		{"edit", map[string]any{"file_path": "a.txt", "old_string": "three", "new_string": "four"}, 2},
	} {
		before := scripts()
		res, err := cs.CallTool(cctx, &mcpsdk.CallToolParams{Name: s.tool, Arguments: s.args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res.Content)
		n := scripts() - before
		assert.Equal(t, s.want, n, "mcp %s: script calls", s.tool)
		t.Logf("/mcp tools/call %s: %d round trips", s.tool, n)
	}
}

// TestRunSetsMemoryLimit: while it serves, the server's Go soft memory limit
// is --cache-bytes plus the memory session store's bound plus the headroom
// (docs/decisions.md, "Memory"), logged on the listening line; GOMEMLIMIT
// in the environment leaves the runtime's own; the limit before run is
// back once it returns.
func TestRunSetsMemoryLimit(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int64 // MiB; 0 = the limit before run
		log  string
	}{
		{name: "defaults", want: 128, log: `memory-limit="128 MiB"`},
		{name: "caches off", args: []string{"--cache-bytes", "0"}, want: 64, log: `memory-limit="64 MiB"`},
		{name: "policy off", args: []string{"--policy=false", "--cache-bytes", "1048576"}, want: 33, log: `memory-limit="33 MiB"`},
		{name: "GOMEMLIMIT set", env: map[string]string{"GOMEMLIMIT": "1GiB"}, log: `memory-limit=GOMEMLIMIT`},
	}
	before := debug.SetMemoryLimit(-1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout, stderr syncBuffer
			done := make(chan error, 1)
			args := append([]string{"--root", t.TempDir(), "--addr", "127.0.0.1:0", "--lock-dir", "off"}, tt.args...)
			go func() { done <- run(ctx, args, env(tt.env), &stdout, &stderr) }()
			require.Eventually(t, func() bool { return strings.Contains(stdout.String(), " on http://") }, 10*time.Second, 10*time.Millisecond, "%s", &stderr)
			want := before
			if tt.want > 0 {
				want = tt.want << 20
			}
			assert.Equal(t, want, debug.SetMemoryLimit(-1))
			assert.Contains(t, stderr.String(), tt.log)
			cancel()
			require.NoError(t, <-done)
			assert.Equal(t, before, debug.SetMemoryLimit(-1), "restored")
		})
	}
}
