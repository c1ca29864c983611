package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

var fuzzTools = []string{"read", "write", "edit", "glob", "grep"}

// bodyWorld is a hostile world with two real handlers over its root: the
// policy on and off. Small caps keep each call cheap.
type bodyWorld struct {
	*hostileWorld
	on, off http.Handler
}

const fuzzMaxBody = 1 << 20

func newBodyWorld(t testing.TB) *bodyWorld {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	w := &hostileWorld{base: base, root: filepath.Join(base, "w", "root"), outside: filepath.Join(base, "w", "outside")}
	w.canary = filepath.Join(w.outside, "canary.txt")
	require.NoError(t, os.MkdirAll(filepath.Join(w.root, "dir"), 0o755))
	require.NoError(t, os.MkdirAll(w.outside, 0o755))
	require.NoError(t, os.WriteFile(w.canary, []byte(canarySecret), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.root, "a.txt"), []byte("alpha\nbeta\n"), 0o644))
	require.NoError(t, os.Symlink(w.canary, filepath.Join(w.root, "out")))
	w.canaryInfo, err = os.Stat(w.canary)
	require.NoError(t, err)

	bw := &bodyWorld{hostileWorld: w}
	for _, on := range []bool{true, false} {
		srv, err := server.New(server.Config{
			Root: w.root, Policy: policy.Settings{Enabled: on, TTL: time.Hour, MaxSessions: 8, MaxPathsPerSession: 64},
			Tools:        tools.Settings{ReadLimit: 50, ReadMaxLineLength: 200, ReadMaxBytes: 4096},
			Search:       search.Settings{Timeout: 5 * time.Second, MaxConcurrent: 2},
			MaxBodyBytes: fuzzMaxBody,
		}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Shutdown(context.Background()) })
		if on {
			bw.on = srv.Handler
		} else {
			bw.off = srv.Handler
		}
	}
	return bw
}

// post sends body to /tools/<tool> through the handler in process. flags:
// bit 0 streams (Accept: text/plain), bit 1 sends a session, bit 2 a cwd,
// bit 3 picks the policy-off server.
func (bw *bodyWorld) post(tool string, body []byte, flags uint8) (rec *httptest.ResponseRecorder, aborted bool) {
	req := httptest.NewRequest(http.MethodPost, "/tools/"+tool, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if flags&1 != 0 {
		req.Header.Set("Accept", "text/plain")
	}
	if flags&2 != 0 {
		req.Header.Set("X-Session-ID", "fuzz")
	}
	if flags&4 != 0 {
		req.Header.Set("X-Session-Cwd", "dir")
	}
	h := bw.on
	if flags&8 != 0 {
		h = bw.off
	}
	rec = httptest.NewRecorder()
	defer func() {
		// A streamed read that fails after its first bytes aborts the
		// transfer on purpose; any other panic is a bug.
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler || rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
				panic(v)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(rec, req)
	return rec, false
}

// checkAnswer asserts the properties every answer has: no server error (a
// missing search path is SEARCH_FAILED by contract), a JSON body unless a
// streamed read succeeded, and a complete problem for every error.
func checkAnswer(t testing.TB, rec *httptest.ResponseRecorder, aborted bool) {
	t.Helper()
	body := rec.Body.Bytes()
	ct := rec.Header().Get("Content-Type")
	if rec.Code == 200 && strings.HasPrefix(ct, "text/plain") {
		if !aborted {
			assert.True(t, bytes.HasPrefix(body, []byte("<path>")), "streamed read: %q", body)
		}
		return
	}
	require.False(t, aborted, "only streamed reads abort")
	require.True(t, json.Valid(body), "not JSON (%d %s): %q", rec.Code, ct, body)
	if rec.Code < 400 {
		assert.Equal(t, "application/json", ct)
		var ok struct {
			Output   *string         `json:"output"`
			Metadata json.RawMessage `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal(body, &ok))
		assert.NotNil(t, ok.Output, "success has output: %s", body)
		return
	}
	assert.Equal(t, "application/problem+json", ct)
	var p struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
		Detail string `json:"detail"`
		Output string `json:"output"`
	}
	require.NoError(t, json.Unmarshal(body, &p))
	assert.Equal(t, rec.Code, p.Status)
	assert.NotEmpty(t, p.Code)
	assert.Equal(t, "Error: "+p.Detail, p.Output)
	if rec.Code >= 500 && !(p.Code == "SEARCH_FAILED" && strings.Contains(p.Detail, "search failed (exit 2)")) {
		t.Fatalf("server error %d %s: %s", rec.Code, p.Code, p.Detail)
	}
}

// assertOutsideUntouched is the cheap per-input form of assertUntouched:
// the canary and the folders around the root are as they were.
func (bw *bodyWorld) assertOutsideUntouched(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(bw.canary)
	require.NoError(t, err)
	require.Equal(t, canarySecret, string(b))
	info, err := os.Stat(bw.canary)
	require.NoError(t, err)
	require.Equal(t, bw.canaryInfo.ModTime(), info.ModTime())
	for dir, want := range map[string][]string{filepath.Dir(bw.root): {"outside", "root"}, bw.outside: {"canary.txt"}} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Equal(t, want, names, dir)
	}
}

func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// fuzzSeeds are valid bodies and the hostile shapes the fuzzer grows from.
func fuzzSeeds() []string {
	return []string{
		`{"file_path":"a.txt"}`,
		`{"file_path":"a.txt","offset":2,"limit":1}`,
		`{"file_path":"new.txt","content":"hello\n"}`,
		`{"file_path":"a.txt","old_string":"alpha","new_string":"ALPHA"}`,
		`{"file_path":"a.txt","old_string":"a","new_string":"b","replace_all":true}`,
		`{"pattern":"*.txt"}`,
		`{"pattern":"al+","path":".","include":"*.txt"}`,
		deepJSON(100000),
		`{"file_path":` + deepJSON(100000) + `}`,
		`{"file_path":1,"offset":"1","limit":[],"content":{},"old_string":null,"new_string":true,"replace_all":"yes"}`,
		`{"file_path":"a.txt","offset":1e400}`,
		`{"file_path":"a.txt","limit":-0}`,
		`{"file_path":"a.txt","offset":NaN}`,
		`{"file_path":"a.txt","offset":9007199254740993}`,
		"{\"file_path\":\"\xff\xfe\",\"content\":\"\xc3\x28\"}",
		`{"file_path":"\ud800","content":"\udc00\ud800"}`,
		`{"file_path":"a.txt","file_path":"../outside/canary.txt"}`,
		`{"file_path":"` + strings.Repeat("x", 70000) + `","content":"` + strings.Repeat("y", 200000) + `"}`,
		`{"file_path": "\u0000"}`,
		`{"file_path":"a.txt"} trailing garbage`,
		`{"file_path":"a.txt"}{"file_path":"../outside/canary.txt"}`,
		`{"file_path":"out","content":"pwned"}`,
		``,
		`null`,
		`"string"`,
		`{"pattern":"(","path":"../.."}`,
	}
}

// FuzzToolBodies posts fuzzed bodies to every tool endpoint of the real
// stack (real provider over a temporary root). Whatever the body: no panic,
// no server error, always a JSON answer (a problem with code and output for
// errors), and nothing outside the root changes.
//
//	go test -run '^$' -fuzz FuzzToolBodies -fuzztime 3m ./internal/handlers/
func FuzzToolBodies(f *testing.F) {
	for i, s := range fuzzSeeds() {
		f.Add(uint8(i%len(fuzzTools)), []byte(s), uint8(i))
	}
	bw := newBodyWorld(f)
	f.Fuzz(func(t *testing.T, tool uint8, body []byte, flags uint8) {
		rec, aborted := bw.post(fuzzTools[int(tool)%len(fuzzTools)], body, flags)
		checkAnswer(t, rec, aborted)
		bw.assertOutsideUntouched(t)
	})
}

// TestHostileBodies sends hostile bodies through a real loopback server:
// each gets a clear 4xx with a specific code and message.
func TestHostileBodies(t *testing.T) {
	const max = 256 << 10
	h := start(t, options{maxBody: max})
	h.file("a.txt", "alpha\nbeta\n")
	tooLarge := "Error: request body is larger than the 262144-byte limit"
	big := `{"file_path":"a.txt","content":"` + strings.Repeat("x", max) + `"}`

	// Over the cap: with a Content-Length, and chunked (none).
	for _, chunked := range []bool{false, true} {
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/tools/write", strings.NewReader(big))
		require.NoError(t, err)
		if chunked {
			req.Body = io.NopCloser(strings.NewReader(big)) // hides the length: Transfer-Encoding: chunked
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-ID", "s")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, 413, resp.StatusCode, "chunked=%v", chunked)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		assert.Contains(t, string(raw), `"code":"BODY_TOO_LARGE"`)
		assert.Contains(t, string(raw), `"output":"`+tooLarge+`"`)
	}
	_, err := os.Stat(h.path("x"))
	assert.True(t, os.IsNotExist(err))

	const (
		notJSON   = "Error: request body is not valid JSON"
		notObject = "Error: request body must be a JSON object"
		notUTF8   = "Error: request body is not valid UTF-8"
		surrogate = "Error: request body has an unpaired UTF-16 surrogate escape"
		filePath  = "Error: file_path must be a non-empty string"
		offset    = "Error: offset must be a positive integer"
		limit     = "Error: limit must be a positive integer"
	)
	cases := []struct {
		name, tool, body string
		status           int
		code, output     string
	}{
		{"deep array", "read", deepJSON(100000), 400, "INVALID_ARGUMENT", notJSON},
		{"deep value", "read", `{"file_path":` + deepJSON(5000) + `}`, 400, "INVALID_ARGUMENT", filePath},
		{"deeper than the parser allows", "write", `{"file_path":"a.txt","content":` + deepJSON(20000) + `}`, 400, "INVALID_ARGUMENT", notJSON},
		{"array body", "read", `[{"file_path":"a.txt"}]`, 400, "INVALID_ARGUMENT", notObject},
		{"null body", "edit", `null`, 400, "INVALID_ARGUMENT", notObject},
		{"string body", "write", `"a.txt"`, 400, "INVALID_ARGUMENT", notObject},
		{"empty body", "read", ``, 400, "INVALID_ARGUMENT", notObject},
		{"file_path number", "read", `{"file_path":1}`, 400, "INVALID_ARGUMENT", filePath},
		{"file_path array", "write", `{"file_path":["a.txt"],"content":"x"}`, 400, "INVALID_ARGUMENT", filePath},
		{"file_path object", "edit", `{"file_path":{"p":"a.txt"},"old_string":"a","new_string":"b"}`, 400, "INVALID_ARGUMENT", filePath},
		{"file_path null", "read", `{"file_path":null}`, 400, "INVALID_ARGUMENT", filePath},
		{"file_path bool", "read", `{"file_path":true}`, 400, "INVALID_ARGUMENT", filePath},
		{"offset string", "read", `{"file_path":"a.txt","offset":"1"}`, 400, "INVALID_ARGUMENT", offset},
		{"limit array", "read", `{"file_path":"a.txt","limit":[1]}`, 400, "INVALID_ARGUMENT", limit},
		{"content number", "write", `{"file_path":"a.txt","content":5}`, 400, "INVALID_ARGUMENT", "Error: content must be a string"},
		{"old_string null", "edit", `{"file_path":"a.txt","old_string":null,"new_string":"b"}`, 400, "INVALID_ARGUMENT", "Error: old_string must be a non-empty string"},
		{"new_string bool", "edit", `{"file_path":"a.txt","old_string":"a","new_string":true}`, 400, "INVALID_ARGUMENT", "Error: new_string must be a string"},
		{"replace_all string", "edit", `{"file_path":"a.txt","old_string":"a","new_string":"b","replace_all":"true"}`, 400, "INVALID_ARGUMENT", "Error: replace_all must be a boolean"},
		{"pattern number", "glob", `{"pattern":1}`, 400, "INVALID_ARGUMENT", "Error: pattern must be a non-empty string"},
		{"include array", "grep", `{"pattern":"a","include":["*.txt"]}`, 400, "INVALID_ARGUMENT", "Error: include must be a non-empty glob when given"},
		{"offset 1e400", "read", `{"file_path":"a.txt","offset":1e400}`, 400, "INVALID_ARGUMENT", offset},
		{"limit 1e308", "read", `{"file_path":"a.txt","limit":1e308}`, 400, "INVALID_ARGUMENT", limit},
		{"offset 2^53+1", "read", `{"file_path":"a.txt","offset":9007199254740993}`, 400, "INVALID_ARGUMENT", offset},
		{"offset -0", "read", `{"file_path":"a.txt","offset":-0}`, 400, "INVALID_ARGUMENT", offset},
		{"offset 1e-400", "read", `{"file_path":"a.txt","offset":1e-400}`, 400, "INVALID_ARGUMENT", offset},
		{"offset NaN", "read", `{"file_path":"a.txt","offset":NaN}`, 400, "INVALID_ARGUMENT", notJSON},
		{"limit Infinity", "read", `{"file_path":"a.txt","limit":Infinity}`, 400, "INVALID_ARGUMENT", notJSON},
		{"invalid UTF-8 in file_path", "read", "{\"file_path\":\"a\xff.txt\"}", 400, "INVALID_ARGUMENT", notUTF8},
		{"invalid UTF-8 in content", "write", "{\"file_path\":\"u.txt\",\"content\":\"\xc3\x28\"}", 400, "INVALID_ARGUMENT", notUTF8},
		{"overlong UTF-8 slash", "read", "{\"file_path\":\"..\xc0\xafetc\"}", 400, "INVALID_ARGUMENT", notUTF8},
		{"lone high surrogate", "write", `{"file_path":"u.txt","content":"\ud800"}`, 400, "INVALID_ARGUMENT", surrogate},
		{"lone low surrogate", "edit", `{"file_path":"a.txt","old_string":"alpha","new_string":"\udc00x"}`, 400, "INVALID_ARGUMENT", surrogate},
		{"reversed surrogates", "write", `{"file_path":"u.txt","content":"\udc00\ud800"}`, 400, "INVALID_ARGUMENT", surrogate},
		{"duplicated key", "read", `{"file_path":"a.txt","file_path":"../outside"}`, 400, "INVALID_ARGUMENT", `Error: request body has a duplicate key "file_path"`},
		{"duplicated key in other case", "read", `{"file_path":"a.txt","FILE_PATH":"../outside"}`, 400, "INVALID_ARGUMENT", `Error: request body has a duplicate key "FILE_PATH"`},
		{"duplicated key by long s", "edit", `{"file_path":"a.txt","old_string":"a","new_string":"b","new_\u017ftring":"c"}`, 400, "INVALID_ARGUMENT", "Error: request body has a duplicate key \"new_\u017ftring\""},
		{"escaped key duplicate", "read", `{"file_path":"a.txt","file\u005fpath":"../outside"}`, 400, "INVALID_ARGUMENT", `Error: request body has a duplicate key "file_path"`},
		{"same key nested is fine", "read", `{"file_path":"a.txt","x":{"file_path":1,"file_path":2}}`, 200, "", ""},
		{"trailing garbage", "read", `{"file_path":"a.txt"} garbage`, 400, "INVALID_ARGUMENT", notJSON},
		{"two objects", "write", `{"file_path":"a.txt","content":"x"}{"file_path":"b.txt","content":"y"}`, 400, "INVALID_ARGUMENT", notJSON},
		{"unterminated", "read", `{"file_path":"a.txt"`, 400, "INVALID_ARGUMENT", notJSON},
		{"NUL escape", "read", `{"file_path": "\u0000"}`, 400, "INVALID_ARGUMENT", "Error: file_path must not contain a NUL byte"},
		{"raw NUL byte", "read", "{\"file_path\": \"a\x00\"}", 400, "INVALID_ARGUMENT", notJSON},
		{"very long file_path", "read", `{"file_path":"` + strings.Repeat("x", 60000) + `"}`, 404, "FS_NOT_FOUND", `Error: cannot resolve "` + h.path(strings.Repeat("x", 60000)) + `": file name too long`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(http.MethodPost, "/tools/"+tc.tool, tc.body, "Content-Type", "application/json", "X-Session-ID", "s")
			assert.Equal(t, tc.status, r.Status, r.Raw)
			assert.Equal(t, tc.code, r.Code)
			if tc.output != "" {
				assert.Equal(t, tc.output, r.Output)
			}
		})
	}
	assert.Equal(t, "alpha\nbeta\n", h.contents("a.txt"))
	_, err = os.Stat(h.path("u.txt"))
	assert.True(t, os.IsNotExist(err), "no refused write created a file")
	_, err = os.Stat(h.path("b.txt"))
	assert.True(t, os.IsNotExist(err))
}
