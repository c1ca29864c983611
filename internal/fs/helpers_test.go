package fs

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// fixture is a workspace root and a folder beside it that must never be
// touched ("outside"), holding secret.txt.
type fixture struct {
	base, root, out string
	l               *Local
}

// newFixture builds a tree under root from compact specs, in the spirit of
// os/root_test.go:
//
//	"dir/"              a folder
//	"name"              a file whose content is its name
//	"name = content"    a file with that content
//	"link => target"    a symlink ($ROOT and $OUT expand to the root and outside)
//	"name |"            a FIFO
func newFixture(t *testing.T, specs ...string) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{base: base, root: filepath.Join(base, "root"), out: filepath.Join(base, "out")}
	require.NoError(t, os.Mkdir(f.root, 0o755))
	require.NoError(t, os.Mkdir(f.out, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.out, "secret.txt"), []byte("secret"), 0o644))
	f.build(t, specs...)
	l, err := NewLocal(f.root, LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	f.l = l
	return f
}

func (f *fixture) build(t *testing.T, specs ...string) {
	t.Helper()
	expand := strings.NewReplacer("$ROOT", f.root, "$OUT", f.out)
	for _, spec := range specs {
		switch {
		case strings.Contains(spec, " => "):
			name, target, _ := strings.Cut(spec, " => ")
			f.mkparent(t, name)
			require.NoError(t, os.Symlink(expand.Replace(target), f.path(name)))
		case strings.HasSuffix(spec, " |"):
			name := strings.TrimSuffix(spec, " |")
			f.mkparent(t, name)
			require.NoError(t, syscall.Mkfifo(f.path(name), 0o644))
		case strings.HasSuffix(spec, "/"):
			require.NoError(t, os.MkdirAll(f.path(spec), 0o755))
		default:
			name, content, ok := strings.Cut(spec, " = ")
			if !ok {
				content = name
			}
			f.mkparent(t, name)
			require.NoError(t, os.WriteFile(f.path(name), []byte(content), 0o644))
		}
	}
}

func (f *fixture) mkparent(t *testing.T, name string) {
	require.NoError(t, os.MkdirAll(filepath.Dir(f.path(name)), 0o755))
}

// path is the host path of a root-relative name.
func (f *fixture) path(rel string) string { return filepath.Join(f.root, rel) }

func (f *fixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(f.path(rel))
	require.NoError(t, err)
	return string(b)
}

func (f *fixture) resolve(t *testing.T, op, path string) Target {
	t.Helper()
	tg, err := f.l.Resolve(context.Background(), op, path, "")
	require.NoError(t, err)
	return tg
}

func (f *fixture) version(t *testing.T, tg Target) Version {
	t.Helper()
	info, err := f.l.Stat(context.Background(), tg)
	require.NoError(t, err)
	return info.Version
}

// assertClean checks that no temporary file is left anywhere in the root
// (its private folder included), that the outside folder is untouched, and
// that no lock entry survives.
func (f *fixture) assertClean(t *testing.T) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			assert.NotContains(t, strings.TrimPrefix(d.Name(), PrivateDir), ".toolfs-", "temporary file left behind at %s", p)
		}
		return nil
	}))
	entries, err := os.ReadDir(f.out)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "outside folder gained entries")
	b, err := os.ReadFile(filepath.Join(f.out, "secret.txt"))
	require.NoError(t, err)
	assert.Equal(t, "secret", string(b), "outside file was touched")
	assert.Zero(t, f.l.locks.size(), "lock map not empty")
}

// requireCode asserts err is a *fault.Error with code and message.
func requireCode(t *testing.T, err error, code fault.Code, msg string) {
	t.Helper()
	require.Error(t, err)
	var e *fault.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code)
	if msg != "" {
		assert.Equal(t, msg, e.Message)
	}
}

func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}

func umask(t *testing.T) os.FileMode {
	t.Helper()
	old := syscall.Umask(0o022)
	syscall.Umask(old)
	return os.FileMode(old)
}

// size is the number of live lock entries: 0 once no call holds a lock.
func (k *keyLocks) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
