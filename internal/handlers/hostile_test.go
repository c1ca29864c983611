package handlers_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// canarySecret is the content of the file outside the root: no answer may
// ever show it, and nothing may change it.
const canarySecret = "outside-secret: the canary\n"

// hostileWorld is a workspace root with a sibling "outside" folder holding
// the canary, laid out as base/w/root and base/w/outside so that ".." chains
// land in folders the test watches.
type hostileWorld struct {
	base, root, outside, canary string
	canaryInfo                  fs.FileInfo
	watched                     map[string]string // path → what it was, for everything outside the root
}

func newHostileWorld(t *testing.T) *hostileWorld {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	w := &hostileWorld{base: base, root: filepath.Join(base, "w", "root"), outside: filepath.Join(base, "w", "outside")}
	require.NoError(t, os.MkdirAll(w.root, 0o755))
	require.NoError(t, os.MkdirAll(w.outside, 0o755))
	w.canary = filepath.Join(w.outside, "canary.txt")
	require.NoError(t, os.WriteFile(w.canary, []byte(canarySecret), 0o644))
	// An old mtime, so a rewrite within the same clock tick is still seen.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(w.canary, old, old))
	w.canaryInfo, err = os.Stat(w.canary)
	require.NoError(t, err)
	return w
}

// snapshot records every entry under base except the root: name, type,
// size and mtime.
func (w *hostileWorld) snapshot(t *testing.T) map[string]string {
	t.Helper()
	seen := map[string]string{}
	err := filepath.WalkDir(w.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == w.root {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mt := info.ModTime().UnixNano()
		if info.IsDir() {
			mt = 0 // a folder's mtime moves when an entry is made; the entries tell
		}
		seen[p] = info.Mode().String() + " " + strconv.FormatInt(info.Size(), 10) + " " + strconv.FormatInt(mt, 10)
		return nil
	})
	require.NoError(t, err)
	return seen
}

// assertUntouched checks the canary's bytes and mtime, and that nothing
// outside the root appeared, vanished or changed.
func (w *hostileWorld) assertUntouched(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(w.canary)
	require.NoError(t, err)
	assert.Equal(t, canarySecret, string(b), "canary content")
	info, err := os.Stat(w.canary)
	require.NoError(t, err)
	assert.Equal(t, w.canaryInfo.ModTime(), info.ModTime(), "canary mtime")
	assert.Equal(t, w.watched, w.snapshot(t), "entries outside the root")
}

// serveRoot starts a real server on a loopback port over an existing root.
func serveRoot(t *testing.T, root string, policyOn bool) *harness {
	t.Helper()
	srv := servertest.Start(t, server.Config{
		Root: root, Policy: policy.Settings{Enabled: policyOn, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 1000},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
	})
	return &harness{t: t, root: root, srv: srv}
}

// hostileCase is one hostile request and what it must get. A 2xx is only
// right when the input really names something inside the root.
type hostileCase struct {
	name   string
	tool   string
	body   obj
	cwd    string // X-Session-Cwd; "" = none
	status int
	code   string // "" on success
	output string // exact model text; "" = not pinned (success outputs are checked by content)
}

// hostileClient bounds every call: a FIFO or device that blocked the server
// would fail the test instead of hanging it.
var hostileClient = &http.Client{Timeout: 10 * time.Second}

func (h *harness) hostile(tc hostileCase) (reply, time.Duration) {
	h.t.Helper()
	b, err := json.Marshal(tc.body)
	require.NoError(h.t, err)
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/tools/"+tc.tool, strings.NewReader(string(b)))
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", "hostile")
	if tc.cwd != "" {
		req.Header.Set("X-Session-Cwd", tc.cwd)
	}
	start := time.Now()
	resp, err := hostileClient.Do(req)
	require.NoError(h.t, err, tc.name)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	took := time.Since(start)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	require.Contains(h.t, resp.Header.Get("Content-Type"), "json", tc.name)
	require.NoError(h.t, json.Unmarshal(raw, &r), tc.name)
	if r.Status >= 400 {
		require.Equal(h.t, "application/problem+json", resp.Header.Get("Content-Type"), tc.name)
		require.NotEmpty(h.t, r.Code, tc.name)
		require.Equal(h.t, r.Status, r.PStatus, tc.name)
		require.Equal(h.t, "Error: "+r.Detail, r.Output, tc.name)
	}
	return r, took
}

func TestHostilePaths(t *testing.T) {
	w := newHostileWorld(t)
	root, outside, canary := w.root, w.outside, w.canary
	in := func(rel string) string { return filepath.Join(root, rel) }
	mk := func(rel, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(in(rel)), 0o755))
		require.NoError(t, os.WriteFile(in(rel), []byte(content), 0o644))
	}
	link := func(rel, target string) { require.NoError(t, os.Symlink(target, in(rel))) }

	mk("a.txt", "alpha\n")
	mk("edit-me.txt", "one\ntwo\n")
	require.NoError(t, os.Mkdir(in("dir"), 0o755))
	link("loop1", "loop2")
	link("loop2", "loop1")
	link("self", "self")
	link("dangling-in", "missing.txt")
	link("dangling-out", filepath.Join(outside, "nothere.txt"))
	link("abs-in", in("a.txt"))
	link("abs-out", canary)
	link("chain1", "chain2")
	link("chain2", "dir/chain3")
	link("dir/chain3", "../../outside/canary.txt")
	link("up", "../..")
	link("proc-root", "/proc/self/root")
	link("dev-zero", "/dev/zero")
	link("dev-null", "/dev/null")
	require.NoError(t, syscall.Mkfifo(in("fifo"), 0o644))
	ln, err := net.Listen("unix", in("sock"))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	// A character device inside the root (needs CAP_MKNOD: root in CI).
	haveDevice := syscall.Mknod(in("zero"), syscall.S_IFCHR|0o666, 1<<8|5) == nil
	// An open descriptor on the canary, for /proc/self/fd/N.
	cf, err := os.Open(canary)
	require.NoError(t, err)
	t.Cleanup(func() { cf.Close() })
	fdPath := "/proc/self/fd/" + strconv.Itoa(int(cf.Fd()))
	pidFdPath := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(cf.Fd()))
	cwd, err := os.Getwd()
	require.NoError(t, err)
	w.watched = w.snapshot(t)

	long := strings.Repeat("n", 300)
	deep := strings.Repeat("sixteen-bytes-d/", 300) + "x.txt"   // 4805 bytes, 301 levels
	deepOK := strings.Repeat("sixteen-bytes-d/", 250) + "x.txt" // under PATH_MAX with the root
	deepUp := strings.Repeat("../", 300) + "etc/passwd"
	rootName := filepath.Base(root)

	denied := func(op, display string) string {
		return `Error: cannot ` + op + ` "` + display + `": outside the workspace root`
	}
	deniedAt := func(op, rel string) string { return denied(op, filepath.Join(root, rel)) }
	const nul = "Error: file_path must not contain a NUL byte"
	notDir := func(rel string) string {
		return `Error: cannot resolve "` + in(rel) + `": a parent path segment is not a directory`
	}
	loop := func(rel string) string {
		return `Error: cannot resolve "` + in(rel) + `": too many levels of symbolic links`
	}
	notRegular := func(op, rel string) string { return `Error: cannot ` + op + ` "` + in(rel) + `": not a regular file` }
	tooLong := func(rel string) string { return `Error: cannot resolve "` + in(rel) + `": file name too long` }
	notFound := func(rel string) string { return `Error: cannot read "` + in(rel) + `": not found` }
	badCwd := func(cwd string) string {
		return `Error: X-Session-Cwd "` + cwd + `" is not an existing folder inside the workspace root`
	}
	const sandbox, invalid, session, missing, notReg = "FS_SANDBOX_DENIED", "INVALID_ARGUMENT", "INVALID_SESSION", "FS_NOT_FOUND", "FS_NOT_REGULAR_FILE"

	cases := []hostileCase{
		// NUL bytes: argument errors before anything touches the disk.
		{"nul read", "read", obj{"file_path": "a\x00b"}, "", 400, invalid, nul},
		{"nul only write", "write", obj{"file_path": "\x00", "content": "x"}, "", 400, invalid, nul},
		{"nul after dotdot edit", "edit", obj{"file_path": "../\x00", "old_string": "a", "new_string": "b"}, "", 400, invalid, nul},
		{"nul truncation trick read", "read", obj{"file_path": "a.txt\x00.png"}, "", 400, invalid, nul},
		{"nul glob path", "glob", obj{"pattern": "*", "path": "\x00"}, "", 400, invalid, "Error: path must not contain a NUL byte"},
		{"nul grep path", "grep", obj{"pattern": "x", "path": "dir\x00"}, "", 400, invalid, "Error: path must not contain a NUL byte"},

		// ".." chains.
		{"dotdot x3 read", "read", obj{"file_path": "../../.."}, "", 403, sandbox, deniedAt("read", "../../..")},
		{"dotdot after name read", "read", obj{"file_path": "a/../../x"}, "", 403, sandbox, deniedAt("read", "../x")},
		{"dot dotdot write", "write", obj{"file_path": "./../x", "content": "x"}, "", 403, sandbox, deniedAt("write", "../x")},
		{"dotdot through folder write", "write", obj{"file_path": "dir/../../x", "content": "x"}, "", 403, sandbox, deniedAt("write", "../x")},
		{"dotdot to etc edit", "edit", obj{"file_path": "../../../../../../../../etc/passwd", "old_string": "root", "new_string": "toor"}, "", 403, sandbox, denied("edit", "/etc/passwd")},
		{"dotdot to sibling canary edit", "edit", obj{"file_path": "../outside/canary.txt", "old_string": "secret", "new_string": "leaked"}, "", 403, sandbox, denied("edit", canary)},
		{"dotdot to sibling write", "write", obj{"file_path": "../outside/new.txt", "content": "x"}, "", 403, sandbox, denied("write", filepath.Join(outside, "new.txt"))},
		{"dotdot x300 read", "read", obj{"file_path": deepUp}, "", 403, sandbox, denied("read", "/etc/passwd")},
		{"dotdot alone read", "read", obj{"file_path": ".."}, "", 403, sandbox, deniedAt("read", "..")},
		{"dot slash dotdot dotdot read", "read", obj{"file_path": "dir/./../.."}, "", 403, sandbox, deniedAt("read", "..")},
		{"out and back in read", "read", obj{"file_path": "../" + rootName + "/a.txt"}, "", 200, "", ""},
		{"out and back in write", "write", obj{"file_path": "dir/../../" + rootName + "/dir/back-in.txt", "content": "back\n"}, "", 200, "", ""},
		{"root itself read", "read", obj{"file_path": "."}, "", 422, notReg, notRegular("read", "")},
		{"root itself write", "write", obj{"file_path": ".", "content": "x"}, "", 422, notReg, notRegular("write", "")},

		// Absolute paths out of the root.
		{"etc passwd read", "read", obj{"file_path": "/etc/passwd"}, "", 403, sandbox, denied("read", "/etc/passwd")},
		{"etc passwd doubled slashes read", "read", obj{"file_path": "//etc//passwd"}, "", 403, sandbox, denied("read", "/etc/passwd")},
		{"slash read", "read", obj{"file_path": "/"}, "", 403, sandbox, denied("read", "/")},
		{"absolute dotdot write", "write", obj{"file_path": "/../../etc/toolfs-hostile", "content": "x"}, "", 403, sandbox, denied("write", "/etc/toolfs-hostile")},
		{"canary absolute read", "read", obj{"file_path": canary}, "", 403, sandbox, denied("read", canary)},
		{"canary absolute write", "write", obj{"file_path": canary, "content": "pwned"}, "", 403, sandbox, denied("write", canary)},
		{"canary absolute edit", "edit", obj{"file_path": canary, "old_string": "secret", "new_string": "leaked"}, "", 403, sandbox, denied("edit", canary)},
		{"outside new file write", "write", obj{"file_path": filepath.Join(outside, "new.txt"), "content": "x"}, "", 403, sandbox, denied("write", filepath.Join(outside, "new.txt"))},
		{"root prefix sibling write", "write", obj{"file_path": root + "-evil/x.txt", "content": "x"}, "", 403, sandbox, denied("write", root+"-evil/x.txt")},
		{"absolute inside read", "read", obj{"file_path": in("a.txt")}, "", 200, "", ""},

		// /proc: lexically outside, so refused before any lookup.
		{"proc self root canary read", "read", obj{"file_path": "/proc/self/root" + canary}, "", 403, sandbox, denied("read", "/proc/self/root"+canary)},
		{"proc self root of root read", "read", obj{"file_path": "/proc/self/root" + in("a.txt")}, "", 403, sandbox, denied("read", "/proc/self/root"+in("a.txt"))},
		{"proc self cwd read", "read", obj{"file_path": "/proc/self/cwd/hostile_test.go"}, "", 403, sandbox, denied("read", "/proc/self/cwd/hostile_test.go")},
		{"proc self fd read", "read", obj{"file_path": fdPath}, "", 403, sandbox, denied("read", fdPath)},
		{"proc pid fd write", "write", obj{"file_path": pidFdPath, "content": "pwned"}, "", 403, sandbox, denied("write", pidFdPath)},
		{"proc self environ read", "read", obj{"file_path": "/proc/self/environ"}, "", 403, sandbox, denied("read", "/proc/self/environ")},

		// Very long names and paths.
		{"300-byte name read", "read", obj{"file_path": long}, "", 404, missing, tooLong(long)},
		{"300-byte name write", "write", obj{"file_path": long, "content": "x"}, "", 404, missing, tooLong(long)},
		{"300-byte name in folder edit", "edit", obj{"file_path": "dir/" + long + "/x", "old_string": "a", "new_string": "b"}, "", 404, missing, tooLong("dir/" + long + "/x")},
		{"5000-byte path 300 levels read", "read", obj{"file_path": deep}, "", 404, missing, tooLong(deep)},
		{"5000-byte path 300 levels write", "write", obj{"file_path": deep, "content": "deep\n"}, "", 404, missing, tooLong(deep)},
		{"4000-byte path 250 levels write", "write", obj{"file_path": deepOK, "content": "deep\n"}, "", 200, "", ""},

		// Symlink loops, dangling links, absolute links, escaping chains.
		{"loop read", "read", obj{"file_path": "loop1"}, "", 404, missing, loop("loop1")},
		{"loop write", "write", obj{"file_path": "loop2", "content": "x"}, "", 404, missing, loop("loop2")},
		{"self loop edit", "edit", obj{"file_path": "self", "old_string": "a", "new_string": "b"}, "", 404, missing, loop("self")},
		{"loop as folder read", "read", obj{"file_path": "loop1/x"}, "", 404, missing, loop("loop1/x")},
		{"dangling inside read", "read", obj{"file_path": "dangling-in"}, "", 404, missing, notFound("dangling-in")},
		{"dangling inside write", "write", obj{"file_path": "dangling-in", "content": "x"}, "", 422, notReg, notRegular("write", "dangling-in")},
		{"dangling outside read", "read", obj{"file_path": "dangling-out"}, "", 403, sandbox, deniedAt("read", "dangling-out")},
		{"dangling outside write", "write", obj{"file_path": "dangling-out", "content": "x"}, "", 403, sandbox, deniedAt("write", "dangling-out")},
		{"absolute link inside read", "read", obj{"file_path": "abs-in"}, "", 200, "", ""},
		{"absolute link outside read", "read", obj{"file_path": "abs-out"}, "", 403, sandbox, deniedAt("read", "abs-out")},
		{"absolute link outside write", "write", obj{"file_path": "abs-out", "content": "pwned"}, "", 403, sandbox, deniedAt("write", "abs-out")},
		{"absolute link outside edit", "edit", obj{"file_path": "abs-out", "old_string": "secret", "new_string": "leaked"}, "", 403, sandbox, deniedAt("edit", "abs-out")},
		{"escaping chain read", "read", obj{"file_path": "chain1"}, "", 403, sandbox, deniedAt("read", "chain1")},
		{"escaping chain write", "write", obj{"file_path": "chain1", "content": "pwned"}, "", 403, sandbox, deniedAt("write", "chain1")},
		{"escaping chain edit", "edit", obj{"file_path": "chain1", "old_string": "secret", "new_string": "leaked"}, "", 403, sandbox, deniedAt("edit", "chain1")},
		{"relative link up read", "read", obj{"file_path": "up/outside/canary.txt"}, "", 403, sandbox, deniedAt("read", "up/outside/canary.txt")},
		{"relative link up write", "write", obj{"file_path": "up/outside/new.txt", "content": "x"}, "", 403, sandbox, deniedAt("write", "up/outside/new.txt")},
		{"link to proc self root read", "read", obj{"file_path": "proc-root" + canary}, "", 403, sandbox, deniedAt("read", "proc-root"+canary)},
		{"link to proc self root write", "write", obj{"file_path": "proc-root" + in("via-proc.txt"), "content": "x"}, "", 403, sandbox, deniedAt("write", "proc-root"+in("via-proc.txt"))},

		// Devices, FIFOs, sockets: never opened, answered at once.
		{"link to dev zero read", "read", obj{"file_path": "dev-zero"}, "", 403, sandbox, deniedAt("read", "dev-zero")},
		{"link to dev null write", "write", obj{"file_path": "dev-null", "content": "x"}, "", 403, sandbox, deniedAt("write", "dev-null")},
		{"fifo read", "read", obj{"file_path": "fifo"}, "", 422, notReg, notRegular("read", "fifo")},
		{"fifo write", "write", obj{"file_path": "fifo", "content": "x"}, "", 422, notReg, notRegular("write", "fifo")},
		{"fifo edit", "edit", obj{"file_path": "fifo", "old_string": "a", "new_string": "b"}, "", 422, notReg, notRegular("edit", "fifo")},
		{"socket read", "read", obj{"file_path": "sock"}, "", 422, notReg, notRegular("read", "sock")},
		{"socket write", "write", obj{"file_path": "sock", "content": "x"}, "", 422, notReg, notRegular("write", "sock")},

		// A file where a folder is expected.
		{"file as folder read", "read", obj{"file_path": "a.txt/b"}, "", 404, missing, notDir("a.txt/b")},
		{"file as folder write", "write", obj{"file_path": "a.txt/b", "content": "x"}, "", 404, missing, notDir("a.txt/b")},
		{"file as folder edit", "edit", obj{"file_path": "a.txt/b/c", "old_string": "a", "new_string": "b"}, "", 404, missing, notDir("a.txt/b/c")},
		// DISPLAY is cleaned lexically first (as the original's path.resolve),
		// so this names a.txt itself.
		{"file as folder then dotdot read", "read", obj{"file_path": "a.txt/../a.txt"}, "", 200, "", ""},

		// Unicode look-alikes are ordinary names inside the root.
		{"fullwidth dots read", "read", obj{"file_path": "．．/x"}, "", 404, missing, notFound("．．/x")},
		{"fullwidth dots write", "write", obj{"file_path": "．．/x", "content": "fullwidth\n"}, "", 200, "", ""},
		{"one dot leaders write", "write", obj{"file_path": "\u2024\u2024/x", "content": "leaders\n"}, "", 200, "", ""},
		{"division slash write", "write", obj{"file_path": "..\u2215x", "content": "division\n"}, "", 200, "", ""},
		{"combining accent write", "write", obj{"file_path": "a\u0301.txt", "content": "combining\n"}, "", 200, "", ""},
		{"rtl override write", "write", obj{"file_path": "\u202etxt.exe", "content": "rtl\n"}, "", 200, "", ""},
		{"percent-encoded dots read", "read", obj{"file_path": "%2e%2e/%2e%2e/etc/passwd"}, "", 404, missing, notFound("%2e%2e/%2e%2e/etc/passwd")},
		{"three dots read", "read", obj{"file_path": "..."}, "", 404, missing, notFound("...")},
		{"backslash dots read", "read", obj{"file_path": `..\..\etc\passwd`}, "", 404, missing, notFound(`..\..\etc\passwd`)},
		{"tilde read", "read", obj{"file_path": "~/.ssh/id_rsa"}, "", 404, missing, notFound("~/.ssh/id_rsa")},
		{"file url read", "read", obj{"file_path": "file:///etc/passwd"}, "", 404, missing, notFound("file:/etc/passwd")},

		// Hard-to-read names: inert, written where they say.
		{"newline name write", "write", obj{"file_path": "new\nline.txt", "content": "nl\n"}, "", 200, "", ""},
		{"glob chars name write", "write", obj{"file_path": "*?[.txt", "content": "glob\n"}, "", 200, "", ""},
		{"leading dash name write", "write", obj{"file_path": "-rf", "content": "dash\n"}, "", 200, "", ""},
		{"spaces name write", "write", obj{"file_path": " spaced .txt", "content": "spaces\n"}, "", 200, "", ""},
		{"leading dash name grep", "grep", obj{"pattern": "dash", "path": "-rf"}, "", 200, "", ""},
		{"glob chars name read", "read", obj{"file_path": "*?[.txt"}, "", 200, "", ""},

		// X-Session-Cwd hostile values.
		{"cwd dotdot", "read", obj{"file_path": "a.txt"}, "..", 400, session, badCwd("..")},
		{"cwd etc", "read", obj{"file_path": "passwd"}, "/etc", 400, session, badCwd("/etc")},
		{"cwd outside", "write", obj{"file_path": "new.txt", "content": "x"}, outside, 400, session, badCwd(outside)},
		{"cwd link up", "read", obj{"file_path": "outside/canary.txt"}, "up", 400, session, badCwd("up")},
		{"cwd link to proc root", "read", obj{"file_path": "etc/passwd"}, "proc-root", 400, session, badCwd("proc-root")},
		{"cwd proc self cwd", "read", obj{"file_path": "a.txt"}, "/proc/self/cwd", 400, session, badCwd("/proc/self/cwd")},
		{"cwd test cwd", "read", obj{"file_path": "hostile_test.go"}, cwd, 400, session, badCwd(cwd)},
		{"cwd a file", "read", obj{"file_path": "x"}, "a.txt", 400, session, badCwd("a.txt")},
		{"cwd fifo", "read", obj{"file_path": "x"}, "fifo", 400, session, badCwd("fifo")},
		{"cwd loop", "edit", obj{"file_path": "x", "old_string": "a", "new_string": "b"}, "loop1", 400, session, badCwd("loop1")},
		{"cwd 5000 bytes", "read", obj{"file_path": "a.txt"}, strings.Repeat("d/", 2500), 400, session, badCwd(strings.Repeat("d/", 128) + "...")},
		{"cwd rtl override", "read", obj{"file_path": "a.txt"}, "\u202e..", 400, session, badCwd("\u202e..")},
		{"cwd folder then out", "read", obj{"file_path": "a.txt"}, "dir/../..", 400, session, badCwd("dir/../..")},
		{"cwd inside, path out", "read", obj{"file_path": "../../outside/canary.txt"}, "dir", 403, sandbox, deniedAt("read", "../outside/canary.txt")},
		{"cwd inside, path up a level", "read", obj{"file_path": "../a.txt"}, "dir", 200, "", ""},
		{"cwd fullwidth dots folder", "read", obj{"file_path": "x"}, "．．", 200, "", ""},

		// Discovery tools' path.
		{"glob path dotdot", "glob", obj{"pattern": "*", "path": ".."}, "", 403, sandbox, `Error: cannot search "` + filepath.Dir(root) + `": outside the workspace root`},
		{"grep path etc", "grep", obj{"pattern": "root", "path": "/etc"}, "", 403, sandbox, `Error: cannot search "/etc": outside the workspace root`},
		{"glob path absolute link out", "glob", obj{"pattern": "*", "path": "abs-out"}, "", 403, sandbox, `Error: cannot search "` + in("abs-out") + `": outside the workspace root`},
		{"grep path link up", "grep", obj{"pattern": "secret", "path": "up"}, "", 403, sandbox, `Error: cannot search "` + in("up") + `": outside the workspace root`},
		{"glob path link to proc root", "glob", obj{"pattern": "*", "path": "proc-root"}, "", 403, sandbox, `Error: cannot search "` + in("proc-root") + `": outside the workspace root`},
		{"grep path proc self root", "grep", obj{"pattern": "secret", "path": "/proc/self/root" + outside}, "", 403, sandbox, `Error: cannot search "/proc/self/root` + outside + `": outside the workspace root`},
		{"glob pattern with dotdot", "glob", obj{"pattern": "../outside/*"}, "", 200, "", "No files found"},
		{"grep include with dotdot", "grep", obj{"pattern": "secret", "include": "../outside/*"}, "", 200, "", "No matches found"},
		{"grep follows no link out", "grep", obj{"pattern": "secret"}, "", 200, "", "No matches found"},
	}
	if haveDevice {
		cases = append(cases,
			hostileCase{"char device read", "read", obj{"file_path": "zero"}, "", 422, notReg, notRegular("read", "zero")},
			hostileCase{"char device write", "write", obj{"file_path": "zero", "content": "x"}, "", 422, notReg, notRegular("write", "zero")},
			hostileCase{"char device edit", "edit", obj{"file_path": "zero", "old_string": "a", "new_string": "b"}, "", 422, notReg, notRegular("edit", "zero")},
		)
	} else {
		t.Log("mknod refused (not root?): the device-inside-the-root cases are skipped")
	}
	require.GreaterOrEqual(t, len(cases), 50)

	// The bare provider first (policy off: nothing stands between the input
	// and the disk), with exact answers.
	off := serveRoot(t, root, false)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, took := off.hostile(tc)
			assert.Equal(t, tc.status, r.Status, r.Raw)
			assert.Equal(t, tc.code, r.Code, r.Raw)
			if tc.output != "" {
				assert.Equal(t, tc.output, r.Output)
			}
			assert.NotContains(t, r.Raw, "outside-secret", "the canary never shows")
			assert.NotContains(t, r.Raw, "root:x:0:0", "/etc/passwd never shows")
			assert.Less(t, took, 5*time.Second, "answered at once")
		})
	}

	// Successes landed where they say, inside the root.
	for rel, want := range map[string]string{
		"dir/back-in.txt": "back\n", deepOK: "deep\n", "．．/x": "fullwidth\n", "\u2024\u2024/x": "leaders\n",
		"..\u2215x": "division\n", "a\u0301.txt": "combining\n", "\u202etxt.exe": "rtl\n",
		"new\nline.txt": "nl\n", "*?[.txt": "glob\n", "-rf": "dash\n", " spaced .txt": "spaces\n",
	} {
		b, err := os.ReadFile(in(rel))
		if assert.NoError(t, err, rel) {
			assert.Equal(t, want, string(b), rel)
		}
	}
	w.assertUntouched(t)

	// The same requests with the policy on: the boundary is checked before
	// the policy, so every refusal above is the same refusal here, and
	// nothing else becomes a server error.
	on := serveRoot(t, root, true)
	for _, tc := range cases {
		r, _ := on.hostile(tc)
		assert.Less(t, r.Status, 500, tc.name+": "+r.Raw)
		if tc.status == 400 || tc.status == 403 {
			assert.Equal(t, tc.status, r.Status, tc.name)
			assert.Equal(t, tc.code, r.Code, tc.name)
		}
		assert.NotContains(t, r.Raw, "outside-secret", tc.name)
	}
	w.assertUntouched(t)
}

// TestHostileSymlinkSwap races a goroutine that flips links between an
// inside target and the outside canary against reads, streamed reads, writes
// and edits through them. Whatever the interleaving, the canary is never
// shown, written or edited.
func TestHostileSymlinkSwap(t *testing.T) {
	w := newHostileWorld(t)
	root := w.root
	in := func(rel string) string { return filepath.Join(root, rel) }
	require.NoError(t, os.Mkdir(in("indir"), 0o755))
	require.NoError(t, os.WriteFile(in("indir/canary.txt"), []byte("inside\n"), 0o644))
	// "flip" is the final component; "flipdir" is a parent folder.
	require.NoError(t, os.Symlink("indir/canary.txt", in("flip")))
	require.NoError(t, os.Symlink("indir", in("flipdir")))
	w.watched = w.snapshot(t)

	stop := make(chan struct{})
	var flips atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		targets := [][2]string{{"flip", w.canary}, {"flipdir", w.outside}, {"flip", "indir/canary.txt"}, {"flipdir", "indir"}}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tg := targets[i%len(targets)]
			tmp := in(".swap-" + tg[0])
			os.Remove(tmp)
			if err := os.Symlink(tg[1], tmp); err == nil && os.Rename(tmp, in(tg[0])) == nil {
				flips.Add(1)
			}
		}
	}()

	var seen sync.Map // "<policy>/<tool> <status> <code>" → count
	run := func(h *harness, label string) {
		bodies := []hostileCase{
			{tool: "read", body: obj{"file_path": "flip"}},
			{tool: "read", body: obj{"file_path": "flipdir/canary.txt"}},
			{tool: "write", body: obj{"file_path": "flip", "content": "written\n"}},
			{tool: "write", body: obj{"file_path": "flipdir/canary.txt", "content": "written\n"}},
			{tool: "edit", body: obj{"file_path": "flip", "old_string": "secret", "new_string": "leaked"}},
			{tool: "edit", body: obj{"file_path": "flipdir/canary.txt", "old_string": "secret", "new_string": "leaked"}},
			{tool: "grep", body: obj{"pattern": "secret", "path": "flipdir"}},
		}
		var cw sync.WaitGroup
		deadline := time.Now().Add(1500 * time.Millisecond)
		for g := 0; g < 4; g++ {
			cw.Add(1)
			go func(g int) {
				defer cw.Done()
				for i := g; time.Now().Before(deadline); i++ {
					tc := bodies[i%len(bodies)]
					tc.name = label + "/" + tc.tool
					r, _ := h.hostile(tc)
					key := tc.name + " " + strconv.Itoa(r.Status) + " " + r.Code
					n, _ := seen.LoadOrStore(key, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					assert.NotContains(t, r.Raw, "outside-secret", tc.name)
					assert.Less(t, r.Status, 500, tc.name+": "+r.Raw)
				}
			}(g)
		}
		cw.Wait()
	}
	run(serveRoot(t, root, false), "off")
	run(serveRoot(t, root, true), "on")
	close(stop)
	wg.Wait()

	var sawDenied, sawOK bool
	seen.Range(func(k, v any) bool {
		t.Logf("%-40s %d", k, v.(*atomic.Int64).Load())
		key := k.(string)
		sawDenied = sawDenied || strings.Contains(key, "403 FS_SANDBOX_DENIED")
		sawOK = sawOK || strings.HasPrefix(key, "off/read 200")
		return true
	})
	t.Logf("flips: %d", flips.Load())
	assert.Greater(t, flips.Load(), int64(100), "the links really flipped")
	assert.True(t, sawDenied && sawOK, "both sides of the race were hit")
	w.assertUntouched(t)
}
