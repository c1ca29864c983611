package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/handlers"
	"github.com/toolfs/toolfs-api/internal/server"
)

// The timing of these tests, in seconds rather than the binary's minutes:
// the server-wide read timeout, and an upload's pace (docs/files.md,
// "Slow uploads").
const (
	paceReadTimeout = time.Second
	paceWindow      = time.Second
	paceMinRate     = 4096
)

// servePaced serves a server with those timings through its own
// http.Server (Listen and Serve, as the binary does), on a new root.
func servePaced(t *testing.T) (base, root string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	srv, err := server.New(server.Config{
		Root: root, Addr: "127.0.0.1:0",
		ReadTimeout: paceReadTimeout, Upload: handlers.Pace{Window: paceWindow, MinRate: paceMinRate},
	}, nil)
	require.NoError(t, err)
	addr, err := srv.Listen()
	require.NoError(t, err)
	go srv.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return "http://" + addr.String(), root
}

// leftovers is every file under root but the private folder's own (its
// .gitignore, the lock files): what an upload may have left behind (a
// target, a temporary file).
func leftovers(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if !d.IsDir() && rel != ".toolfs-api/.gitignore" && !strings.HasPrefix(rel, ".toolfs-api/locks/") {
			out = append(out, rel)
		}
		return nil
	}))
	return out
}

// TestSteadyUploadOutlivesReadTimeout: an upload whose body keeps the
// pace is not cut for taking longer than the server's read timeout (issue
// 41, item 7: 16 KiB/s was cut at 2 minutes); it is stored whole, and the
// connection serves the next request.
func TestSteadyUploadOutlivesReadTimeout(t *testing.T) {
	base, root := servePaced(t)
	const chunk, chunks, every = 2048, 30, 100 * time.Millisecond // 20 KiB/s for 3 s
	want := bytes.Repeat([]byte("0123456789abcdef"), chunk*chunks/16)
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < chunks; i++ {
			time.Sleep(every)
			if _, err := pw.Write(want[i*chunk : (i+1)*chunk]); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPut, base+"/files/slow/steady.bin", pr)
	require.NoError(t, err)
	req.ContentLength = int64(len(want))
	client := &http.Client{Transport: &http.Transport{}}
	began := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(began)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "after %v: %s", took, body)
	assert.Greater(t, took, 2*paceReadTimeout, "the upload took longer than the read timeout")
	got, err := os.ReadFile(filepath.Join(root, "slow/steady.bin"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "stored %d bytes, sent %d", len(got), len(want))

	// The same connection serves the next request: nothing of the upload's
	// deadline is left on it.
	reused := false
	req, err = http.NewRequest(http.MethodGet, base+"/files/slow/steady.bin", nil)
	require.NoError(t, err)
	req = req.WithContext(withConnReuse(req.Context(), &reused))
	resp, err = client.Do(req)
	require.NoError(t, err)
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, len(want), len(got))
	assert.True(t, reused, "the download went over the upload's connection")

	// An empty body is no stall.
	req, err = http.NewRequest(http.MethodPut, base+"/files/slow/empty.bin", http.NoBody)
	require.NoError(t, err)
	resp, err = client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	info, err := os.Stat(filepath.Join(root, "slow/empty.bin"))
	require.NoError(t, err)
	assert.Zero(t, info.Size())
}

// TestStalledUploadIsCut: a body that stops (or never starts, or crawls
// under --upload-min-rate) is cut within about --upload-rate-window with
// 408 BODY_TOO_SLOW, and leaves nothing: no target, no temporary file.
func TestStalledUploadIsCut(t *testing.T) {
	const length = 64 << 10
	for _, tc := range []struct {
		name string
		// send writes some of the body and returns when the stall begins
		// (it may keep writing in the background, under the pace).
		send func(conn net.Conn)
	}{
		{"no byte of the body", func(net.Conn) {}},
		{"half the body, then nothing", func(conn net.Conn) {
			conn.Write(make([]byte, length/2))
		}},
		{"a crawl under the minimum rate", func(conn net.Conn) {
			go func() {
				for range 50 { // 1 KiB/s, a quarter of the minimum
					if _, err := conn.Write(make([]byte, 100)); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, root := servePaced(t)
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			fmt.Fprintf(conn, "PUT /files/up/stalled.bin HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", conn.RemoteAddr(), length)
			tc.send(conn)
			stalled := time.Now()
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err, "the server answers")
			took := time.Since(stalled)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
			_, err = br.ReadByte()
			var ne net.Error
			assert.False(t, err == nil || errors.As(err, &ne) && ne.Timeout(), "the server closed the connection: %v", err)
			require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "after %v: %s", took, body)
			var p struct{ Code, Detail string }
			require.NoError(t, json.Unmarshal(body, &p), "%s", body)
			assert.Equal(t, "BODY_TOO_SLOW", p.Code)
			assert.Equal(t, "cannot upload: the body arrived slower than 4096 bytes/s over 1s", p.Detail)
			assert.GreaterOrEqual(t, took, paceWindow-200*time.Millisecond, "not cut before the window ran out")
			assert.Less(t, took, paceWindow+2*time.Second, "cut within about the window")
			assert.Empty(t, leftovers(t, root), "nothing is left behind")
		})
	}
}

// TestSlowlorisOnOtherRoutesIsCut: every route but the upload keeps the
// server-wide read timeout, so a body sent a few bytes at a time is cut
// after it, and the call it carried never runs.
func TestSlowlorisOnOtherRoutesIsCut(t *testing.T) {
	base, root := servePaced(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	call := []byte(`{"file_path":"loris.txt","content":"` + strings.Repeat("x", 200) + `"}`)
	fmt.Fprintf(conn, "POST /tools/write HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", conn.RemoteAddr(), len(call))
	began := time.Now()
	go func() {
		for i := 0; i < len(call); i += 10 { // 100 bytes/s: 2.4 s for the whole call
			if _, err := conn.Write(call[i:min(i+10, len(call))]); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	answer, _ := io.ReadAll(conn) // until the server closes the connection
	took := time.Since(began)
	t.Logf("cut after %v: %q", took, answer)
	assert.Less(t, took, paceReadTimeout+time.Second, "cut after the read timeout: %q", answer)
	assert.Empty(t, leftovers(t, root), "the write never ran")
}

// withConnReuse reports into reused whether the request went over a
// connection an earlier request used.
func withConnReuse(ctx context.Context, reused *bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { *reused = i.Reused }})
}
