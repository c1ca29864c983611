package handlers_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// transferBytes is the size of a transfer benchmark's file:
// $TOOLFS_TRANSFER_BYTES, default 1 GiB (docs/files.md, "Measured").
func transferBytes() int64 {
	if n, err := strconv.ParseInt(os.Getenv("TOOLFS_TRANSFER_BYTES"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 1 << 30
}

// blockReader gives n bytes of one repeated random 1 MiB block, costing no
// memory and little CPU.
type blockReader struct {
	block []byte
	left  int64
}

func newBlockReader(n int64) *blockReader {
	b := make([]byte, 1<<20)
	rand.Read(b)
	return &blockReader{block: b, left: n}
}

func (r *blockReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.block[int(r.left)%len(r.block):])
	n = int(min(int64(n), r.left))
	r.left -= int64(n)
	return n, nil
}

// rssKiB reads a field (VmRSS, VmHWM) of /proc/self/status.
func rssKiB(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// resetPeak makes VmHWM start again from the current RSS (Linux 4.0+).
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func timed(b *testing.B, f func() error) time.Duration {
	b.Helper()
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkTransferDownload: GET /files/<path> of a $TOOLFS_TRANSFER_BYTES
// file against http.FileServer over the same file, in the same run, each
// read by one client into io.Discard; the ratio and the growth of peak RSS
// during toolfs's transfer are reported (goal: within 1.2x, memory flat).
func BenchmarkTransferDownload(b *testing.B) {
	size := transferBytes()
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.bin"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(f, newBlockReader(size)); err != nil {
		b.Fatal(err)
	}
	f.Close()
	srv := servertest.Start(b, server.Config{Root: dir, Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 10, MaxPathsPerSession: 10}, MaxBodyBytes: 1 << 20, StreamWriteWindow: 30 * time.Second})
	fsrv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer fsrv.Close()
	get := func(url string) error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 256<<10))
		if err == nil && n != size {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	// Warm the page cache, so both read it from memory.
	get(fsrv.URL + "/big.bin")
	var ours, theirs time.Duration
	var growth int64
	b.ResetTimer()
	for range b.N {
		theirs += timed(b, func() error { return get(fsrv.URL + "/big.bin") })
		before := rssKiB("VmRSS")
		resetPeak()
		ours += timed(b, func() error { return get(srv.URL + "/files/big.bin") })
		growth = max(growth, rssKiB("VmHWM")-before)
	}
	mbs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbs(ours), "toolfs-MiB/s")
	b.ReportMetric(mbs(theirs), "fileserver-MiB/s")
	b.ReportMetric(ours.Seconds()/theirs.Seconds(), "time-ratio")
	b.ReportMetric(float64(growth)/1024, "peak-RSS-growth-MiB")
}

// BenchmarkTransferUpload: PUT /files/<path> of $TOOLFS_TRANSFER_BYTES
// against `cat > file` plus an fsync of the file, fed the same bytes
// through a pipe, in the same run; the ratio and the growth of peak RSS
// during the upload are reported (goal: within 1.5x, under 16 MiB).
func BenchmarkTransferUpload(b *testing.B) {
	size := transferBytes()
	dir := b.TempDir()
	srv := servertest.Start(b, server.Config{Root: dir, Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 10, MaxPathsPerSession: 10},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 30 * time.Second, Files: tools.FilesConfig{MaxUploadBytes: size}})
	var ours, theirs time.Duration
	var growth int64
	b.ResetTimer()
	for i := range b.N {
		cat := filepath.Join(dir, "cat-"+strconv.Itoa(i)+".bin")
		theirs += timed(b, func() error {
			cmd := exec.Command("sh", "-c", `cat > "$1"`, "sh", cat)
			cmd.Stdin = newBlockReader(size)
			if err := cmd.Run(); err != nil {
				return err
			}
			f, err := os.OpenFile(cat, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		})
		os.Remove(cat)
		before := rssKiB("VmRSS")
		resetPeak()
		ours += timed(b, func() error {
			req, err := http.NewRequest(http.MethodPut, srv.URL+"/files/up-"+strconv.Itoa(i)+".bin", newBlockReader(size))
			if err != nil {
				return err
			}
			req.ContentLength = size
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusCreated {
				return &httpError{resp.StatusCode, body}
			}
			return nil
		})
		growth = max(growth, rssKiB("VmHWM")-before)
		os.Remove(filepath.Join(dir, "up-"+strconv.Itoa(i)+".bin"))
	}
	mbs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbs(ours), "toolfs-MiB/s")
	b.ReportMetric(mbs(theirs), "cat-fsync-MiB/s")
	b.ReportMetric(ours.Seconds()/theirs.Seconds(), "time-ratio")
	b.ReportMetric(float64(growth)/1024, "peak-RSS-growth-MiB")
}

type httpError struct {
	status int
	body   []byte
}

func (e *httpError) Error() string {
	return strconv.Itoa(e.status) + ": " + string(bytes.TrimSpace(e.body))
}
