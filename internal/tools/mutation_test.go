package tools_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// OnMutation hears of every successful write and edit, with the answer's
// diffs and the new version, and of nothing else (docs/events.md).
func TestOnMutation(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	var heard []tools.Mutation
	x := tools.New(tools.Options{FS: local, Gate: policy.NewStore(policy.Config{}), Caps: render.DefaultCaps(),
		OnMutation: func(m tools.Mutation) { heard = append(heard, m) }})
	ctx := context.Background()
	c := tools.Call{Session: "s1", Transport: "mcp"}

	w, terr := x.Write(ctx, c, []byte(`{"file_path":"a.txt","content":"one\ntwo\n"}`))
	require.Nil(t, terr)
	e, terr := x.Edit(ctx, c, []byte(`{"file_path":"a.txt","old_string":"two","new_string":"2"}`))
	require.Nil(t, terr)
	_, terr = x.Edit(ctx, c, []byte(`{"file_path":"a.txt","old_string":"absent","new_string":"x"}`))
	require.NotNil(t, terr, "a failed edit is not heard of")
	_, terr = x.Write(ctx, tools.Call{Session: "s2"}, []byte(`{"file_path":"a.txt","content":"x"}`))
	require.NotNil(t, terr, "a refused write is not heard of")
	_, terr = x.Edit(ctx, c, []byte(`{"file_path":"a.txt","old_string":"one","new_string":"1","dry_run":true}`))
	require.Nil(t, terr, "a dry run changes nothing and is not heard of")

	require.Len(t, heard, 2)
	assert.Equal(t, tools.ToolWrite, heard[0].Tool)
	assert.Equal(t, tools.ToolEdit, heard[1].Tool)
	for _, m := range heard {
		assert.Equal(t, "s1", m.Session)
		assert.Equal(t, fs.TargetKey(filepath.Join(root, "a.txt")), m.Target.Key)
		assert.NotEmpty(t, m.Version)
	}
	assert.Equal(t, w.Metadata.(tools.WriteMetadata).Diffs, heard[0].Diffs)
	assert.Equal(t, []render.Diff{}, heard[0].Diffs)
	assert.Equal(t, e.Metadata.(tools.EditMetadata).Diffs, heard[1].Diffs)
	assert.Equal(t, "one\n2", heard[1].Diffs[0].NewText)
	assert.NotEqual(t, heard[0].Version, heard[1].Version)
}
