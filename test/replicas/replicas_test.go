// Package replicas proves the deployment of docs/deployment.md: N replica
// processes of the real binary on one workspace root, behind the real nginx
// with deploy/nginx/toolfs-api.conf (round robin, no affinity), sharing one
// real redis-server for sessions, while replicas are SIGKILLed and restarted
// and Redis itself is stopped and started. It also checks that the files in
// deploy/ are valid (nginx -t, the Kubernetes YAML, the systemd unit).
//
// TOOLFS_REPLICAS_SECONDS sets the length of the load (default 15).
package replicas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/redistest"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// serverBin is the toolfs-api binary TestMain built (without -race: the
// children are the system under load, not under the detector).
var serverBin string

func TestMain(m *testing.M) { os.Exit(servertest.RunWithBinary(m, &serverBin)) }

const token = "replicas-test-token"

// replica is one toolfs-api process on a fixed loopback port, so it can be
// killed and started again behind the same nginx upstream line.
type replica struct {
	port   int
	args   []string
	log    *os.File
	pid    int
	exited chan struct{}
	starts int
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(serverBin, append([]string{"--addr", "127.0.0.1:" + strconv.Itoa(r.port)}, r.args...)...)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	r.pid, r.exited, r.starts = cmd.Process.Pid, make(chan struct{}), r.starts+1
	exited := r.exited
	go func() { cmd.Wait(); close(exited) }()
	url := "http://127.0.0.1:" + strconv.Itoa(r.port) + "/healthz"
	for range 500 { // 10 s
		select {
		case <-exited:
			t.Fatalf("replica on port %d exited at start-up (log %s)", r.port, r.log.Name())
		case <-time.After(20 * time.Millisecond):
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	t.Fatalf("replica on port %d did not become healthy", r.port)
}

func (r *replica) kill() {
	if r.exited == nil {
		return
	}
	syscall.Kill(r.pid, syscall.SIGKILL)
	<-r.exited
	r.exited = nil
}

// nginxConf rewrites deploy/nginx/toolfs-api.conf for the test: the upstream
// lists the replicas' ports and nginx listens on listen. Nothing else
// changes, so the test runs the configuration people copy.
func nginxConf(t *testing.T, replicaPorts []int, listen int) string {
	t.Helper()
	src, err := os.ReadFile("../../deploy/nginx/toolfs-api.conf")
	require.NoError(t, err)
	// Each upstream's run of server lines becomes one line per test replica.
	servers := regexp.MustCompile(`(?m)(?:^[ \t]*server 127\.0\.0\.1:\d+(?: [^;]*)?;\n)+`)
	line := regexp.MustCompile(`^([ \t]*)server 127\.0\.0\.1:\d+((?: [^;]*)?);`)
	require.Len(t, servers.FindAll(src, -1), 1, "one upstream, round robin, for every route")
	out := servers.ReplaceAllFunc(src, func(group []byte) []byte {
		m := line.FindSubmatch(group)
		var lines strings.Builder
		for _, p := range replicaPorts {
			fmt.Fprintf(&lines, "%sserver 127.0.0.1:%d%s;\n", m[1], p, m[2])
		}
		return []byte(lines.String())
	})
	listenRe := regexp.MustCompile(`(?m)^(\s*)listen 127\.0\.0\.1:8080;`)
	require.True(t, listenRe.Match(out))
	out = listenRe.ReplaceAll(out, []byte(fmt.Sprintf("${1}listen 127.0.0.1:%d;", listen)))
	return string(out)
}

// nginxDir makes a folder nginx's workers (nobody, when the test runs as
// root) can enter, removed at cleanup.
func nginxDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "toolfs-nginx-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o711))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// writeNginxMain writes the main configuration that includes site, with
// every path in dir. The response header X-Toolfs-Upstream names the
// replica that answered, so the test can see sessions change replicas.
func writeNginxMain(t *testing.T, dir, site string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "toolfs-api.conf"), []byte(site), 0o644))
	main := fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/client_body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  add_header X-Toolfs-Upstream $upstream_addr always;
  include %[1]s/toolfs-api.conf;
}
`, dir)
	path := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(path, []byte(main), 0o644))
	return path
}

func nginxBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Skip("nginx not found (apt-get install nginx; .ci/run installs it)")
	return ""
}

// TestNginxConfig: deploy/nginx/toolfs-api.conf, as shipped, passes nginx -t.
func TestNginxConfig(t *testing.T) {
	bin := nginxBin(t)
	src, err := os.ReadFile("../../deploy/nginx/toolfs-api.conf")
	require.NoError(t, err)
	dir := nginxDir(t)
	conf := writeNginxMain(t, dir, string(src))
	out, err := exec.Command(bin, "-t", "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "test is successful")
	directives := regexp.MustCompile(`(?m)#.*$`).ReplaceAllString(string(src), "")
	for _, want := range []string{"proxy_buffering off;", "proxy_http_version 1.1;", "client_max_body_size 32m;"} {
		assert.Contains(t, directives, want)
	}
	block := func(re string) string {
		m := regexp.MustCompile(`(?s)` + re + `\s*\{(.*?)\}`).FindStringSubmatch(directives)
		require.NotNil(t, m, re)
		return m[1]
	}
	// Round robin without affinity, for every route (SPEC §17: no sticky
	// routing anywhere in deploy/).
	for _, affinity := range []string{"ip_hash", "sticky", "hash "} {
		assert.NotContains(t, directives, affinity)
	}
	assert.Len(t, regexp.MustCompile(`(?m)^\s*upstream\s`).FindAllString(directives, -1), 1, "one upstream")
	for _, loc := range []string{`location /`, `location /events`, `location /mcp`, `location /files/`} {
		assert.Contains(t, block(loc), "proxy_pass http://toolfs_api;", loc)
	}
	// Uploads stream to the replica, up to --max-upload-bytes' default
	// (TestUploadsBehindNginx).
	for _, want := range []string{"proxy_request_buffering off;", "client_max_body_size 1g;"} {
		assert.Contains(t, block(`location /files/`), want)
	}
	// A POST that reached a replica is never replayed on another.
	assert.NotContains(t, directives, "non_idempotent")
}

// counters is the workspace of the load: files of 8 lines "sNN: <value>",
// each line owned by one session that increments it, so every session races
// seven others for its file's version.
const (
	sessionsN    = 64
	perFile      = 8
	replicasN    = 3
	redisDBIndex = 5
)

type loadStats struct {
	calls, reads, edits, stale, notObserved atomic.Int64
	storeUnavailable                        atomic.Int64 // 503 SESSION_STORE_UNAVAILABLE from a replica
	proxyErrors                             atomic.Int64 // 502/503/504 from nginx itself (a replica was down)
	crossReplica                            atomic.Int64 // edits answered by another replica than the read before
	ambiguousApplied, ambiguousNot          atomic.Int64 // proxy errors on an edit, resolved by the next read
	editsAfterOutage                        atomic.Int64
	mu                                      sync.Mutex
	problems                                []string // bounded
}

func (s *loadStats) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) < 20 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// session is one model's loop: read its file, edit its line from the value
// it saw to the next, and again; it tracks the value its line must hold.
type session struct {
	id, file, line string
	value          int  // what the file must hold for this line
	pending        bool // an edit value -> value+1 got no answer from a replica
	acked          int
}

type reply struct {
	status   int
	ctype    string
	upstream string
	body     []byte
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

func post(base, session, tool string, body any) (reply, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, base+"/tools/"+tool, bytes.NewReader(b))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Session-ID", session)
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Toolfs-Upstream"), data}, err
}

func (r reply) code() string {
	var p struct{ Code string }
	if strings.HasPrefix(r.ctype, "application/problem+json") {
		json.Unmarshal(r.body, &p)
	}
	return p.Code
}

// fromProxy reports whether nginx itself answered (a replica was down or
// died mid-call): its error pages are HTML, the server's are problem+json.
func (r reply) fromProxy() bool {
	return r.status >= 500 && !strings.HasPrefix(r.ctype, "application/problem+json")
}

var fileLine = regexp.MustCompile(`^\d+: s\d\d: \d+$`)

// checkRead parses a read's output: every line of the file must be whole
// (no torn file), and this session's line must hold exactly what it
// expects, resolving a pending edit.
func (s *session) checkRead(st *loadStats, r reply) {
	var res struct{ Output string }
	if err := json.Unmarshal(r.body, &res); err != nil {
		st.problem("%s: read body: %v", s.id, err)
		return
	}
	s.checkOutput(st, res.Output)
}

// checkOutput checks a read's output (REST's output, MCP's text).
func (s *session) checkOutput(st *loadStats, output string) {
	lines := strings.Split(output, "\n")
	var content []string
	for _, l := range lines {
		if len(l) > 0 && l[0] >= '0' && l[0] <= '9' {
			content = append(content, l)
		}
	}
	if len(content) != perFile {
		st.problem("%s: torn file: %d lines: %q", s.id, len(content), output)
		return
	}
	got := -1
	for _, l := range content {
		if !fileLine.MatchString(l) {
			st.problem("%s: torn line %q", s.id, l)
			return
		}
		if _, rest, _ := strings.Cut(l, ": "); strings.HasPrefix(rest, s.line+": ") {
			got, _ = strconv.Atoi(strings.TrimPrefix(rest, s.line+": "))
		}
	}
	switch {
	case s.pending && got == s.value+1:
		s.value++
		st.ambiguousApplied.Add(1)
	case s.pending && got == s.value:
		st.ambiguousNot.Add(1)
	case got != s.value:
		st.problem("%s: line holds %d, expected %d (a lost or doubled update)", s.id, got, s.value)
		s.value = got
	}
	s.pending = false
}

func (s *session) run(base string, st *loadStats, until time.Time, outageOver *atomic.Bool) {
	needRead := true
	var readFrom string
	for time.Now().Before(until) {
		if needRead {
			r, err := post(base, s.id, "read", map[string]any{"file_path": s.file})
			st.calls.Add(1)
			switch {
			case err != nil:
				st.problem("%s: read: %v", s.id, err)
				time.Sleep(50 * time.Millisecond)
			case r.status == 200:
				st.reads.Add(1)
				s.checkRead(st, r)
				readFrom, needRead = r.upstream, false
			case r.fromProxy():
				st.proxyErrors.Add(1)
				time.Sleep(20 * time.Millisecond)
			default:
				st.problem("%s: read answered %d %s", s.id, r.status, r.body)
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		old := fmt.Sprintf("%s: %d\n", s.line, s.value)
		r, err := post(base, s.id, "edit", map[string]any{"file_path": s.file, "old_string": old,
			"new_string": fmt.Sprintf("%s: %d\n", s.line, s.value+1)})
		st.calls.Add(1)
		switch {
		case err != nil:
			// The transport failed: the edit may or may not have happened.
			s.pending, needRead = true, true
		case r.status == 200:
			s.value++
			s.acked++
			st.edits.Add(1)
			if outageOver.Load() {
				st.editsAfterOutage.Add(1)
			}
			if r.upstream != readFrom {
				st.crossReplica.Add(1)
			}
			readFrom = r.upstream // the edit recorded the new version: edit again
		case r.code() == "FS_STALE_VERSION":
			st.stale.Add(1)
			needRead = true
		case r.code() == "FS_NOT_OBSERVED":
			st.notObserved.Add(1)
			needRead = true
		case r.code() == "SESSION_STORE_UNAVAILABLE":
			st.storeUnavailable.Add(1) // nothing was written: the next read checks it
			needRead = true
			time.Sleep(20 * time.Millisecond)
		case r.fromProxy():
			st.proxyErrors.Add(1)
			s.pending, needRead = true, true
			time.Sleep(20 * time.Millisecond)
		default:
			st.problem("%s: edit answered %d %s", s.id, r.status, r.body)
			needRead = true
		}
	}
}

// startDeployment starts replicasN replicas on root with the session store
// at storeURL (and the extra flags), behind nginx with
// deploy/nginx/toolfs-api.conf; it returns
// nginx's URL, the replicas and nginx's folder (its error.log).
func startDeployment(t *testing.T, nginx, root, storeURL string, extra ...string) (string, []*replica, string) {
	t.Helper()
	logs := t.TempDir()
	replicas := make([]*replica, replicasN)
	ports := make([]int, replicasN)
	for i := range replicas {
		log, err := os.Create(filepath.Join(logs, fmt.Sprintf("replica-%d.log", i)))
		require.NoError(t, err)
		t.Cleanup(func() { log.Close() })
		ports[i] = servertest.FreePort(t)
		replicas[i] = &replica{port: ports[i], log: log, args: []string{"--root", root, "--token", token,
			"--session-store", storeURL, "--log-format", "json"}}
		replicas[i].args = append(replicas[i].args, extra...)
		replicas[i].start(t)
		t.Cleanup(replicas[i].kill)
	}

	dir := nginxDir(t)
	listen := servertest.FreePort(t)
	conf := writeNginxMain(t, dir, nginxConf(t, ports, listen))
	ng := exec.Command(nginx, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	ng.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, ng.Start())
	t.Cleanup(func() { ng.Process.Signal(syscall.SIGQUIT); ng.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", listen)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 10*time.Second, 20*time.Millisecond, "nginx did not start")

	return base, replicas, dir
}

// TestReplicasBehindNginx is the proof of docs/deployment.md: 3 replicas,
// 64 sessions whose consecutive calls land on different replicas, replicas
// SIGKILLed and restarted and Redis stopped and restarted during the load.
// Every acknowledged edit is in the final files exactly once (an edit whose
// replica died mid-call is counted once the next read shows whether it
// happened), no file is ever torn, no session that read a file is told it
// did not, and the only 5xx are nginx's while a replica is down and the
// replicas' 503 SESSION_STORE_UNAVAILABLE while Redis is.
func TestReplicasBehindNginx(t *testing.T) {
	nginx := nginxBin(t)
	rs := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	seconds := 15
	if v, err := strconv.Atoi(os.Getenv("TOOLFS_REPLICAS_SECONDS")); err == nil && v > 0 {
		seconds = v
	}

	root := t.TempDir()
	sessions := make([]*session, sessionsN)
	for f := range sessionsN / perFile {
		var b strings.Builder
		for i := range perFile {
			n := f*perFile + i
			sessions[n] = &session{id: fmt.Sprintf("sess-%02d", n), file: fmt.Sprintf("f%d.txt", f), line: fmt.Sprintf("s%02d", n)}
			fmt.Fprintf(&b, "s%02d: 0\n", n)
		}
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", f)), []byte(b.String()), 0o644))
	}

	mcpSessions := mcpFiles(t, root)

	base, replicas, dir := startDeployment(t, nginx, root, rs.URL(redisDBIndex))
	mcpClients := make([]*mcpClient, len(mcpSessions))
	for i, s := range mcpSessions {
		version := mcpSessionful
		if i%2 == 1 {
			version = mcpSessionless
		}
		mcpClients[i] = connectMCP(t, base, s, version)
	}

	var st loadStats
	var ms mcpStats
	var outageOver atomic.Bool
	start := time.Now()
	until := start.Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.run(base, &st, until, &outageOver) })
	}
	for _, c := range mcpClients {
		wg.Go(func() { c.run(&st, &ms, until) })
	}

	// The chaos: at each eighth of the load, a replica SIGKILLed and
	// restarted 0.5 s later, or (in the middle) Redis stopped for 1.5 s.
	kills := 0
	step := time.Duration(seconds) * time.Second / 8
	var outageStart, outageEnd time.Time
	for i := 1; i < 8; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * step)))
		if i == 4 {
			outageStart = time.Now()
			rs.Stop()
			time.Sleep(1500 * time.Millisecond)
			require.NoError(t, rs.Start())
			outageEnd = time.Now()
			outageOver.Store(true)
			continue
		}
		r := replicas[kills%replicasN]
		r.kill()
		kills++
		time.Sleep(500 * time.Millisecond)
		r.start(t)
	}
	wg.Wait()
	elapsed := time.Since(start)

	// Resolve every edit left without an answer, then compare with the disk.
	outageOver.Store(false)
	for _, s := range sessions {
		for range 50 {
			r, err := post(base, s.id, "read", map[string]any{"file_path": s.file})
			if err == nil && r.status == 200 {
				s.checkRead(&st, r)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.False(t, s.pending, "%s: pending edit not resolved", s.id)
	}
	stuck := 0
	for _, c := range mcpClients {
		if !c.settle(&st) {
			stuck++
			st.problem("%s (%s): stuck: no read answers after the load: %s", c.id, c.version, c.lastErr)
		}
		require.False(t, c.pending, "%s: pending edit not resolved", c.id)
		require.Equal(t, c.mcpID, c.cs.ID(), "%s: the client kept its MCP session", c.id)
	}
	lost, doubled, acked := 0, 0, 0
	for _, s := range append(sessions, mcpSessions...) {
		data, err := os.ReadFile(filepath.Join(root, s.file))
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^` + s.line + `: (\d+)$`).FindStringSubmatch(string(data))
		require.NotNil(t, m, "%s: line missing from %s", s.id, s.file)
		final, _ := strconv.Atoi(m[1])
		acked += s.acked
		switch {
		case final < s.value:
			lost += s.value - final
		case final > s.value:
			doubled += final - s.value
		}
	}

	t.Logf("load %.1fs: %d calls (%.0f/s), %d reads, %d edits acknowledged (%d answered by another replica than the session's previous call), %d stale, %d FS_NOT_OBSERVED",
		elapsed.Seconds(), st.calls.Load(), float64(st.calls.Load())/elapsed.Seconds(), st.reads.Load(), st.edits.Load(), st.crossReplica.Load(), st.stale.Load(), st.notObserved.Load())
	t.Logf("chaos: %d replicas SIGKILLed and restarted, Redis down %.1fs: nginx 5xx %d, replica 503 SESSION_STORE_UNAVAILABLE %d, unanswered edits %d applied + %d not, %d edits after the outage",
		kills, outageEnd.Sub(outageStart).Seconds(), st.proxyErrors.Load(), st.storeUnavailable.Load(), st.ambiguousApplied.Load(), st.ambiguousNot.Load(), st.editsAfterOutage.Load())
	t.Logf("mcp: %d clients (%d on %s, %d on %s): %d calls, %d edits acknowledged (%d answered by another replica than the client's previous call), %d stale, %d call errors (nginx 502 or a broken connection), %d SESSION_STORE_UNAVAILABLE, %d session-missing (404), %d stuck",
		len(mcpClients), (len(mcpClients)+1)/2, mcpSessionful, len(mcpClients)/2, mcpSessionless, ms.calls.Load(), ms.edits.Load(), ms.crossReplica.Load(), ms.stale.Load(), ms.transportErrors.Load(), ms.storeUnavailable.Load(), ms.missing.Load(), stuck)
	t.Logf("result: lost updates %d, doubled %d, acknowledged edits in the files %d", lost, doubled, acked)

	assert.Empty(t, st.problems)
	assert.Zero(t, lost, "lost updates")
	assert.Zero(t, doubled, "doubled updates")
	assert.Zero(t, st.notObserved.Load(), "FS_NOT_OBSERVED for files the session had read")
	assert.Equal(t, 6, kills)
	assert.Positive(t, st.storeUnavailable.Load(), "writes were refused while Redis was down")
	assert.Positive(t, st.editsAfterOutage.Load(), "edits succeed again after Redis is back")
	assert.Positive(t, st.crossReplica.Load(), "sessions read through one replica and edit through another")
	assert.Positive(t, st.edits.Load())
	assert.Zero(t, ms.missing.Load(), "MCP calls answered 404 for their session")
	assert.Zero(t, stuck, "MCP clients stuck")
	assert.Positive(t, ms.edits.Load())
	assert.Positive(t, ms.crossReplica.Load(), "MCP clients read through one replica and edit through another")
	ackedBy := map[string]int{}
	for _, c := range mcpClients {
		ackedBy[c.version] += c.acked
		t.Logf("%s (%s): %d edits acknowledged, %d reads, %d stale, %d call errors, mean read %v", c.id, c.version, c.acked, c.reads, c.stale, c.errs, c.readTime/time.Duration(max(c.reads, 1)))
	}
	for _, v := range []string{mcpSessionful, mcpSessionless} {
		assert.Positive(t, ackedBy[v], "MCP clients on %s got edits through", v)
	}
	if t.Failed() {
		for _, r := range replicas {
			data, _ := os.ReadFile(r.log.Name())
			t.Logf("%s (tail): %s", r.log.Name(), tail(data, 2000))
		}
		data, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Logf("nginx error.log (tail): %s", tail(data, 2000))
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// mcpCall posts one JSON-RPC message to base/mcp (a protocol revision with
// sessions) and returns the status, the Mcp-Session-Id and the body.
func mcpCall(t *testing.T, base, session, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(data)
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"replicas","version":"0"}}}`

func mcpToolCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// TestMCPBehindNginx: an MCP session of a revision with sessions is one
// session on every replica (docs/mcp.md, "Sessions across replicas"): minted
// on one replica, it is served by the others, which derive the same policy
// session (a read on one allows an edit on another); through nginx round
// robin an official SDK client goes on in the same session when the
// replica that minted it is SIGKILLed; once the client ends it (DELETE)
// every replica answers 404.
func TestMCPBehindNginx(t *testing.T) {
	nginx := nginxBin(t)
	rs := redistest.Start(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	base, replicas, ngDir := startDeployment(t, nginx, root, rs.URL(redisDBIndex))
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(filepath.Join(ngDir, "error.log"))
			t.Logf("nginx error.log (tail): %s", tail(data, 3000))
			for _, r := range replicas {
				data, _ := os.ReadFile(r.log.Name())
				t.Logf("%s (tail): %s", r.log.Name(), tail(data, 1500))
			}
		}
	})

	direct := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(replicas[i].port) }
	status, id, body := mcpCall(t, direct(0), "", mcpInitialize)
	require.Equal(t, 200, status, body)
	require.NotEmpty(t, id)
	status, _, body = mcpCall(t, direct(1), id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, 202, status, body)
	status, _, body = mcpCall(t, direct(2), id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	require.Equal(t, 200, status, body)
	// A read on replica 1 and an edit on replica 2: one policy session.
	status, _, body = mcpCall(t, direct(1), id, mcpToolCall(3, "read", `{"file_path":"a.txt"}`))
	require.Equal(t, 200, status, body)
	assert.Contains(t, body, "1: one")
	status, _, body = mcpCall(t, direct(2), id, mcpToolCall(4, "edit", `{"file_path":"a.txt","old_string":"one","new_string":"two"}`))
	require.Equal(t, 200, status, body)
	assert.NotContains(t, body, `"isError":true`, body)
	data, err := os.ReadFile(filepath.Join(root, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(data))
	// An id no replica minted is unknown everywhere.
	for i := range replicas {
		status, _, _ = mcpCall(t, direct(i), "NOTMINTEDBYANYREPLICA", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
		assert.Equal(t, 404, status)
	}

	// The official client through nginx, on both kinds of revision; the
	// replica that answered its initialize is killed, and it goes on.
	for _, version := range []string{mcpSessionful, "2025-06-18", mcpSessionless} {
		s := &session{id: "behind-" + version, file: "a.txt"}
		c := connectMCP(t, base, s, version)
		minted := c.tr.upstream()
		for i := range 2 * replicasN {
			text, isErr, err := c.call("read", map[string]any{"file_path": "a.txt"})
			require.NoError(t, err, "%s call %d", version, i)
			require.False(t, isErr, text)
		}
		var killed *replica
		for _, r := range replicas {
			if strings.HasSuffix(minted, ":"+strconv.Itoa(r.port)) {
				killed = r
			}
		}
		require.NotNil(t, killed, "the initialize's replica %q", minted)
		killed.kill()
		// The first calls may get nginx's 502 (one went out on a kept-alive
		// connection to the dead replica, and nginx replays no POST; the
		// replicas killed before are skipped for fail_timeout), never a 404:
		// the client keeps its session and a next call works.
		text, isErr, err := c.call("read", map[string]any{"file_path": "a.txt"})
		for try := 0; err != nil && try < 20; try++ {
			require.NotErrorIs(t, err, sdk.ErrSessionMissing)
			require.ErrorContains(t, err, "Bad Gateway")
			time.Sleep(200 * time.Millisecond) // nginx skips a replica for 2 s (fail_timeout) after it failed
			text, isErr, err = c.call("read", map[string]any{"file_path": "a.txt"})
		}
		require.NoError(t, err, "%s: the first call after the kill", version)
		require.False(t, isErr, text)
		for k := range 2 * replicasN {
			from, to := "two", "three"
			if k%2 == 1 {
				from, to = to, from
			}
			text, isErr, err := c.call("edit", map[string]any{"file_path": "a.txt", "old_string": from, "new_string": to})
			require.NoError(t, err, "%s edit %d after the kill", version, k)
			require.False(t, isErr, text)
		}
		assert.Equal(t, c.mcpID, c.cs.ID(), "%s: the same session, never initialized again", version)
		killed.start(t)
		if version < mcpSessionless {
			require.NoError(t, c.cs.Close()) // DELETE, through nginx
			for i := range replicas {
				status, _, _ = mcpCall(t, direct(i), c.mcpID, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
				assert.Equal(t, 404, status, "%s: an ended session on replica %d", version, i)
			}
		}
	}

	// REST through the same nginx still spreads over the replicas (the one
	// restarted last, once nginx's fail_timeout of 2 s has passed).
	seen := map[string]bool{}
	for deadline := time.Now().Add(5 * time.Second); len(seen) < replicasN && time.Now().Before(deadline); {
		r, err := post(base, "rest", "read", map[string]any{"file_path": "a.txt"})
		require.NoError(t, err)
		require.Equal(t, 200, r.status, "%s", r.body)
		seen[r.upstream] = true
		time.Sleep(50 * time.Millisecond)
	}
	assert.Len(t, seen, replicasN, "round robin: %v", seen)
}
