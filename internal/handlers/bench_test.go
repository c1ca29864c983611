package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/handlers"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// The executor's read, write and edit paths, served through the whole
// handler stack (middleware, validator, strict handler, executor, provider)
// by calling ServeHTTP directly, so -benchmem counts the server's
// allocations only. Baselines in this file: http.FileServer serving the same
// file (read), and a durable replacement of the same bytes written by hand
// (write and edit).
//
//	go test -run '^$' -bench . -benchmem ./internal/handlers

// benchSource is a 2,000-line, ~60 KiB Go-like file: every line unique.
func benchSource() string {
	var b strings.Builder
	b.WriteString("package fixture\n")
	for i := 2; i <= 2000; i++ {
		switch i % 8 {
		case 0:
			fmt.Fprintf(&b, "func step%04d(a, b int) int {\n", i)
		case 7:
			fmt.Fprintf(&b, "} // end of step %04d ....\n", i)
		default:
			fmt.Fprintf(&b, "\tv%04d := compute(a, b) * %04d\n", i, i%97)
		}
	}
	return b.String()
}

// benchServer is the handler over a temp root holding src.go, with the
// read caches off.
func benchServer(b *testing.B, policyOn bool) (http.Handler, string) {
	return benchServerCache(b, policyOn, tools.CacheConfig{})
}

// benchServerCache is benchServer with the read caches of cache.
func benchServerCache(b *testing.B, policyOn bool, cache tools.CacheConfig) (http.Handler, string) {
	b.Helper()
	root, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(filepath.Join(root, "src.go"), []byte(benchSource()), 0o644))
	srv, err := server.New(server.Config{Root: root, Policy: policy.Settings{Enabled: policyOn}, Cache: tools.CacheConfig{Bytes: cache.Bytes, RacyWindow: cache.RacyWindow}, MaxBodyBytes: 32 << 20, StreamWriteWindow: 10 * time.Second}, nil)
	require.NoError(b, err)
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.Handler, root
}

// serve runs one request through h and fails unless it answers 200 with at
// least min bytes.
func serve(b *testing.B, h http.Handler, method, target, body string, min int, headers ...string) {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	w := &discard{header: http.Header{}}
	h.ServeHTTP(w, req)
	if w.status != http.StatusOK || w.n < min {
		b.Fatalf("%s %s: status %d, %d bytes: %.300s", method, target, w.status, w.n, w.head)
	}
}

// discard is a ResponseWriter that keeps only the status, the size and the
// first bytes of the body, so the benchmarks count the server's work and
// allocations, not a recorder's buffer.
type discard struct {
	header http.Header
	status int
	n      int
	head   []byte
}

func (d *discard) Header() http.Header { return d.header }

func (d *discard) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}

func (d *discard) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	if len(d.head) < 300 {
		d.head = append(d.head, p[:min(len(p), 300)]...)
	}
	d.n += len(p)
	return len(p), nil
}

func (d *discard) Flush() {}

// BenchmarkReadFileServer is the read baseline: http.FileServer serving the
// same file.
func BenchmarkReadFileServer(b *testing.B) {
	_, root := benchServer(b, true)
	h := http.FileServer(http.Dir(root))
	b.ReportAllocs()
	handlers.ReportCPU(b)
	for b.Loop() {
		serve(b, h, http.MethodGet, "/src.go", "", 60000)
	}
}

func BenchmarkRead(b *testing.B) {
	h, _ := benchServer(b, true)
	b.ReportAllocs()
	handlers.ReportCPU(b)
	for b.Loop() {
		serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"src.go"}`, 51200, "X-Session-ID", "bench")
	}
}

func BenchmarkReadStreamed(b *testing.B) {
	h, _ := benchServer(b, true)
	b.ReportAllocs()
	handlers.ReportCPU(b)
	for b.Loop() {
		serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"src.go"}`, 51200, "X-Session-ID", "bench", "Accept", "text/plain")
	}
}

// BenchmarkReadCached and BenchmarkReadStreamedCached read src.go with the
// read caches on and no racy window, so every read after the first is a
// hit (docs/performance.md, "Caches").
func BenchmarkReadCached(b *testing.B) {
	h, _ := benchServerCache(b, true, tools.CacheConfig{Bytes: 64 << 20})
	b.ReportAllocs()
	handlers.ReportCPU(b)
	for b.Loop() {
		serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"src.go"}`, 51200, "X-Session-ID", "bench")
	}
}

func BenchmarkReadStreamedCached(b *testing.B) {
	h, _ := benchServerCache(b, true, tools.CacheConfig{Bytes: 64 << 20})
	b.ReportAllocs()
	handlers.ReportCPU(b)
	for b.Loop() {
		serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"src.go"}`, 51200, "X-Session-ID", "bench", "Accept", "text/plain")
	}
}

// BenchmarkReplaceFloor is the write and edit baseline: the same bytes
// replaced durably by hand (temp file, write, fsync, rename, folder fsync).
func BenchmarkReplaceFloor(b *testing.B) {
	dir := b.TempDir()
	data := []byte(benchSource())
	path := filepath.Join(dir, "src.go")
	b.ReportAllocs()
	handlers.ReportCPU(b)
	for b.Loop() {
		f, err := os.CreateTemp(dir, ".floor-*.tmp")
		require.NoError(b, err)
		_, err = f.Write(data)
		require.NoError(b, err)
		require.NoError(b, f.Sync())
		require.NoError(b, f.Close())
		require.NoError(b, os.Rename(f.Name(), path))
		d, err := os.Open(dir)
		require.NoError(b, err)
		require.NoError(b, d.Sync())
		d.Close()
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("policy=%v", on), func(b *testing.B) {
			h, _ := benchServer(b, on)
			src := benchSource()
			bodies := [2]string{}
			for i, c := range []string{strings.Replace(src, "v0010 :=", "w0010 :=", 1), src} {
				body, err := json.Marshal(obj{"file_path": "src.go", "content": c})
				require.NoError(b, err)
				bodies[i] = string(body)
			}
			serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"src.go"}`, 0, "X-Session-ID", "bench")
			b.ReportAllocs()
			handlers.ReportCPU(b)
			i := 0
			for b.Loop() {
				serve(b, h, http.MethodPost, "/tools/write", bodies[i%2], 0, "X-Session-ID", "bench")
				i++
			}
		})
	}
}

func BenchmarkEdit(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("policy=%v", on), func(b *testing.B) {
			h, _ := benchServer(b, on)
			serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"src.go"}`, 0, "X-Session-ID", "bench")
			bodies := [2]string{
				`{"file_path":"src.go","old_string":"\tv0020 :=","new_string":"\tx0020 :="}`,
				`{"file_path":"src.go","old_string":"\tx0020 :=","new_string":"\tv0020 :="}`,
			}
			b.ReportAllocs()
			handlers.ReportCPU(b)
			i := 0
			for b.Loop() {
				serve(b, h, http.MethodPost, "/tools/edit", bodies[i%2], 0, "X-Session-ID", "bench")
				i++
			}
		})
	}
}

// BenchmarkWriteFenced is BenchmarkWrite (policy on) under the
// workspace-write fence, in a session cwd: each write also asks the
// provider whether its target lies within the cwd (docs/sandbox.md).
func BenchmarkWriteFenced(b *testing.B) {
	root, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	src := benchSource()
	require.NoError(b, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(root, "sub", "src.go"), []byte(src), 0o644))
	srv, err := server.New(server.Config{Root: root, Policy: policy.Settings{Enabled: true}, Tools: tools.Settings{SandboxMode: "workspace-write"}, MaxBodyBytes: 32 << 20, StreamWriteWindow: 10 * time.Second}, nil)
	require.NoError(b, err)
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	h := srv.Handler
	bodies := [2]string{}
	for i, c := range []string{strings.Replace(src, "v0010 :=", "w0010 :=", 1), src} {
		body, err := json.Marshal(obj{"file_path": "src.go", "content": c})
		require.NoError(b, err)
		bodies[i] = string(body)
	}
	serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"src.go"}`, 0, "X-Session-ID", "bench", "X-Session-Cwd", "sub")
	b.ReportAllocs()
	handlers.ReportCPU(b)
	i := 0
	for b.Loop() {
		serve(b, h, http.MethodPost, "/tools/write", bodies[i%2], 0, "X-Session-ID", "bench", "X-Session-Cwd", "sub")
		i++
	}
}

// BenchmarkWriteBody is the request handling of a 60 KiB write body without
// the disk: every check and decode of the body runs, then the call is
// refused for want of a session (checked after the arguments). It isolates
// what one decode instead of two saves (docs/performance.md).
func BenchmarkWriteBody(b *testing.B) {
	h, _ := benchServer(b, true)
	body, err := json.Marshal(obj{"file_path": "src.go", "content": benchSource()})
	require.NoError(b, err)
	b.ReportAllocs()
	handlers.ReportCPU(b)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/tools/write", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		w := &discard{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.status != http.StatusBadRequest {
			b.Fatalf("status %d: %s", w.status, w.head)
		}
	}
}

// BenchmarkEditDiagnostics is the latency --diagnostics adds to an edit
// (docs/diagnostics.md, "Cost"): the same edit of a 60 KiB valid Go file,
// with no checker ("none") and with gofmt ("gofmt"), in one run. After the
// first edit the version before is in the checker cache, so each edit runs
// gofmt once, confined, on the new version: the usual case of an edit
// after an edit. The checker starts from this test binary's re-exec, as a
// server starts it from its own.
//
//	go test -run '^$' -bench EditDiagnostics -benchtime 200x -count 3 ./internal/handlers
func BenchmarkEditDiagnostics(b *testing.B) {
	if _, err := exec.LookPath("gofmt"); err != nil {
		b.Skip("gofmt is not installed")
	}
	var src strings.Builder
	src.WriteString("package big\n\n")
	for i := 0; src.Len() < 60<<10; i++ {
		fmt.Fprintf(&src, "// F%d returns its argument plus %d.\nfunc F%d(x int) int {\n\tif x > %d {\n\t\treturn x - %d\n\t}\n\treturn x + %d\n}\n\n", i, i, i, i, i, i)
	}
	cfg := filepath.Join(b.TempDir(), "diagnostics.json")
	require.NoError(b, os.WriteFile(cfg, []byte(`{"checkers": [{"name": "gofmt", "glob": "*.go", "command": ["gofmt", "-e", "{file}"]}]}`), 0o644))
	for _, name := range []string{"none", "gofmt"} {
		b.Run(name, func(b *testing.B) {
			root, err := filepath.EvalSymlinks(b.TempDir())
			require.NoError(b, err)
			require.NoError(b, os.WriteFile(filepath.Join(root, "big.go"), []byte(src.String()), 0o644))
			c := server.Config{Root: root, Policy: policy.Settings{Enabled: true}}
			if name == "gofmt" {
				c.Diagnostics.File = cfg
			}
			srv, err := server.New(c, nil)
			require.NoError(b, err)
			b.Cleanup(func() { srv.Shutdown(context.Background()) })
			h := srv.Handler
			serve(b, h, http.MethodPost, "/tools/read", `{"file_path":"big.go"}`, 0, "X-Session-ID", "bench")
			bodies := [2]string{
				`{"file_path":"big.go","old_string":"return x + 77\n","new_string":"return x + 7700\n"}`,
				`{"file_path":"big.go","old_string":"return x + 7700\n","new_string":"return x + 77\n"}`,
			}
			serve(b, h, http.MethodPost, "/tools/edit", bodies[0], 0, "X-Session-ID", "bench")
			serve(b, h, http.MethodPost, "/tools/edit", bodies[1], 0, "X-Session-ID", "bench")
			want := `"diagnostics":{"checker":"gofmt","fresh":true,"introduced":[],"resolved":0}`
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/tools/edit", strings.NewReader(bodies[0]))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Session-ID", "bench")
			h.ServeHTTP(w, req)
			if got := strings.Contains(w.Body.String(), want); got != (name == "gofmt") {
				b.Fatalf("%s: the answer %s", name, w.Body.String())
			}
			b.ReportAllocs()
			i := 1
			for b.Loop() {
				serve(b, h, http.MethodPost, "/tools/edit", bodies[i%2], 0, "X-Session-ID", "bench")
				i++
			}
		})
	}
}
