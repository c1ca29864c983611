package tools

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
)

// A new kind of change is a plan plus its provider step and nothing else
// (SPEC §24, docs/architecture.md "The change pipeline"). writeAll is one,
// for tests only: several files written in one call, all or nothing. It
// names its targets, what the policy asks of them (a write's intent) and
// that it is a change of several files, and supplies each file's new
// content; whether it is fenced, audited, checkpointed and published is
// the pipeline's, as TestNewKindOfChange shows.
func (x *Executor) writeAll(ctx context.Context, c Call, paths, contents []string) (stepOut, *fault.Error) {
	return x.apply(ctx, &change{tool: "write_all", call: c.started(), paths: paths, verb: "write", asks: askWrite, several: true,
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			out := stepOut{files: make([]outcome, len(in.targets))}
			for i, t := range in.targets {
				content := contents[i]
				out.files[i] = outcome{target: t, fill: func(w io.Writer) error { _, err := io.WriteString(w, content); return err }}
			}
			return out, nil
		}})
}

// kindFixture is an executor with every part of the pipeline real: the
// local provider on a temporary root, the policy, the checkpoint store,
// the audit log, and the change feed's two hooks.
type kindFixture struct {
	x         *Executor
	root      string
	ckpt      *checkpoint.Store
	auditPath string
	mu        sync.Mutex
	announced []string // BeforeMutation
	published []Mutation
}

func newKindFixture(t *testing.T, fence Fence) *kindFixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	ck, err := checkpoint.Open(context.Background(), checkpoint.Options{FS: local})
	require.NoError(t, err)
	t.Cleanup(func() { ck.Close() })
	f := &kindFixture{root: root, ckpt: ck, auditPath: filepath.Join(t.TempDir(), "audit.log")}
	lg, err := audit.Open(f.auditPath, audit.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	f.x = New(Options{FS: local, Gate: policy.NewStore(policy.Config{}), Caps: render.DefaultCaps(), Fence: fence,
		Checkpoints: ck, Audit: lg,
		BeforeMutation: func(t fs.Target) { f.mu.Lock(); f.announced = append(f.announced, t.Display); f.mu.Unlock() },
		OnMutation:     func(m Mutation) { f.mu.Lock(); f.published = append(f.published, m); f.mu.Unlock() }})
	return f
}

func (f *kindFixture) put(t *testing.T, rel, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(f.root, rel)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.root, rel), []byte(content), 0o644))
}

func (f *kindFixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, rel))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	require.NoError(t, err)
	return string(b)
}

func (f *kindFixture) auditLines(t *testing.T) []audit.Record {
	t.Helper()
	b, err := os.ReadFile(f.auditPath)
	require.NoError(t, err)
	var out []audit.Record
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r audit.Record
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		out = append(out, r)
	}
	return out
}

// TestNewKindOfChange: writeAll, a plan and its step, is judged by the
// policy (an existing file unread is refused, nothing written), fenced
// (read-only refuses it; workspace-write only under the session's cwd),
// checkpointed as one change of the history (one seq; a revert undoes it
// whole), audited (a record per file, with its states), announced and
// published on the change feed (an event per file), and counted, with no
// line of its own for any of it.
func TestNewKindOfChange(t *testing.T) {
	ctx := context.Background()
	c := Call{Session: "s", Transport: "test"}

	// The policy: b.txt exists and the session has not read it.
	f := newKindFixture(t, FenceOff)
	f.put(t, "b.txt", "b0\n")
	_, err := f.x.writeAll(ctx, c, []string{"a.txt", "b.txt"}, []string{"a1\n", "b1\n"})
	require.NotNil(t, err)
	assert.Equal(t, fault.CodeNotObserved, err.Code)
	assert.Equal(t, `cannot overwrite existing "`+filepath.Join(f.root, "b.txt")+`" without reading it first — read the file, then retry`, err.Message)
	assert.Equal(t, "<absent>", f.read(t, "a.txt"), "nothing written: every file is checked before any is published")
	assert.Empty(t, f.published)
	f.announced = nil // announced, as a write refused under its lock is

	// Read, then the change: both files, one seq.
	rd, err := f.x.Read(ctx, c, []byte(`{"file_path":"b.txt"}`))
	require.Nil(t, err)
	_, err = rd.Window(ctx)
	require.Nil(t, err)
	out, err := f.x.writeAll(ctx, c, []string{"a.txt", "b.txt"}, []string{"a1\n", "b1\n"})
	require.Nil(t, err)
	require.Len(t, out.files, 2)
	assert.Equal(t, "a1\n", f.read(t, "a.txt"))
	assert.Equal(t, "b1\n", f.read(t, "b.txt"))

	// Checkpointed: one change of the history, one seq.
	cs, cerr := f.ckpt.Changes(ctx, "s")
	require.NoError(t, cerr)
	require.Len(t, cs, 2)
	for _, ch := range cs {
		assert.Equal(t, int64(1), ch.Seq)
		assert.Equal(t, "write_all", ch.Tool)
	}
	// Audited: a record per file, with the states around it.
	recs := f.auditLines(t)
	require.Len(t, recs, 2)
	assert.Equal(t, "write_all", recs[0].Tool)
	assert.Equal(t, "a.txt", recs[0].Path)
	assert.Nil(t, recs[0].Before, "created")
	assert.Equal(t, "b.txt", recs[1].Path)
	require.NotNil(t, recs[1].Before)
	assert.Equal(t, int64(3), recs[1].Before.Bytes)
	assert.Equal(t, string(out.files[1].version), recs[1].After.Version)
	// Announced, then published: an event per file, with its new version.
	assert.Equal(t, []string{filepath.Join(f.root, "a.txt"), filepath.Join(f.root, "b.txt")}, f.announced)
	require.Len(t, f.published, 2)
	assert.Equal(t, "write_all", f.published[1].Tool)
	assert.Equal(t, out.files[1].version, f.published[1].Version)
	// The session knows what it wrote: it may write b.txt again unread.
	_, err = f.x.Write(ctx, c, []byte(`{"file_path":"b.txt","content":"b2\n"}`))
	require.Nil(t, err)

	// The history's revert undoes the write, then the whole change.
	_, err = f.x.Revert(ctx, Call{Transport: "test"}, "s", []byte(`{"to":0}`))
	require.Nil(t, err)
	assert.Equal(t, "<absent>", f.read(t, "a.txt"))
	assert.Equal(t, "b0\n", f.read(t, "b.txt"))

	// Fenced: read-only refuses it whole.
	ro := newKindFixture(t, FenceReadOnly)
	_, err = ro.x.writeAll(ctx, c, []string{"a.txt", "b.txt"}, []string{"a1\n", "b1\n"})
	require.NotNil(t, err)
	assert.Equal(t, fault.CodeSandboxDenied, err.Code)
	assert.Equal(t, fenceDenied(FenceReadOnly).Message, err.Message)
	assert.Equal(t, "<absent>", ro.read(t, "a.txt"))
	assert.Empty(t, ro.published)

	// workspace-write: under the session's cwd only, one file outside
	// refuses the whole change.
	ww := newKindFixture(t, FenceWorkspaceWrite)
	require.NoError(t, os.Mkdir(filepath.Join(ww.root, "in"), 0o755))
	cw := Call{Session: "s", Cwd: "in", Transport: "test"}
	_, err = ww.x.writeAll(ctx, cw, []string{"x.txt", "../y.txt"}, []string{"x\n", "y\n"})
	require.NotNil(t, err)
	assert.Equal(t, fault.CodeSandboxDenied, err.Code)
	assert.Equal(t, "<absent>", ww.read(t, "in/x.txt"))
	_, err = ww.x.writeAll(ctx, cw, []string{"x.txt", "sub/y.txt"}, []string{"x\n", "y\n"})
	require.Nil(t, err)
	assert.Equal(t, "y\n", ww.read(t, "in/sub/y.txt"))
}
