package handlers_test

import (
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// TestMalformedContentTypeRefused: a Content-Type that does not parse is
// refused before anything reads the body as JSON, and the strict checks run
// on every body that is decoded at all (issue 12, item 1). Each hostile body
// under each content type: 400, and nothing is written.
func TestMalformedContentTypeRefused(t *testing.T) {
	h := start(t, options{})
	bodies := map[string]string{
		"invalid UTF-8":   `{"file_path":"u.txt","content":"a` + "\xc3\x28" + `b"}`,
		"lone surrogate":  `{"file_path":"u.txt","content":"a\ud800b"}`,
		"duplicate keys":  `{"file_path":"u.txt","content":"a","content":"b"}`,
		"trailing data":   `{"file_path":"u.txt","content":"a"} {"x":1}`,
		"folded dup keys": `{"file_path":"u.txt","content":"a","CONTENT":"b"}`,
	}
	for _, ct := range []string{"application/json; charset", `application/json; x="`, "application/json;charset=a;charset=b"} {
		for name, body := range bodies {
			r := h.do(http.MethodPost, "/tools/write", body, "Content-Type", ct, "X-Session-ID", "s")
			assert.Equal(t, 400, r.Status, "%s / %s: %s", ct, name, r.Raw)
			assert.Equal(t, "INVALID_ARGUMENT", r.Code, ct)
			assert.Equal(t, `Error: malformed Content-Type "`+ct+`": it must parse as a media type (RFC 9110 §8.3); send Content-Type: application/json`, r.Output)
		}
		// A well-formed body is refused just the same: the type is unknown.
		r := h.do(http.MethodPost, "/tools/write", `{"file_path":"u.txt","content":"ok"}`, "Content-Type", ct, "X-Session-ID", "s")
		assert.Equal(t, 400, r.Status, ct)
	}
	// Under a content type that parses, each defect has its own message.
	for name, want := range map[string]string{
		"invalid UTF-8":   "Error: request body is not valid UTF-8",
		"lone surrogate":  "Error: request body has an unpaired UTF-16 surrogate escape",
		"duplicate keys":  `Error: request body has a duplicate key "content"`,
		"trailing data":   "Error: request body is not valid JSON",
		"folded dup keys": `Error: request body has a duplicate key "CONTENT"`,
	} {
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
			r := h.do(http.MethodPost, "/tools/write", bodies[name], "Content-Type", ct, "X-Session-ID", "s")
			assert.Equal(t, 400, r.Status, name)
			assert.Equal(t, want, r.Output, "%s under %s", name, ct)
		}
	}
	_, err := os.Stat(h.path("u.txt"))
	assert.True(t, os.IsNotExist(err), "nothing was written")
}

// TestNullOptionalArguments: an optional argument sent as JSON null counts
// as absent (strict function-calling modes send null for every unset one);
// a required one sent as null is missing.
func TestNullOptionalArguments(t *testing.T) {
	h := start(t, options{})
	h.file("a.txt", "one\ntwo\nthree\n")
	r := h.do(http.MethodPost, "/tools/read", `{"file_path":"a.txt","offset":null,"limit":null}`, "X-Session-ID", "s")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Contains(t, r.Output, "1: one\n2: two\n3: three\n\n(End of file - total 3 lines)")
	r = h.do(http.MethodPost, "/tools/edit", `{"file_path":"a.txt","old_string":"two","new_string":"2","replace_all":null}`, "X-Session-ID", "s")
	require.Equal(t, 200, r.Status, r.Raw)
	assert.Equal(t, "The file "+h.path("a.txt")+" has been updated successfully.", r.Output)
	r = h.do(http.MethodPost, "/tools/read", `{"file_path":null}`, "X-Session-ID", "s")
	assert.Equal(t, "Error: file_path must be a non-empty string", r.Output)
	r = h.do(http.MethodPost, "/tools/write", `{"file_path":"a.txt","content":null}`, "X-Session-ID", "s")
	assert.Equal(t, "Error: content must be a string", r.Output)
	if h.srv.Searcher.Available() {
		r = h.do(http.MethodPost, "/tools/grep", `{"pattern":"thr","path":null,"include":null}`)
		require.Equal(t, 200, r.Status, r.Raw)
		assert.Equal(t, "Found 1 match\n\na.txt\nLine 3: three", r.Output)
	}
}

var statCalls = regexp.MustCompile(`(?m)^toolfs_fs_stat_calls_total (\d+)$`)

// TestStatCallsCounted: toolfs_fs_stat_calls_total counts the provider's
// real Stat calls: exactly one per read, found or not, plus one for
// X-Session-Cwd; none per write or edit (the provider checks under its
// lock).
func TestStatCallsCounted(t *testing.T) {
	h := start(t, options{})
	h.file("dir/a.txt", "a\n")
	stats := func() int {
		m := statCalls.FindStringSubmatch(h.do(http.MethodGet, "/metrics", "").Raw)
		require.NotNil(t, m)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n
	}
	for _, step := range []struct {
		name  string
		call  func() reply
		stats int
	}{
		{"read", func() reply { return h.tool("read", "s", obj{"file_path": "dir/a.txt"}) }, 1},
		{"read missing", func() reply { return h.tool("read", "s", obj{"file_path": "nope.txt"}) }, 1},
		{"read with cwd", func() reply { return h.tool("read", "s", obj{"file_path": "a.txt"}, "X-Session-Cwd", "dir") }, 2},
		{"streamed read", func() reply { return h.tool("read", "s", obj{"file_path": "dir/a.txt"}, "Accept", "text/plain") }, 1},
		{"write", func() reply { return h.tool("write", "s", obj{"file_path": "dir/a.txt", "content": "b\n"}) }, 0},
		{"write new", func() reply { return h.tool("write", "s", obj{"file_path": "dir/new.txt", "content": "n\n"}) }, 0},
		{"edit", func() reply {
			return h.tool("edit", "s", obj{"file_path": "dir/a.txt", "old_string": "b", "new_string": "c"})
		}, 0},
		{"write with cwd", func() reply {
			return h.tool("write", "s", obj{"file_path": "a.txt", "content": "d\n"}, "X-Session-Cwd", "dir")
		}, 1},
		{"refused edit", func() reply {
			return h.tool("edit", "t", obj{"file_path": "dir/a.txt", "old_string": "d", "new_string": "e"})
		}, 0},
	} {
		before := stats()
		r := step.call()
		assert.Less(t, r.Status, 500, step.name)
		assert.Equal(t, step.stats, stats()-before, step.name)
	}
}

// TestRefusedCallsCountAndRepeatedSessionHeader: a call the REST layer
// refuses before the executor runs (a body over the cap) still counts under
// its tool and transport; a session header sent twice with two values is
// malformed.
func TestRefusedCallsCountAndRepeatedSessionHeader(t *testing.T) {
	h := start(t, options{maxBody: 64})
	r := h.do(http.MethodPost, "/tools/write", `{"file_path":"a.txt","content":"`+strings.Repeat("x", 100)+`"}`, "X-Session-ID", "s")
	assert.Equal(t, 413, r.Status)
	assert.Contains(t, h.do(http.MethodGet, "/metrics", "").Raw, `toolfs_tool_calls_total{code="BODY_TOO_LARGE",tool="write",transport="rest"} 1`)

	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/tools/read", strings.NewReader(`{"file_path":"a.txt"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header["X-Session-Id"] = []string{"one", "two"}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode)
}

// TestArgumentOrderAndKeys pins the rules of docs/api.md, "Request bodies":
// types before values, each in parameter order; keys matched exactly,
// unknown keys ignored; blank session headers count as absent; CORS allows
// the --session-headers aliases.
func TestArgumentOrderAndKeys(t *testing.T) {
	h := start(t, options{origins: []string{"http://app.example"}, sessions: tools.Sessions{Aliases: []string{"X-Chat-Id"}}})
	h.file("a.txt", "a\n")
	for body, want := range map[string]string{
		`{"file_path":"","offset":"x"}`:       "Error: offset must be a positive integer",
		`{"file_path":"","offset":1.5}`:       "Error: file_path must be a non-empty string",
		`{"file_path":7,"limit":0}`:           "Error: file_path must be a non-empty string",
		`{"file_path":"a.txt","offset":1.5}`:  "Error: offset must be a positive integer",
		`{"FILE_PATH":"a.txt"}`:               "Error: file_path must be a non-empty string",
		`{"file_path":"a.txt","limit":99999}`: "Error: limit must be less than or equal to 2000",
	} {
		r := h.do(http.MethodPost, "/tools/read", body)
		assert.Equal(t, 400, r.Status, body)
		assert.Equal(t, want, r.Output, body)
	}
	r := h.do(http.MethodPost, "/tools/read", `{"file_path":"a.txt","extra":{"x":[1]},"offset":1}`)
	assert.Equal(t, 200, r.Status, r.Raw)
	r = h.do(http.MethodPost, "/tools/edit", `{"file_path":"a.txt","old_string":"","new_string":"a","replace_all":"no"}`, "X-Session-ID", "s")
	assert.Equal(t, "Error: replace_all must be a boolean", r.Output)

	// A blank value is trimmed by the HTTP server, so it is absent too.
	r = h.do(http.MethodPost, "/tools/read", `{"file_path":"a.txt"}`, "X-Session-ID", "   ", "X-Session-Cwd", "  ")
	assert.Equal(t, 200, r.Status, r.Raw)

	req, err := http.NewRequest(http.MethodOptions, h.srv.URL+"/tools/read", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type, x-chat-id")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-chat-id")
}
