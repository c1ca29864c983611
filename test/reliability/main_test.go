// Package reliability holds the crash, concurrency and resource-bound tests
// of toolfs-api (docs/reliability.md). They drive the real server: the
// binary built once by TestMain and run as child processes, or the real
// handler stack on a loopback port in-process where the test needs to look
// inside (goroutines, descriptors, the session store).
//
// The default run is short; TOOLFS_LONG=1 runs the long variants.
package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// serverBin is the toolfs-api binary TestMain built. It is built without
// -race even under -race: a race-enabled child is ten times slower under
// lock contention, and the in-process tests run the same handler stack
// under the detector.
var serverBin string

// long reports whether TOOLFS_LONG=1 asked for the long variants.
var long = os.Getenv("TOOLFS_LONG") == "1"

func TestMain(m *testing.M) { os.Exit(servertest.RunWithBinary(m, &serverBin)) }

// child is a toolfs-api process serving a root on a loopback port.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:<port>
	stderr string // path of the file that collects its log
	exited chan struct{}
	err    error // Wait's result, valid once exited is closed
}

// startChild runs the binary on root with extra flags and waits for its
// "serving" line. The process is killed at cleanup
// if the test has not stopped it, and dies with the test process
// (Pdeathsig), so nothing is left behind.
func startChild(t *testing.T, root string, extra ...string) *child {
	t.Helper()
	return startChildEnv(t, nil, root, extra...)
}

// startChildEnv is startChild with extra environment variables.
func startChildEnv(t *testing.T, env []string, root string, extra ...string) *child {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "server-*.log")
	require.NoError(t, err)
	defer logf.Close()
	args := append([]string{"--root", root, "--addr", "127.0.0.1:0", "--log-format", "json"}, extra...)
	cmd := exec.Command(serverBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	lines := make(chan string, 1)
	cmd.Stdout = &firstLine{ch: lines}
	cmd.WaitDelay = 5 * time.Second // a grandchild holding stdout cannot stall Wait
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	c := &child{t: t, cmd: cmd, stderr: logf.Name(), exited: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { c.kill(); c.checkLog() })

	select {
	case line := <-lines:
		m := regexp.MustCompile(`^toolfs-api serving .* on (http://127\.0\.0\.1:\d+)$`).FindStringSubmatch(line)
		require.NotNil(t, m, "first line: %q\nlog: %s", line, c.log())
		c.base = m[1]
	case <-c.exited:
		t.Fatalf("toolfs-api exited at start-up: %v; log: %s", c.err, c.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("toolfs-api did not start; log: %s", c.log())
	}
	return c
}

// firstLine is a stdout that hands its first line to ch and drops the rest.
type firstLine struct {
	buf  []byte
	ch   chan<- string // buffered
	sent bool
}

func (f *firstLine) Write(p []byte) (int, error) {
	if !f.sent {
		f.buf = append(f.buf, p...)
		if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
			f.ch <- string(f.buf[:i])
			f.sent, f.buf = true, nil
		}
	}
	return len(p), nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// stop sends SIGTERM and requires a clean exit (status 0) within 20 s.
func (c *child) stop() {
	c.t.Helper()
	require.NoError(c.t, c.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-c.exited:
		require.NoError(c.t, c.err, "exit after SIGTERM; log: %s", c.log())
	case <-time.After(20 * time.Second):
		c.t.Fatalf("no exit 20 s after SIGTERM")
	}
}

func (c *child) log() string {
	b, _ := os.ReadFile(c.stderr)
	return string(b)
}

// checkLog fails the test if the child's runtime reported a panic or a
// fatal error.
func (c *child) checkLog() {
	log := c.log()
	for _, bad := range []string{"panic:", `"msg":"panic"`, "http: panic", "fatal error:"} {
		if strings.Contains(log, bad) {
			c.t.Errorf("server log reports %q:\n%s", bad, log)
			return
		}
	}
}

// metrics reads unlabelled samples from the child's /metrics, in the order
// of names, through hc (so a caller can keep one connection for every
// sample).
func (c *child) metrics(hc *http.Client, names ...string) []float64 {
	c.t.Helper()
	resp, err := hc.Get(c.base + "/metrics")
	require.NoError(c.t, err)
	defer resp.Body.Close()
	values := make([]float64, len(names))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for i, name := range names {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				_, err := fmt.Sscan(v, &values[i])
				require.NoError(c.t, err, sc.Text())
				found++
			}
		}
	}
	require.Equal(c.t, len(names), found, "metrics %v", names)
	return values
}

// answer is a decoded tool response: status, stable code on failure, and
// the success members.
type answer struct {
	Status   int
	Code     string `json:"code"`
	Output   string `json:"output"`
	Metadata struct {
		Lines []struct {
			Number int    `json:"number"`
			Text   string `json:"text"`
		} `json:"lines"`
		TotalLines int `json:"totalLines"`
	} `json:"metadata"`
	Raw string
}

// call posts body as JSON to base/tools/<tool> for session. A transport
// error is returned, never fatal: crash tests expect them.
func call(ctx context.Context, hc *http.Client, base, tool, session string, body any) (answer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tools/"+tool, bytes.NewReader(b))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{Status: resp.StatusCode, Raw: string(raw)}
	if err := json.Unmarshal(raw, &a); err != nil {
		return answer{}, fmt.Errorf("status %d, undecodable body %q: %w", resp.StatusCode, raw, err)
	}
	a.Status = resp.StatusCode
	return a, nil
}

// mustCall is call for tests that expect the server to be up.
func mustCall(t *testing.T, hc *http.Client, base, tool, session string, body any) answer {
	t.Helper()
	a, err := call(context.Background(), hc, base, tool, session, body)
	require.NoError(t, err)
	return a
}

// newClient is an HTTP client with its own connection pool.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: time.Minute}
}

type obj = map[string]any
