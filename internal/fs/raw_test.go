package fs

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRawVersions: a write's and an edit's outcomes carry the exact bytes
// of the versions, CRLF and other encodings kept, where the diff bases are
// LF-normalized or absent (docs/diagnostics.md, "Placeholders, the working folder and the two versions").
func TestRawVersions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	crlf := "a\r\nb\r\n"
	require.NoError(t, os.WriteFile(f.path("crlf.sh"), []byte(crlf), 0o644))
	latin1 := "caf\xe9\n"
	require.NoError(t, os.WriteFile(f.path("latin1.txt"), []byte(latin1), 0o644))

	out, err := f.l.WriteText(ctx, f.resolve(t, "write", "crlf.sh"), "x\r\n", nil)
	require.NoError(t, err)
	require.NotNil(t, out.Before)
	require.NotNil(t, out.BeforeRaw)
	assert.Equal(t, "a\nb\n", *out.Before)
	assert.Equal(t, crlf, *out.BeforeRaw)

	out, err = f.l.WriteText(ctx, f.resolve(t, "write", "latin1.txt"), "café\n", nil)
	require.NoError(t, err)
	assert.Nil(t, out.Before, "no diff basis for bytes that are not UTF-8")
	require.NotNil(t, out.BeforeRaw)
	assert.Equal(t, latin1, *out.BeforeRaw)

	out, err = f.l.WriteText(ctx, f.resolve(t, "write", "new.txt"), "n", nil)
	require.NoError(t, err)
	assert.Nil(t, out.BeforeRaw, "a create has no version before")

	require.NoError(t, os.WriteFile(f.path("e.sh"), []byte(crlf), 0o644))
	eo, err := f.l.EditText(ctx, f.resolve(t, "edit", "e.sh"), EditRequest{OldString: "b", NewString: "c"}, nil)
	require.NoError(t, err)
	require.NotNil(t, eo.BeforeRaw)
	require.NotNil(t, eo.AfterRaw)
	assert.Equal(t, crlf, *eo.BeforeRaw)
	assert.Equal(t, "a\r\nc\r\n", *eo.AfterRaw)
	assert.Equal(t, "a\nc\n", *eo.After)

	eo, err = f.l.EditText(ctx, f.resolve(t, "edit", "e.sh"), EditRequest{Batch: []Edit{{OldString: "a\n", NewString: "z\n"}}}, nil)
	require.NoError(t, err)
	require.NotNil(t, eo.BeforeRaw)
	assert.Equal(t, "a\r\nc\r\n", *eo.BeforeRaw)
	assert.Equal(t, "z\r\nc\r\n", *eo.AfterRaw, "the batch's CRLF adaptation is in the exact bytes")
	assert.Equal(t, "z\r\nc\r\n", f.read(t, "e.sh"))
}
