package replicas

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUploadsBehindNginx: deploy/nginx/toolfs-api.conf passes uploads as
// the server takes them (docs/files.md, "Slow uploads"): larger than the
// 32 MiB of the other routes, streamed to the replica as they arrive
// (proxy_request_buffering off), so a steady trickle over several of the
// server's windows is stored whole, and a stalled body is cut by the
// server within its --upload-rate-window (408 BODY_TOO_SLOW, passed on),
// not held by nginx until its own client_body_timeout.
func TestUploadsBehindNginx(t *testing.T) {
	nginx := nginxBin(t)
	root := t.TempDir()
	const window = time.Second
	base, _, _ := startDeployment(t, nginx, root, "memory", "--upload-rate-window", window.String(), "--upload-min-rate", "4096")
	client := &http.Client{Transport: &http.Transport{}}
	put := func(name string, body io.Reader, length int64) (int, string) {
		req, err := http.NewRequest(http.MethodPut, base+"/files/"+name, body)
		require.NoError(t, err)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	stored := func(name string, want []byte) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "%s: stored %d bytes, sent %d", name, len(got), len(want))
	}

	t.Run("larger than the other routes' 32 MiB", func(t *testing.T) {
		big := bytes.Repeat([]byte("toolfs-api\n"), 40<<20/11)
		status, body := put("big.bin", bytes.NewReader(big), int64(len(big)))
		require.Equal(t, http.StatusCreated, status, body)
		stored("big.bin", big)
	})

	t.Run("a steady trickle over four windows", func(t *testing.T) {
		const chunk, chunks = 2048, 40 // 20 KiB/s for 4 s
		want := bytes.Repeat([]byte("0123456789abcdef"), chunk*chunks/16)
		pr, pw := io.Pipe()
		go func() {
			for i := range chunks {
				time.Sleep(100 * time.Millisecond)
				if _, err := pw.Write(want[i*chunk : (i+1)*chunk]); err != nil {
					return
				}
			}
			pw.Close()
		}()
		status, body := put("trickle.bin", pr, int64(len(want)))
		require.Equal(t, http.StatusCreated, status, body)
		stored("trickle.bin", want)
	})

	t.Run("a stalled body is cut by the server", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		fmt.Fprintf(conn, "PUT /files/stalled.bin HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", conn.RemoteAddr(), token, 1<<20)
		_, err = conn.Write(make([]byte, 64<<10))
		require.NoError(t, err)
		stalled := time.Now()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(15*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "an answer within 15 s (nginx alone would wait 60 s)")
		took := time.Since(stalled)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "after %v: %s", took, b)
		var p struct{ Code string }
		require.NoError(t, json.Unmarshal(b, &p), "the server's problem, not nginx's page: %s", b)
		assert.Equal(t, "BODY_TOO_SLOW", p.Code)
		assert.Less(t, took, window+3*time.Second, "cut within about the server's window")
		_, err = os.Stat(filepath.Join(root, "stalled.bin"))
		assert.True(t, os.IsNotExist(err), "nothing stored")
	})
}
