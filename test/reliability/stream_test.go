package reliability

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
)

// bigFile writes a text file of size bytes (a block of 10,000 numbered
// 100-byte lines, repeated) and returns its path.
func bigFile(t *testing.T, dir string, size int) string {
	t.Helper()
	var block strings.Builder
	for i := 0; i < 10_000; i++ {
		fmt.Fprintf(&block, "%010d %s\n", i, strings.Repeat("x", 88))
	}
	p := filepath.Join(dir, "big.txt")
	f, err := os.Create(p)
	require.NoError(t, err)
	for n := 0; n < size; n += block.Len() {
		_, err := f.WriteString(block.String())
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	return p
}

// openStream starts a streamed read (Accept: text/plain) of big.txt on a
// raw connection with a small receive buffer, and returns once the 200
// status and some body have arrived.
func openStream(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4<<10))
	body := `{"file_path":"big.txt"}`
	_, err = fmt.Fprintf(conn, "POST /tools/read HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/plain\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	got := make([]byte, 0, 64<<10)
	for len(got) < 32<<10 {
		buf := make([]byte, 8<<10)
		n, err := conn.Read(buf)
		require.NoError(t, err, "after %d bytes", len(got))
		got = append(got, buf[:n]...)
	}
	require.True(t, strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n"), "%.200q", got)
	require.Contains(t, string(got), "\r\n\r\n")
	require.Contains(t, string(got), "<content>\n1: 0000000000 ")
	return conn
}

// openFds lists this process's descriptors by what they point at.
func openFds(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out = append(out, target)
		}
	}
	return out
}

// holding reports whether a descriptor of this process points at path.
func holding(t *testing.T, path string) bool {
	for _, target := range openFds(t) {
		if target == path {
			return true
		}
	}
	return false
}

// streaming reports whether a goroutine is inside the streamed read.
func streaming() bool {
	buf := make([]byte, 4<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "tools.(*Reading).Stream(")
}

// waitFor polls cond in the calling goroutine (so cond may use require)
// every 20 ms until it holds or limit passes, and says how long it took.
func waitFor(limit time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			return time.Since(start), false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), true
}

// TestStreamingClientsReleaseResources starts streamed reads of a 64 MiB
// file in-process and (i) closes the connection after the first bytes,
// (ii) stops reading but keeps the connection open. Either way the server
// must let go of the file and the goroutine within a bounded time (for (ii),
// the per-flush write deadline, 1 s here), and the goroutine and descriptor
// counts return to where they were.
func TestStreamingClientsReleaseResources(t *testing.T) {
	const window = time.Second
	srv := startInProcess(t, inProcessOptions{
		caps:        render.Caps{Limit: 10_000_000, MaxLineLength: 2000, MaxBytes: 1 << 30},
		writeWindow: window,
	})
	big := bigFile(t, srv.root, 64<<20)
	addr := strings.TrimPrefix(srv.base, "http://")

	// Baseline: the server idle, after one complete request and with no
	// client connection left open.
	hc := newClient()
	require.Equal(t, 200, mustCall(t, hc, srv.base, "read", "", obj{"file_path": "big.txt", "limit": 1}).Status)
	hc.CloseIdleConnections()
	_, ok := waitFor(5*time.Second, func() bool { return !holding(t, big) && !streaming() })
	require.True(t, ok, "the warm-up read still holds the file")
	time.Sleep(100 * time.Millisecond) // let the closed connection's goroutines end
	baseG, baseFds := runtime.NumGoroutine(), len(openFds(t))

	// settled waits until the file is closed, no goroutine is streaming,
	// and the goroutine and descriptor counts are back at the baseline. It
	// polls by hand: assert.Eventually runs goroutines of its own.
	settled := func(what string, limit time.Duration, clientFds int) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			g, fds, open := runtime.NumGoroutine(), len(openFds(t)), holding(t, big)
			if !open && !streaming() && g <= baseG && fds <= baseFds+clientFds {
				return time.Since(start)
			}
			if time.Since(start) > limit {
				buf := make([]byte, 1<<20)
				t.Fatalf("%s: after %s goroutines %d (baseline %d), descriptors %d (baseline %d), file open %v\n%s",
					what, limit, g, baseG, fds, baseFds, open, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// (i) The client closes its connection after the first bytes.
	conn := openStream(t, addr)
	require.True(t, holding(t, big) && streaming(), "the stream has the file open")
	conn.Close()
	closed := settled("closed client", 5*time.Second, 0)

	// (ii) The client holds its connection open and reads nothing more. The
	// server must give up on its own when a flush misses its write window:
	// the file closes, the handler goroutine ends, and the server closes its
	// side of the connection.
	conn = openStream(t, addr)
	start := time.Now()
	require.True(t, holding(t, big) && streaming(), "the stream has the file open")
	for holding(t, big) || streaming() {
		require.Less(t, time.Since(start), window+5*time.Second, "the server still streams to a client that stopped reading")
		time.Sleep(20 * time.Millisecond)
	}
	stalled := time.Since(start)
	assert.GreaterOrEqual(t, stalled, window/2, "the server gave up before its write deadline: the client was not the cause")
	// The client's own connection is the one descriptor above the
	// baseline: the server closed its side.
	settled("stalled client", 5*time.Second, 1)
	conn.Close()
	t.Logf("in-process, 64 MiB streamed read: released %s after the client closed; %s after the client stopped reading (write window %s)",
		closed.Round(time.Millisecond), stalled.Round(time.Millisecond), window)
}

// TestStreamingClientsReleaseResourcesChild is the closed-connection case
// against a server process, measured from its /metrics (process_open_fds,
// go_goroutines). With TOOLFS_LONG=1 it also stalls a stream and waits for
// the binary's 30 s write window.
func TestStreamingClientsReleaseResourcesChild(t *testing.T) {
	root := t.TempDir()
	bigFile(t, root, 64<<20)
	srv := startChild(t, root, "--read-limit", "10000000", "--read-max-bytes", "1000000000")
	addr := strings.TrimPrefix(srv.base, "http://")
	// One keep-alive connection carries every /metrics call, so it counts
	// the same in every sample.
	mc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer mc.CloseIdleConnections()
	sample := func() (fds, goroutines float64) {
		m := srv.metrics(mc, "process_open_fds", "go_goroutines")
		return m[0], m[1]
	}
	baseFds, baseG := sample()
	require.Positive(t, baseFds)
	back := func(what string, limit time.Duration) time.Duration {
		t.Helper()
		var fds, g float64
		took, ok := waitFor(limit, func() bool { fds, g = sample(); return fds <= baseFds && g <= baseG })
		assert.True(t, ok, "%s: after %s descriptors %v (baseline %v), goroutines %v (baseline %v)", what, limit, fds, baseFds, g, baseG)
		return took
	}

	conn := openStream(t, addr)
	fds, _ := sample()
	assert.Greater(t, fds, baseFds, "the stream holds the file and its connection")
	conn.Close()
	t.Logf("server process: released %s after the client closed", back("closed client", 5*time.Second).Round(time.Millisecond))

	if !long {
		return
	}
	conn = openStream(t, addr)
	took := back("stalled client", 45*time.Second)
	assert.Greater(t, took, 25*time.Second, "released before the 30 s write window: the client was not the cause")
	t.Logf("server process: released %s after the client stopped reading (30 s write window)", took.Round(time.Millisecond))
	conn.Close()
}
