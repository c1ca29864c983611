package tools_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// The diff-basis limit is the provider's alone: a create's dry-run diff is
// shown below the limit the provider was given and not at or above it,
// whatever the default.
func TestDiffBasisLimitIsTheProviders(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	local, err := fs.NewLocal(root, fs.LocalOptions{DiffBasisMaxBytes: 16})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	x := tools.New(tools.Options{FS: local, Gate: policy.NewStore(policy.Config{}), Caps: render.DefaultCaps()})
	c := tools.Call{Session: "s"}

	res, terr := x.Write(context.Background(), c, []byte(`{"file_path":"small.txt","content":"one\r\ntwo\n","dry_run":true}`))
	require.Nil(t, terr)
	assert.Equal(t, "Dry run: no changes were written to \""+filepath.Join(root, "small.txt")+"\".\n"+
		render.UnifiedDiff(filepath.Join(root, "small.txt"), "", "one\ntwo\n"), res.Output)

	big := strings.Repeat("x", 16)
	res, terr = x.Write(context.Background(), c, []byte(`{"file_path":"big.txt","content":"`+big+`","dry_run":true}`))
	require.Nil(t, terr)
	assert.Equal(t, "Dry run: no changes were written to \""+filepath.Join(root, "big.txt")+"\".\n"+
		"(The diff is not shown: the old or new text is 10 MiB or larger, or the old text is not UTF-8 text.)", res.Output)
}
