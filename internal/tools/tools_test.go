package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// record is an Observer that keeps what it was told.
type record struct {
	mu      sync.Mutex
	calls   []string // "transport tool code"
	footers []string
	stats   int
	cache   map[string]int // "window hit", "index miss", ...
}

func (r *record) ToolCall(transport, tool string, code fault.Code, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, transport+" "+tool+" "+string(code))
}
func (r *record) ReadFooter(f string)     { r.mu.Lock(); r.footers = append(r.footers, f); r.mu.Unlock() }
func (r *record) StaleVersion(string)     {}
func (r *record) Revert(string)           {}
func (r *record) Approval(string, string) {}
func (r *record) StatCall()               { r.mu.Lock(); r.stats++; r.mu.Unlock() }
func (r *record) SessionStoreError(string) {
}
func (r *record) CacheLookup(cache string, hit bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cache == nil {
		r.cache = map[string]int{}
	}
	if hit {
		r.cache[cache+" hit"]++
	} else {
		r.cache[cache+" miss"]++
	}
}

func newExecutor(t *testing.T, gate policy.Gate) (*tools.Executor, *record, string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	rec := &record{}
	return tools.New(tools.Options{FS: local, Gate: gate, Caps: render.DefaultCaps(), Observer: rec}), rec, root
}

// TestExecutorWithoutHTTP drives the executor as a non-HTTP transport would
// (an MCP endpoint, say): raw arguments in, the model's text out, the same
// metrics under its own transport label.
func TestExecutorWithoutHTTP(t *testing.T) {
	x, rec, root := newExecutor(t, policy.NewStore(policy.Config{}))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\ntwo\n"), 0o644))
	ctx := context.Background()
	c := tools.Call{Session: "m1", Transport: "mcp"}

	rd, err := x.Read(ctx, c, []byte(`{"file_path":"a.txt","offset":null}`))
	require.Nil(t, err)
	res, err := rd.Window(ctx)
	require.Nil(t, err)
	p := filepath.Join(root, "a.txt")
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\n1: one\n2: two\n\n(End of file - total 2 lines)\n</content>", res.Output())

	w, err := x.Edit(ctx, c, []byte(`{"file_path":"a.txt","old_string":"two","new_string":"2"}`))
	require.Nil(t, err)
	assert.Equal(t, "The file "+p+" has been updated successfully.", w.Output)

	_, err = x.Write(ctx, tools.Call{Transport: "mcp"}, []byte(`{"file_path":"a.txt","content":"x"}`))
	require.NotNil(t, err)
	assert.Equal(t, fault.CodeInvalidSession, err.Code)
	assert.True(t, strings.HasPrefix(tools.Output(err), "Error: write and edit need a session"), tools.Output(err))

	_, err = x.Write(ctx, tools.Call{Session: "m2", Transport: "mcp"}, []byte(`{"file_path":"a.txt","content":"x"}`))
	require.NotNil(t, err)
	assert.Equal(t, fault.CodeNotObserved, err.Code)
	assert.Equal(t, `Error: cannot overwrite existing "`+p+`" without reading it first — read the file, then retry`, tools.Output(err))

	_, err = x.Read(ctx, c, []byte(`{"file_path":"a.txt","file_path":"b.txt"}`))
	require.NotNil(t, err)
	assert.Equal(t, `Error: request body has a duplicate key "file_path"`, tools.Output(err))

	assert.Equal(t, []string{"mcp read ok", "mcp edit ok", "mcp write INVALID_SESSION", "mcp write FS_NOT_OBSERVED", "mcp read INVALID_ARGUMENT"}, rec.calls)
	assert.Equal(t, []string{"eof"}, rec.footers)
	assert.Equal(t, 1, rec.stats, "one Stat for the read, none for the edit and writes")
	b, _ := os.ReadFile(p)
	assert.Equal(t, "one\n2\n", string(b))
}

// sink is a LineSink that keeps the text.
type sink struct {
	b     strings.Builder
	begun bool
}

func (s *sink) Begin(h string) error { s.begun = true; s.b.WriteString(h); return nil }
func (s *sink) Lines(ls []render.Line) error {
	for _, l := range ls {
		fmt.Fprintf(&s.b, "%d: %s\n", l.Number, l.Text)
	}
	return nil
}
func (s *sink) End(tail string) error { s.b.WriteString(tail); return nil }

// TestStreamEqualsWindow: a streamed read writes exactly the output of the
// whole window, and a failure before the first line begins nothing.
func TestStreamEqualsWindow(t *testing.T) {
	x, _, root := newExecutor(t, nil)
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		b.WriteString("a line of text\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "s.txt"), []byte(b.String()), 0o644))
	ctx := context.Background()
	args := []byte(`{"file_path":"s.txt","offset":10,"limit":300}`)

	rd, err := x.Read(ctx, tools.Call{}, args)
	require.Nil(t, err)
	whole, err := rd.Window(ctx)
	require.Nil(t, err)
	rd, err = x.Read(ctx, tools.Call{}, args)
	require.Nil(t, err)
	var s sink
	begun, err := rd.Stream(ctx, &s)
	require.Nil(t, err)
	assert.True(t, begun)
	assert.Equal(t, whole.Output(), s.b.String())

	rd, err = x.Read(ctx, tools.Call{}, []byte(`{"file_path":"s.txt","offset":9999}`))
	require.Nil(t, err)
	var s2 sink
	begun, err = rd.Stream(ctx, &s2)
	require.NotNil(t, err)
	assert.False(t, begun || s2.begun)
	assert.Equal(t, fault.CodeNotFound, err.Code)
}

// TestImportsNothingHTTP: the executor must stay transport-neutral
// (docs/architecture.md).
func TestImportsNothingHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"net/http", "github.com/toolfs/toolfs-api/api", "github.com/toolfs/toolfs-api/internal/handlers", "github.com/prometheus/"} {
			assert.False(t, dep == banned || strings.HasPrefix(dep, banned+"/") || strings.HasPrefix(banned, "github.com/prometheus/") && strings.HasPrefix(dep, banned), "internal/tools depends on %s", dep)
		}
	}
}

// TestAnnotations pins the hints every MCP view of the catalog carries
// (docs/mcp.md): read-only for read, glob and grep; destructive for write and
// edit (and edit_lines), move and delete; mkdir neither, its
// destructiveHint false said since MCP reads an absent one as true; never
// open-world.
func TestAnnotations(t *testing.T) {
	want := map[string]string{
		"read":        `{"readOnlyHint":true,"openWorldHint":false}`,
		"write":       `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
		"edit":        `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
		"edit_lines":  `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
		"apply_patch": `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
		"glob":        `{"readOnlyHint":true,"openWorldHint":false}`,
		"grep":        `{"readOnlyHint":true,"openWorldHint":false}`,
		"move":        `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
		"delete":      `{"readOnlyHint":false,"destructiveHint":true,"openWorldHint":false}`,
		"mkdir":       `{"readOnlyHint":false,"destructiveHint":false,"openWorldHint":false}`,
	}
	for _, name := range tools.Names {
		got, err := json.Marshal(tools.AnnotationsOf(name))
		require.NoError(t, err)
		assert.Equal(t, want[name], string(got), name)
	}
	assert.Len(t, want, len(tools.Names))
}

// TestRunByName: Run dispatches by tool name and gives a read's whole
// answer, as a text transport needs it.
func TestRunByName(t *testing.T) {
	x, rec, root := newExecutor(t, policy.NewStore(policy.Config{}))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	ctx := context.Background()
	c := tools.Call{Session: "r", Transport: "mcp"}
	res, err := x.Run(ctx, c, "read", []byte(`{"file_path":"a.txt"}`))
	require.Nil(t, err)
	assert.Equal(t, "<path>"+filepath.Join(root, "a.txt")+"</path>\n<type>file</type>\n<content>\n1: one\n\n(End of file - total 1 lines)\n</content>", res.Output)
	assert.Equal(t, 1, res.Metadata.(tools.ReadMetadata).TotalLines)
	res, err = x.Run(ctx, c, "write", []byte(`{"file_path":"a.txt","content":"two\n"}`))
	require.Nil(t, err)
	assert.Equal(t, "<path>"+filepath.Join(root, "a.txt")+"</path>\n<type>file</type>\n<content>\nUpdated file\n</content>", res.Output)
	_, err = x.Run(ctx, c, "rename", []byte(`{}`))
	require.NotNil(t, err)
	assert.Equal(t, `Error: unknown tool "rename"`, tools.Output(err))
	assert.Equal(t, []string{"mcp read ok", "mcp write ok"}, rec.calls)
}
