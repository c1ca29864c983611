package checkpoint

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
	tfs "github.com/toolfs/toolfs-api/internal/fs"
)

// fixture is a workspace root with a provider and a checkpoint store on it.
type fixture struct {
	t    *testing.T
	root string
	opts Options
	l    *tfs.Local
	s    *Store
}

func newFixture(t *testing.T, opts Options, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{t: t, root: t.TempDir(), opts: opts}
	for name, content := range files {
		f.put(name, content)
	}
	f.open()
	t.Cleanup(f.close)
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	l, err := tfs.NewLocal(f.root, tfs.LocalOptions{SweepInterval: -1})
	require.NoError(f.t, err)
	opts := f.opts
	opts.FS = l
	s, err := Open(context.Background(), opts)
	require.NoError(f.t, err)
	f.l, f.s = l, s
}

func (f *fixture) close() {
	if f.s != nil {
		f.s.Close()
		f.l.Close()
		f.s, f.l = nil, nil
	}
}

// reopen closes the store and the provider and opens them again, as a
// restart does.
func (f *fixture) reopen() {
	f.t.Helper()
	f.close()
	f.open()
}

func (f *fixture) path(rel string) string { return filepath.Join(f.root, rel) }

// put writes a file as a person would, outside the server.
func (f *fixture) put(rel, content string) {
	f.t.Helper()
	require.NoError(f.t, os.MkdirAll(filepath.Dir(f.path(rel)), 0o755))
	require.NoError(f.t, os.WriteFile(f.path(rel), []byte(content), 0o644))
}

func (f *fixture) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(f.path(rel))
	require.NoError(f.t, err)
	return string(b)
}

func (f *fixture) target(rel string) tfs.Target {
	f.t.Helper()
	tg, err := f.l.Resolve(context.Background(), "write", rel, "")
	require.NoError(f.t, err)
	return tg
}

// write is a recorded write by session (unconditional: the policy is not
// this package's).
func (f *fixture) write(session, rel, content string) {
	f.t.Helper()
	_, err := f.l.WriteText(context.Background(), f.target(rel), content, &tfs.WriteIntent{Keeper: f.s.Recording(session, "write")})
	require.NoError(f.t, err)
}

// edit is a recorded edit (a batch when more than one pair is given).
func (f *fixture) edit(session, rel string, pairs ...string) {
	f.t.Helper()
	req := tfs.EditRequest{OldString: pairs[0], NewString: pairs[1], Keeper: f.s.Recording(session, "edit")}
	if len(pairs) > 2 {
		req = tfs.EditRequest{Keeper: req.Keeper, Batch: []tfs.Edit{}}
		for i := 0; i < len(pairs); i += 2 {
			req.Batch = append(req.Batch, tfs.Edit{OldString: pairs[i], NewString: pairs[i+1]})
		}
	}
	_, err := f.l.EditText(context.Background(), f.target(rel), req, nil)
	require.NoError(f.t, err)
}

func (f *fixture) revert(session string, to int64, dryRun bool) (*Result, error) {
	return f.s.Revert(context.Background(), session, to, dryRun)
}

func (f *fixture) changes(session string) []Change {
	f.t.Helper()
	cs, err := f.s.Changes(context.Background(), session)
	require.NoError(f.t, err)
	return cs
}

// snapshot is every file of the root outside the private folder, with its
// content.
func (f *fixture) snapshot() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	require.NoError(f.t, filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(f.t, err)
		rel, _ := filepath.Rel(f.root, p)
		if rel == tfs.PrivateDir {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(f.t, err)
			out[rel] = string(b)
		}
		return nil
	}))
	return out
}

// blobs lists the kept contents and their total size.
func (f *fixture) blobs() (names []string, total int64) {
	f.t.Helper()
	entries, err := os.ReadDir(f.path(tfs.PrivateDir + "/checkpoints/blobs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0
	}
	require.NoError(f.t, err)
	for _, e := range entries {
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // the collector removed it after the listing
		}
		require.NoError(f.t, err)
		names = append(names, e.Name())
		total += info.Size()
	}
	sort.Strings(names)
	return names, total
}

// requireCode asserts err is a *fault.Error with code and, unless "",
// message, and returns its Refusal (zero when it has none).
func requireCode(t *testing.T, err error, code fault.Code, msg string) *Refusal {
	t.Helper()
	var e *fault.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code)
	if msg != "" {
		assert.Equal(t, msg, e.Message)
	}
	r := &Refusal{}
	errors.As(err, &r)
	return r
}

// seqsOf is the listing as "seq tool path" lines.
func seqsOf(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, strings.Join([]string{itoa(c.Seq), c.Tool, c.Path}, " "))
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sumOf is the SHA-256 of s, as a Keeper's Prepare hears of new content.
func sumOf(s string) *[32]byte {
	sum := sha256.Sum256([]byte(s))
	return &sum
}
