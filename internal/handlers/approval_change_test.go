package handlers_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// tree lists every entry under the root but the server's private folder,
// root-relative, links as "name -> target", sorted.
func (h *sb) tree() []string {
	h.t.Helper()
	var out []string
	err := filepath.WalkDir(h.srv.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.srv.Root, p)
		switch {
		case rel == ".":
			return nil
		case rel == ".toolfs-api":
			return filepath.SkipDir
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel += " -> " + target
		case d.IsDir():
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	require.NoError(h.t, err)
	sort.Strings(out)
	return out
}

// swap replaces the folder rel (empty, or holding only what it holds) by a
// symlink to target.
func (h *sb) swap(rel, target string) {
	h.t.Helper()
	require.NoError(h.t, os.RemoveAll(filepath.Join(h.srv.Root, rel)))
	require.NoError(h.t, os.Symlink(target, filepath.Join(h.srv.Root, rel)))
}

// TestApprovedCallCheckedAgain: once a person approves, the call is checked
// again from the start under the granted mode (the target resolved anew,
// the fence, the policy and the version), so what runs is exactly what was
// shown or the call fails with the ordinary error (docs/sandbox.md). The
// server is read-only; the session cwd is sub; each call asks for
// workspace-write, and something changes while the person decides.
func TestApprovedCallCheckedAgain(t *testing.T) {
	esc := func(args map[string]any) map[string]any {
		args["sandbox_permissions"] = "workspace-write"
		args["justification"] = "The user asked for it."
		return args
	}
	cases := []struct {
		name      string
		files     []string // "rel = content", or "rel/" for a folder
		read      string   // read first in the session, "" for none
		tool      string
		args      map[string]any
		meanwhile func(h *sb)
		code      string
		output    string // with $ROOT for the root
		tree      []string
	}{
		{
			// Issue 27 item 4: the fence was checked before the wait only,
			// and the path walked again after it: the file landed in other/.
			name:  "a folder swapped for a link out of the cwd",
			files: []string{"sub/d/", "other/"},
			tool:  "write", args: map[string]any{"file_path": "d/new.txt", "content": "x\n"},
			meanwhile: func(h *sb) { h.swap("sub/d", "../other") },
			code:      "FS_SANDBOX_DENIED",
			output:    deniedText("workspace-write"),
			tree:      []string{"other/", "sub/", "sub/d -> ../other"},
		},
		{
			name:  "a folder swapped for a link to another folder in the cwd",
			files: []string{"sub/d/", "sub/e/"},
			tool:  "write", args: map[string]any{"file_path": "d/new.txt", "content": "x\n"},
			meanwhile: func(h *sb) { h.swap("sub/d", "e") },
			code:      "FS_STALE_VERSION",
			output:    "Error: cannot write \"$ROOT/sub/d/new.txt\": file changed since it was read \u2014 re-read the file, then retry",
			tree:      []string{"sub/", "sub/d -> e", "sub/e/"},
		},
		{
			name:  "the cwd itself swapped for a link to another folder",
			files: []string{"sub/", "sub2/"},
			tool:  "write", args: map[string]any{"file_path": "new.txt", "content": "x\n"},
			meanwhile: func(h *sb) { h.swap("sub", "sub2") },
			code:      "FS_STALE_VERSION",
			output:    "Error: cannot write \"$ROOT/sub/new.txt\": file changed since it was read \u2014 re-read the file, then retry",
			tree:      []string{"sub -> sub2", "sub2/"},
		},
		{
			name:  "the file edited by someone else",
			files: []string{"sub/a.txt = one\ntwo\n"},
			read:  "a.txt",
			tool:  "edit", args: map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "TWO"},
			meanwhile: func(h *sb) { h.file("sub/a.txt", "one\ntwo\nthree\n") },
			code:      "FS_STALE_VERSION",
			output:    "Error: cannot edit \"$ROOT/sub/a.txt\": file changed since it was read \u2014 re-read the file, then retry",
			tree:      []string{"sub/", "sub/a.txt = one\ntwo\nthree\n"},
		},
		{
			name:  "the file replaced by someone else",
			files: []string{"sub/a.txt = one\n"},
			read:  "a.txt",
			tool:  "write", args: map[string]any{"file_path": "a.txt", "content": "mine\n"},
			meanwhile: func(h *sb) { h.file("sub/a.txt", "theirs\n") },
			code:      "FS_STALE_VERSION",
			output:    "Error: cannot write \"$ROOT/sub/a.txt\": file changed since it was read \u2014 re-read the file, then retry",
			tree:      []string{"sub/", "sub/a.txt = theirs\n"},
		},
		{
			name:  "the file created by someone else",
			files: []string{"sub/"},
			tool:  "write", args: map[string]any{"file_path": "new.txt", "content": "mine\n"},
			meanwhile: func(h *sb) { h.file("sub/new.txt", "theirs\n") },
			code:      "FS_NOT_OBSERVED",
			output:    "Error: cannot overwrite existing \"$ROOT/sub/new.txt\" without reading it first \u2014 read the file, then retry",
			tree:      []string{"sub/", "sub/new.txt = theirs\n"},
		},
		{
			// The file is as shown, but the session no longer saw it: the
			// policy decides again after the wait.
			name:  "the session forgotten",
			files: []string{"sub/a.txt = one\n"},
			read:  "a.txt",
			tool:  "write", args: map[string]any{"file_path": "a.txt", "content": "mine\n"},
			meanwhile: func(h *sb) {
				r, err := h.request(context.Background(), http.MethodDelete, "/sessions/s", "", "")
				require.NoError(h.t, err)
				require.Equal(h.t, http.StatusNoContent, r.Status)
			},
			code:   "FS_STALE_VERSION",
			output: "Error: cannot write \"$ROOT/sub/a.txt\": file changed since it was read \u2014 re-read the file, then retry",
			tree:   []string{"sub/", "sub/a.txt = one\n"},
		},
		{
			// The same bytes at a new version (a touch) are not stale
			// (docs/edits.md): the change shown still applies.
			name:  "the file touched",
			files: []string{"sub/a.txt = one\ntwo\n"},
			read:  "a.txt",
			tool:  "edit", args: map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "TWO"},
			meanwhile: func(h *sb) { h.file("sub/a.txt", "one\ntwo\n") },
			output:    "The file $ROOT/sub/a.txt has been updated successfully.",
			tree:      []string{"sub/", "sub/a.txt = one\nTWO\n"},
		},
		{
			name:  "nothing changed",
			files: []string{"sub/d/"},
			tool:  "write", args: map[string]any{"file_path": "d/new.txt", "content": "x\n"},
			meanwhile: func(*sb) {},
			output:    "<path>$ROOT/sub/d/new.txt</path>\n<type>file</type>\n<content>\nCreated file\n</content>",
			tree:      []string{"sub/", "sub/d/", "sub/d/new.txt = x\n"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
			for _, f := range tc.files {
				if strings.HasSuffix(f, "/") {
					require.NoError(t, os.MkdirAll(filepath.Join(h.srv.Root, f), 0o755))
					continue
				}
				rel, content, _ := strings.Cut(f, " = ")
				h.file(rel, content)
			}
			if tc.read != "" {
				require.Equal(t, http.StatusOK, h.tool("read", "sub", map[string]any{"file_path": tc.read}).Status)
			}
			answer := h.async(tc.tool, "sub", esc(tc.args))
			a := h.pending(1, "")[0]
			tc.meanwhile(h)
			require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
			r := wait(t, answer)
			want := strings.ReplaceAll(tc.output, "$ROOT", h.srv.Root)
			if tc.code == "" {
				require.Equal(t, http.StatusOK, r.Status, r.Body)
			} else {
				assert.Equal(t, tc.code, r.Code, r.Body)
			}
			assert.Equal(t, want, r.Output)

			var got []string
			for _, e := range h.tree() {
				if !strings.HasSuffix(e, "/") && !strings.Contains(e, " -> ") {
					e += " = " + h.contents(e)
				}
				got = append(got, e)
			}
			assert.Equal(t, tc.tree, got, "what the root holds afterwards")
		})
	}
}

// TestApprovalShowsTheDiff: a pending approval carries the call's change as
// a unified diff, as its dry run shows it (docs/edits.md), with truncated
// false; past 64 KiB the diff is cut after a whole line and truncated is
// true.
func TestApprovalShowsTheDiff(t *testing.T) {
	h := startSandbox(t, sbOptions{mode: tools.FenceReadOnly})
	h.file("ws/app.conf", "[server]\nport = 8080\ndebug = false\nlog = info\n")
	p := filepath.Join(h.srv.Root, "ws/app.conf")
	require.Equal(t, http.StatusOK, h.tool("read", "ws", map[string]any{"file_path": "app.conf"}).Status)
	show := func(tool string, args map[string]any) approval.Approval {
		t.Helper()
		args["sandbox_permissions"] = "danger-full-access"
		args["justification"] = "j"
		answer := h.async(tool, "ws", args)
		a := h.pending(1, "")[0]
		require.Equal(t, http.StatusNoContent, h.decide(a.ID, "reject", "").Status)
		assert.Equal(t, http.StatusForbidden, wait(t, answer).Status)
		return a
	}

	a := show("edit", map[string]any{"file_path": "app.conf", "old_string": "debug = false", "new_string": "debug = true"})
	assert.Equal(t, "--- "+p+"\n+++ "+p+"\n@@ -1,4 +1,4 @@\n [server]\n port = 8080\n-debug = false\n+debug = true\n log = info", a.Diff)
	assert.False(t, a.Truncated)

	a = show("write", map[string]any{"file_path": "app.conf", "content": "[server]\nport = 9090\ndebug = false\nlog = info\n"})
	assert.Equal(t, "--- "+p+"\n+++ "+p+"\n@@ -1,4 +1,4 @@\n [server]\n-port = 8080\n+port = 9090\n debug = false\n log = info", a.Diff)
	assert.False(t, a.Truncated)

	n := filepath.Join(h.srv.Root, "ws/new.txt")
	a = show("write", map[string]any{"file_path": "new.txt", "content": "one\ntwo"})
	assert.Equal(t, "--- "+n+"\n+++ "+n+"\n@@ -0,0 +1,2 @@\n+one\n+two", a.Diff)
	assert.False(t, a.Truncated)

	// 8,000 lines of 11 bytes: the diff passes 64 KiB.
	var content strings.Builder
	for i := range 8000 {
		fmt.Fprintf(&content, "line %05d\n", i)
	}
	big := filepath.Join(h.srv.Root, "ws/big.txt")
	header := "--- " + big + "\n+++ " + big + "\n@@ -0,0 +1,8000 @@"
	full := header + "\n+" + strings.ReplaceAll(strings.TrimSuffix(content.String(), "\n"), "\n", "\n+")
	a = show("write", map[string]any{"file_path": "big.txt", "content": content.String()})
	assert.True(t, a.Truncated)
	// As many whole lines ("\n+line 00000", 12 bytes each) as fit in 64 KiB.
	// (Compared by length and equality: a failure's dump would be 64 KiB.)
	lines := (approval.MaxDiffBytes - len(header)) / 12
	want := full[:len(header)+12*lines]
	require.Equal(t, len(want), len(a.Diff))
	assert.True(t, want == a.Diff, "the first %d lines of the dry run's diff", lines)
	assert.LessOrEqual(t, len(a.Diff), 65536)
}

// TestApprovedCallPinnedWithoutPolicy: with --policy=false too, an approved
// call runs only while the file is as its dry run found it.
func TestApprovedCallPinnedWithoutPolicy(t *testing.T) {
	o := sbServerOptions(sbOptions{mode: tools.FenceReadOnly})
	o.Policy.Enabled = false
	h := &sb{t: t, srv: servertest.Start(t, o)}
	p := filepath.Join(h.srv.Root, "a.txt")
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		meanwhile  string // written to a.txt ("one\n" at first) while pending; "" for nothing
		output     string
		after      string
	}{
		{"write, file changed", "write", map[string]any{"content": "mine\n"}, "theirs\n",
			"Error: cannot write \"" + p + "\": file changed since it was read \u2014 re-read the file, then retry", "theirs\n"},
		{"edit, file changed", "edit", map[string]any{"old_string": "one", "new_string": "ONE"}, "one\ntwo\n",
			"Error: cannot edit \"" + p + "\": file changed since it was read \u2014 re-read the file, then retry", "one\ntwo\n"},
		{"write, nothing changed", "write", map[string]any{"content": "mine\n"}, "",
			"<path>" + p + "</path>\n<type>file</type>\n<content>\nUpdated file\n</content>", "mine\n"},
		{"edit, nothing changed", "edit", map[string]any{"old_string": "one", "new_string": "ONE"}, "",
			"The file " + p + " has been updated successfully.", "ONE\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.file("a.txt", "one\n")
			args := map[string]any{"file_path": "a.txt", "sandbox_permissions": "workspace-write", "justification": "j"}
			for k, v := range tc.args {
				args[k] = v
			}
			answer := h.async(tc.tool, "", args)
			a := h.pending(1, "")[0]
			if tc.meanwhile != "" {
				h.file("a.txt", tc.meanwhile)
			}
			require.Equal(t, http.StatusNoContent, h.decide(a.ID, "approve", "").Status)
			assert.Equal(t, tc.output, wait(t, answer).Output)
			assert.Equal(t, tc.after, h.contents("a.txt"))
		})
	}
}
