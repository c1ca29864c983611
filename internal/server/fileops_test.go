package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// move, delete and mkdir through the whole server (SPEC §26, docs/files.md
// "Move, delete and mkdir"): each a plan of the change pipeline, so fenced,
// recorded, audited and published as write is.

// ops is a server with the policy and checkpoints on, and its root.
type ops struct {
	*patchServer
}

func startOps(t *testing.T, cfg server.Config) ops {
	return ops{startPatch(t, cfg)}
}

// call sends tool's arguments in session to /tools/<tool>.
func (o ops) call(session, tool string, args map[string]any) answer {
	o.t.Helper()
	return post(o.t, o.srv.URL+"/tools/"+tool, session, jsonBody(args))
}

// model sends tool's arguments in session to /model/<tool>.
func (o ops) model(session, tool string, args map[string]any) answer {
	o.t.Helper()
	return post(o.t, o.srv.URL+"/model/"+tool, session, jsonBody(args))
}

func (o ops) exists(rel string) bool {
	_, err := os.Lstat(o.path(rel))
	return err == nil
}

func (o ops) out(a answer) string {
	o.t.Helper()
	var r struct {
		Output string `json:"output"`
	}
	require.NoError(o.t, json.Unmarshal([]byte(a.body), &r), a.body)
	return r.Output
}

// TestFileOpsTexts pins every text of move, delete and mkdir: the success
// sentences over /tools and /model, and each refusal's code and message.
func TestFileOpsTexts(t *testing.T) {
	o := startOps(t, server.Config{})
	root := o.srv.Root
	o.write("a.txt", "a\n")
	o.write("b.txt", "b\n")
	o.write("full/x.txt", "x\n")
	o.read("s", "a.txt")

	// Success.
	a := o.call("s", "move", map[string]any{"from": "a.txt", "to": "sub/c.txt"})
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "Moved "+root+"/a.txt to "+root+"/sub/c.txt.", o.out(a))
	assert.JSONEq(t, `{"from":"`+root+`/a.txt","to":"`+root+`/sub/c.txt","replaced":false}`, string(mustMember(t, a.body, "metadata")))
	assert.Equal(t, "a\n", o.contents("sub/c.txt"))
	assert.False(t, o.exists("a.txt"))

	a = o.model("s", "mkdir", map[string]any{"path": "made/deep"})
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "Created folder "+root+"/made/deep.", a.body)
	a = o.call("s", "mkdir", map[string]any{"path": "made/deep"})
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "Created folder "+root+"/made/deep.", o.out(a), "an existing folder is fine")
	assert.JSONEq(t, `{"path":"`+root+`/made/deep","created":false}`, string(mustMember(t, a.body, "metadata")))

	a = o.model("s", "delete", map[string]any{"file_path": "made/deep"})
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "Deleted "+root+"/made/deep.", a.body)
	a = o.call("s", "delete", map[string]any{"file_path": "sub/c.txt"})
	require.Equal(t, 200, a.status, a.body, "the session moved it, so it knows it")
	assert.Equal(t, "Deleted "+root+"/sub/c.txt.", o.out(a))

	// Refusals: code, status and the exact model text.
	for _, c := range []struct {
		name, tool string
		args       map[string]any
		status     int
		code, text string
	}{
		{"unread source", "move", map[string]any{"from": "b.txt", "to": "n.txt"}, 409, "FS_NOT_OBSERVED", `move requires reading "` + root + `/b.txt" first — read the file, then retry`},
		{"missing source", "move", map[string]any{"from": "nope.txt", "to": "n.txt"}, 409, "FS_NOT_OBSERVED", `move requires reading "` + root + `/nope.txt" first — read the file, then retry`},
		{"existing destination", "move", map[string]any{"from": "full", "to": "b.txt"}, 409, "FS_ALREADY_EXISTS", `cannot move to "` + root + `/b.txt": it exists; pass overwrite: true after reading it`},
		{"into itself", "move", map[string]any{"from": "full", "to": "full/in"}, 400, "INVALID_ARGUMENT", `cannot move "` + root + `/full" into itself ("` + root + `/full/in")`},
		{"the root", "move", map[string]any{"from": ".", "to": "r"}, 400, "INVALID_ARGUMENT", `cannot move "` + root + `": it is the workspace root`},
		{"unread file", "delete", map[string]any{"file_path": "b.txt"}, 409, "FS_NOT_OBSERVED", `delete requires reading "` + root + `/b.txt" first — read the file, then retry`},
		{"non-empty folder", "delete", map[string]any{"file_path": "full"}, 409, "FS_NOT_EMPTY", `cannot delete "` + root + `/full": the folder is not empty`},
		{"the root", "delete", map[string]any{"file_path": root}, 400, "INVALID_ARGUMENT", `cannot delete "` + root + `": it is the workspace root`},
		{"a file in the way", "mkdir", map[string]any{"path": "b.txt"}, 422, "FS_NOT_DIRECTORY", `cannot create folder "` + root + `/b.txt": a file is in the way`},
		{"a file on the way", "mkdir", map[string]any{"path": "b.txt/x"}, 404, "FS_NOT_FOUND", `cannot resolve "` + root + `/b.txt/x": a parent path segment is not a directory`},
		{"no from", "move", map[string]any{"to": "x"}, 400, "INVALID_ARGUMENT", `from must be a non-empty string`},
		{"empty to", "move", map[string]any{"from": "b.txt", "to": " "}, 400, "INVALID_ARGUMENT", `to must be a non-empty string`},
		{"overwrite a string", "move", map[string]any{"from": "b.txt", "to": "x", "overwrite": "yes"}, 400, "INVALID_ARGUMENT", `overwrite must be a boolean`},
		{"no path", "mkdir", map[string]any{}, 400, "INVALID_ARGUMENT", `path must be a non-empty string`},
		{"no file_path", "delete", map[string]any{"path": "b.txt"}, 400, "INVALID_ARGUMENT", `file_path must be a non-empty string`},
	} {
		t.Run(c.tool+" "+c.name, func(t *testing.T) {
			before := entriesOf(t, root)
			a := o.call("s", c.tool, c.args)
			assert.Equal(t, c.status, a.status, a.body)
			p := problemOf(t, a)
			assert.Equal(t, c.code, p.Code)
			assert.Equal(t, "Error: "+c.text, p.Output)
			m := o.model("s", c.tool, c.args)
			assert.Equal(t, c.status, m.status)
			assert.Equal(t, "Error: "+c.text, m.body)
			assert.Equal(t, before, entriesOf(t, root), "nothing changed")
		})
	}
}

// entriesOf is every entry under dir by slash path (the server's private
// folder left out): a file's content, a folder as "/", a symlink as
// "-> <target>", never followed.
func entriesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case d.IsDir() && d.Name() == ".toolfs-api":
			return filepath.SkipDir
		case d.IsDir():
			out[filepath.ToSlash(rel)] = "/"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			out[filepath.ToSlash(rel)] = "-> " + target
			return err
		default:
			b, err := os.ReadFile(path)
			out[filepath.ToSlash(rel)] = string(b)
			return err
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func mustMember(t *testing.T, body, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	return m[name]
}

// TestMoveOverwrite: an existing destination is replaced only with
// overwrite true and that file read and unchanged; unread it is refused as
// a write of it would be.
func TestMoveOverwrite(t *testing.T) {
	o := startOps(t, server.Config{})
	root := o.srv.Root
	o.write("a.txt", "a\n")
	o.write("b.txt", "b\n")
	o.read("s", "a.txt")
	a := o.call("s", "move", map[string]any{"from": "a.txt", "to": "b.txt", "overwrite": true})
	assert.Equal(t, 409, a.status, a.body)
	assert.Equal(t, `Error: cannot overwrite existing "`+root+`/b.txt" without reading it first — read the file, then retry`, problemOf(t, a).Output)

	o.read("s", "b.txt")
	o.write("b.txt", "a person's b\n")
	a = o.call("s", "move", map[string]any{"from": "a.txt", "to": "b.txt", "overwrite": true})
	assert.Equal(t, 409, a.status, a.body)
	assert.Equal(t, "FS_STALE_VERSION", problemOf(t, a).Code)
	assert.Equal(t, "a person's b\n", o.contents("b.txt"))

	o.read("s", "b.txt")
	a = o.call("s", "move", map[string]any{"from": "a.txt", "to": "b.txt", "overwrite": true})
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "a\n", o.contents("b.txt"))
	assert.JSONEq(t, `{"from":"`+root+`/a.txt","to":"`+root+`/b.txt","replaced":true}`, string(mustMember(t, a.body, "metadata")))

	// A folder never replaces a file, nor a file a folder.
	require.NoError(t, os.Mkdir(o.path("d"), 0o755))
	a = o.call("s", "move", map[string]any{"from": "d", "to": "b.txt", "overwrite": true})
	assert.Equal(t, 422, a.status, a.body)
	assert.Equal(t, `Error: cannot move to "`+root+`/b.txt": overwrite replaces a file with a file, never a folder`, problemOf(t, a).Output)
}

// TestFileOpsRevert: revert moves a moved file back (one history entry,
// both paths), recreates a deleted file with its bytes and mode, and the
// folder operations are listed nowhere (docs/files.md).
func TestFileOpsRevert(t *testing.T) {
	o := startOps(t, server.Config{})
	o.write("a.txt", "moved\n")
	o.write("gone.sh", "#!/bin/sh\necho hi\n")
	require.NoError(t, os.Chmod(o.path("gone.sh"), 0o751))
	o.read("s", "gone.sh", "a.txt")

	a := o.call("s", "move", map[string]any{"from": "a.txt", "to": "dir/b.txt"})
	require.Equal(t, 200, a.status, a.body)
	a = o.call("s", "delete", map[string]any{"file_path": "gone.sh"})
	require.Equal(t, 200, a.status, a.body)

	h := historyOf(t, o.srv.URL, "s")
	require.Len(t, h.Changes, 3, h.Output)
	assert.Equal(t, "delete", h.Changes[0].Tool)
	assert.Equal(t, "gone.sh", h.Changes[0].Path)
	assert.Equal(t, h.Changes[1].Seq, h.Changes[2].Seq, "a move is one change: one seq")
	for _, c := range h.Changes[1:] {
		assert.Equal(t, "move", c.Tool)
	}
	assert.ElementsMatch(t, []string{"a.txt", "dir/b.txt"}, []string{h.Changes[1].Path, h.Changes[2].Path})

	a = post(t, o.srv.URL+"/sessions/s/revert", "", `{"to":0}`)
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "moved\n", o.contents("a.txt"))
	assert.False(t, o.exists("dir/b.txt"), "moved back")
	assert.Equal(t, "#!/bin/sh\necho hi\n", o.contents("gone.sh"))
	st, err := os.Stat(o.path("gone.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o751), st.Mode().Perm(), "recreated with its mode")
}

// TestDeleteWhileAPersonEdits: a person's edit after the session's read
// refuses the delete (FS_STALE_VERSION) and nothing is lost; racing
// writes of a person against deletes never lose a write the person made
// after the session's read.
func TestDeleteWhileAPersonEdits(t *testing.T) {
	o := startOps(t, server.Config{})
	deleted, kept := 0, 0
	defer func() { t.Logf("the delete won %d rounds, the person's edit refused it %d", deleted, kept) }()
	o.write("a.txt", "agent read this\n")
	o.read("s", "a.txt")
	o.write("a.txt", "a person's edit\n")
	a := o.call("s", "delete", map[string]any{"file_path": "a.txt"})
	assert.Equal(t, 409, a.status, a.body)
	assert.Equal(t, `Error: cannot delete "`+o.srv.Root+`/a.txt": file changed since it was read — re-read the file, then retry`, problemOf(t, a).Output)
	assert.Equal(t, "a person's edit\n", o.contents("a.txt"))

	// Racing: each round the session reads, a person rewrites at once, and
	// the delete runs. Either the delete won (the file is gone and the
	// person's write came after: it is there again) or it was refused.
	for i := range 30 {
		o.write("r.txt", "v0\n")
		o.read("s", "r.txt")
		var wg sync.WaitGroup
		wg.Add(1)
		person := "person " + string(rune('a'+i%26)) + "\n"
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i%10) * 250 * time.Microsecond) // before, during or after the call
			_ = os.WriteFile(o.path("r.txt"), []byte(person), 0o644)
		}()
		a := o.call("s", "delete", map[string]any{"file_path": "r.txt"})
		wg.Wait()
		switch a.status {
		case 200:
			deleted++
			// Deleted the session's version; the person's write, if it
			// came after, made the file anew.
			if o.exists("r.txt") {
				assert.Equal(t, person, o.contents("r.txt"))
			}
		case 409:
			kept++
			assert.Equal(t, person, o.contents("r.txt"), "refused: the person's edit stays")
		default:
			t.Fatalf("round %d: %d %s", i, a.status, a.body)
		}
	}
}

// TestMoveRacingACreate: a file created at the destination while a move
// runs is never replaced: either the move was first (the person's create
// fails, O_EXCL) or the move is refused with FS_ALREADY_EXISTS and the
// source stays.
func TestMoveRacingACreate(t *testing.T) {
	o := startOps(t, server.Config{})
	moved, refused := 0, 0
	defer func() { t.Logf("the move won %d rounds, the create %d", moved, refused) }()
	for i := range 40 {
		o.write("src.txt", "agent\n")
		_ = os.Remove(o.path("dst.txt"))
		o.read("s", "src.txt")
		var wg sync.WaitGroup
		var created bool
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i%10) * 250 * time.Microsecond) // before, during or after the call
			f, err := os.OpenFile(o.path("dst.txt"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err == nil {
				created = true
				_, _ = f.WriteString("person\n")
				f.Close()
			}
		}()
		a := o.call("s", "move", map[string]any{"from": "src.txt", "to": "dst.txt"})
		wg.Wait()
		switch a.status {
		case 200:
			moved++
			assert.False(t, created, "round %d: the person's create succeeded and was replaced", i)
			assert.Equal(t, "agent\n", o.contents("dst.txt"))
			assert.False(t, o.exists("src.txt"))
		case 409:
			refused++
			assert.Equal(t, "FS_ALREADY_EXISTS", problemOf(t, a).Code)
			assert.True(t, created)
			assert.Equal(t, "agent\n", o.contents("src.txt"))
			// The person's bytes may still be on their way; never the agent's.
			assert.NotEqual(t, "agent\n", o.contents("dst.txt"))
		default:
			t.Fatalf("round %d: %d %s", i, a.status, a.body)
		}
	}
}

// TestFileOpsHostilePaths: every path argument of move, delete and mkdir
// refuses what leaves the root (.., absolute, a symlink out), the private
// folder, a NUL byte and an empty string, and nothing changes anywhere.
func TestFileOpsHostilePaths(t *testing.T) {
	o := startOps(t, server.Config{})
	root := o.srv.Root
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s\n"), 0o644))
	require.NoError(t, os.Symlink(outside, o.path("out")))
	o.write("a.txt", "a\n")
	o.read("s", "a.txt")
	a := o.call("s", "write", map[string]any{"file_path": "w.txt", "content": "w\n"})
	require.Equal(t, 200, a.status, a.body) // makes the private folder
	o.read("s", "w.txt")

	hostile := map[string]string{
		"dotdot":   "../escape.txt",
		"absolute": "/etc/passwd",
		"link out": "out/secret.txt",
		"private":  ".toolfs-api/checkpoints",
	}
	before, outBefore := entriesOf(t, root), entriesOf(t, outside)
	for name, p := range hostile {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"move", map[string]any{"from": p, "to": "x.txt"}},
			{"move", map[string]any{"from": "a.txt", "to": p}},
			{"delete", map[string]any{"file_path": p}},
			{"mkdir", map[string]any{"path": p + "/new"}},
		} {
			a := o.call("s", c.tool, c.args)
			assert.Equal(t, 403, a.status, "%s %s %v: %s", name, c.tool, c.args, a.body)
			assert.Equal(t, "FS_SANDBOX_DENIED", problemOf(t, a).Code, "%s %s", name, c.tool)
			assert.Contains(t, problemOf(t, a).Output, "outside the workspace root", "%s %s", name, c.tool)
		}
	}
	for _, c := range []struct {
		tool, text string
		args       map[string]any
	}{
		{"move", "from must not contain a NUL byte", map[string]any{"from": "a\x00.txt", "to": "x"}},
		{"move", "to must not contain a NUL byte", map[string]any{"from": "a.txt", "to": "x\x00"}},
		{"delete", "file_path must not contain a NUL byte", map[string]any{"file_path": "a.txt\x00"}},
		{"mkdir", "path must not contain a NUL byte", map[string]any{"path": "d\x00"}},
		{"move", "from must be a non-empty string", map[string]any{"from": "", "to": "x"}},
		{"move", "to must be a non-empty string", map[string]any{"from": "a.txt", "to": ""}},
		{"delete", "file_path must be a non-empty string", map[string]any{"file_path": ""}},
		{"mkdir", "path must be a non-empty string", map[string]any{"path": ""}},
	} {
		a := o.call("s", c.tool, c.args)
		assert.Equal(t, 400, a.status, a.body)
		assert.Equal(t, "Error: "+c.text, problemOf(t, a).Output)
	}
	// The root itself: as a destination it exists; as a folder to make it
	// is there already; as a move's source or a delete it is refused.
	a = o.call("s", "move", map[string]any{"from": "a.txt", "to": root})
	assert.Equal(t, "FS_ALREADY_EXISTS", problemOf(t, a).Code, a.body)
	a = o.call("s", "delete", map[string]any{"file_path": "."})
	assert.Equal(t, "Error: cannot delete \""+root+"\": it is the workspace root", problemOf(t, a).Output)
	assert.Equal(t, before, entriesOf(t, root), "nothing changed in the root")
	assert.Equal(t, outBefore, entriesOf(t, outside), "nothing changed outside")
	assert.True(t, o.exists("out"), "the link stays")
}

// TestFileOpsFencedAuditedPublished: under read-only each is 403 with the
// fence's text and nothing changes; with the fence off each is audited
// (one line per path) and published on the change feed.
func TestFileOpsFencedAuditedPublished(t *testing.T) {
	fenced := startOps(t, server.Config{Tools: tools.Settings{SandboxMode: "read-only"}})
	fenced.write("a.txt", "a\n")
	fenced.read("s", "a.txt")
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"move", map[string]any{"from": "a.txt", "to": "b.txt"}},
		{"delete", map[string]any{"file_path": "a.txt"}},
		{"mkdir", map[string]any{"path": "d"}},
	} {
		a := fenced.call("s", c.tool, c.args)
		assert.Equal(t, 403, a.status, a.body)
		assert.Equal(t, "Error: "+msgReadOnlyDenied, problemOf(t, a).Output, c.tool)
	}
	assert.Equal(t, map[string]string{".": "/", "a.txt": "a\n"}, entriesOf(t, fenced.srv.Root))
	assert.False(t, fenced.exists("d"))

	log := filepath.Join(t.TempDir(), "audit.log")
	o := startOps(t, server.Config{Audit: audit.Settings{Path: log}, Events: events.Settings{Enabled: true}})
	o.write("a.txt", "a\n")
	o.write("c.txt", "c\n")
	o.read("s", "a.txt", "c.txt")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", o.srv.URL+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	events := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e map[string]any
				if json.Unmarshal([]byte(d), &e) == nil {
					events <- e
				}
			}
		}
	}()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"move", map[string]any{"from": "a.txt", "to": "b.txt"}},
		{"delete", map[string]any{"file_path": "c.txt"}},
		{"mkdir", map[string]any{"path": "d"}},
	} {
		a := o.call("s", c.tool, c.args)
		require.Equal(t, 200, a.status, a.body)
	}
	lines := auditLines(t, log)
	require.Len(t, lines, 4, strings.Join(lines, "\n"))
	assert.Contains(t, lines[0], `"tool":"move","path":"a.txt"`)
	assert.Contains(t, lines[0], `"after":null`)
	assert.Contains(t, lines[1], `"tool":"move","path":"b.txt"`)
	assert.Contains(t, lines[1], `"before":null`)
	assert.Contains(t, lines[2], `"tool":"delete","path":"c.txt"`)
	assert.Contains(t, lines[3], `"tool":"mkdir","path":"d"`)

	got := map[string]string{}
	timeout := time.After(10 * time.Second)
	for len(got) < 4 {
		select {
		case e := <-events:
			if path, _ := e["path"].(string); path != "" && e["session"] == "s" {
				got[path], _ = e["type"].(string)
			}
		case <-timeout:
			t.Fatalf("events so far: %v", got)
		}
	}
	assert.Equal(t, map[string]string{"a.txt": "delete", "b.txt": "write", "c.txt": "delete", "d": "mkdir"}, got)
}

// TestFileOpsNotInTheOriginalProfile: the original profile's surface is
// the original's (SPEC §11): no route, no catalog entry.
func TestFileOpsNotInTheOriginalProfile(t *testing.T) {
	o := startOps(t, server.Config{Tools: tools.Settings{Profile: "original"}})
	o.write("a.txt", "a\n")
	o.read("s", "a.txt")
	for _, tool := range []string{"move", "delete", "mkdir"} {
		a := o.call("s", tool, map[string]any{"from": "a.txt", "to": "b.txt", "file_path": "a.txt", "path": "d"})
		assert.Equal(t, 404, a.status, a.body)
		assert.Equal(t, "NOT_FOUND", problemOf(t, a).Code)
		cat := send(t, "GET", o.srv.URL+"/tools", "", "")
		assert.NotContains(t, cat.body, `"name":"`+tool+`"`)
	}
	assert.Equal(t, "a\n", o.contents("a.txt"))
	assert.False(t, o.exists("b.txt"))
	assert.False(t, o.exists("d"))
}

// TestMoveEscalation: under read-only a move may ask a person for a wider
// mode: one approval naming both paths, showing the move; once approved
// the move runs.
func TestMoveEscalation(t *testing.T) {
	o := startOps(t, server.Config{Tools: tools.Settings{SandboxMode: "read-only"}, Approvals: approval.Settings{Timeout: time.Minute}})
	root := o.srv.Root
	o.write("a.txt", "a\n")
	o.read("s", "a.txt")
	done := make(chan answer, 1)
	go func() {
		done <- o.call("s", "move", map[string]any{"from": "a.txt", "to": "b.txt", "sandbox_permissions": "workspace-write", "justification": "rename it"})
	}()
	type pending struct {
		ID, Tool, Path, Diff string
		Paths                []string
	}
	var p pending
	require.Eventually(t, func() bool {
		a := send(t, "GET", o.srv.URL+"/approvals", "", "")
		var l struct{ Approvals []pending }
		require.NoError(t, json.Unmarshal([]byte(a.body), &l))
		if len(l.Approvals) == 1 {
			p = l.Approvals[0]
		}
		return p.ID != ""
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "move", p.Tool)
	assert.Equal(t, root+"/a.txt", p.Path)
	assert.Equal(t, []string{root + "/a.txt", root + "/b.txt"}, p.Paths)
	assert.Equal(t, "Move "+root+"/a.txt to "+root+"/b.txt.", p.Diff)
	assert.True(t, o.exists("a.txt"), "nothing moves before the decision")
	a := send(t, "POST", o.srv.URL+"/approvals/"+p.ID, "", `{"decision":"approve"}`, "Content-Type", "application/json")
	require.Equal(t, 204, a.status, a.body)
	a = <-done
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "a\n", o.contents("b.txt"))
	assert.False(t, o.exists("a.txt"))
}

// TestMoveFolder: a folder moves whole by one rename, its parents made, no
// read needed; an empty folder deletes, and mkdir's folder too.
func TestMoveFolder(t *testing.T) {
	o := startOps(t, server.Config{})
	root := o.srv.Root
	o.write("pkg/a.txt", "a\n")
	o.write("pkg/deep/b.bin", "b\x00\n")
	before, err := os.Stat(o.path("pkg/deep/b.bin"))
	require.NoError(t, err)
	a := o.call("s", "move", map[string]any{"from": "pkg", "to": "lib/pkg"})
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, "Moved "+root+"/pkg to "+root+"/lib/pkg.", o.out(a))
	assert.Equal(t, map[string]string{".": "/", "lib": "/", "lib/pkg": "/", "lib/pkg/a.txt": "a\n", "lib/pkg/deep": "/", "lib/pkg/deep/b.bin": "b\x00\n"}, entriesOf(t, root))
	after, err := os.Stat(o.path("lib/pkg/deep/b.bin"))
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "renamed, not copied")

	a = o.call("s", "mkdir", map[string]any{"path": "empty"})
	require.Equal(t, 200, a.status, a.body)
	a = o.call("s", "delete", map[string]any{"file_path": "empty"})
	require.Equal(t, 200, a.status, a.body)
	assert.False(t, o.exists("empty"))
}

// TestFolderRevert: revert removes what mkdir made (innermost first, each
// only while empty) after the files made in it, and moves a moved folder
// back; a folder that holds a person's file stays.
func TestFolderRevert(t *testing.T) {
	o := startOps(t, server.Config{})
	o.write("pkg/a.txt", "a\n")
	o.write("keep/x", "")
	require.NoError(t, os.Remove(o.path("keep/x")))
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"mkdir", map[string]any{"path": "m/n/o"}},
		{"move", map[string]any{"from": "pkg", "to": "lib/pkg"}},
		{"write", map[string]any{"file_path": "m/n/o/f.txt", "content": "f\n"}},
		{"mkdir", map[string]any{"path": "keep/sub"}},
	} {
		a := o.call("s", c.tool, c.args)
		require.Equal(t, 200, a.status, a.body)
	}
	o.write("keep/sub/person.txt", "mine\n")
	h := historyOf(t, o.srv.URL, "s")
	require.Len(t, h.Changes, 4, h.Output)
	assert.Equal(t, []string{"mkdir keep/sub", "write m/n/o/f.txt", "move pkg", "mkdir m"}, []string{
		h.Changes[0].Tool + " " + h.Changes[0].Path, h.Changes[1].Tool + " " + h.Changes[1].Path,
		h.Changes[2].Tool + " " + h.Changes[2].Path, h.Changes[3].Tool + " " + h.Changes[3].Path})

	assert.Contains(t, h.Output, "\n4 mkdir keep/sub (folder made: keep/sub)\n")
	assert.Contains(t, h.Output, "\n2 move pkg (folder moved to lib/pkg)\n")
	assert.True(t, strings.HasSuffix(h.Output, "\n1 mkdir m (folder made: m/n/o)"), h.Output)
	dry := post(t, o.srv.URL+"/sessions/s/revert", "", `{"to":0,"dry_run":true}`)
	require.Equal(t, 200, dry.status, dry.body)
	assert.Contains(t, o.out(dry), "(Moves the folder lib/pkg back to pkg.)")
	assert.Contains(t, o.out(dry), "(Removes the folder m/n/o and the folders made with it, each if empty.)")
	assert.True(t, o.exists("m/n/o/f.txt"), "a dry run changes nothing")

	a := post(t, o.srv.URL+"/sessions/s/revert", "", `{"to":0}`)
	require.Equal(t, 200, a.status, a.body)
	assert.Equal(t, map[string]string{".": "/", "pkg": "/", "pkg/a.txt": "a\n", "lib": "/", "keep": "/", "keep/sub": "/", "keep/sub/person.txt": "mine\n"}, entriesOf(t, o.srv.Root))
}
