package patch

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// codexDiffers are the scenarios whose expected state SPEC §25 decides
// otherwise than Codex (docs/edits.md, "Codex's fixtures"): the state we
// expect instead, by file.
var codexDiffers = map[string]map[string]string{
	// The final newline is kept as the file had it.
	"014_update_file_appends_trailing_newline": {"no_newline.txt": "first line\nsecond line"},
	// All or nothing: the add before the failing update is not published.
	"015_failure_after_partial_success_leaves_changes": {},
}

// TestCodexScenarios runs Codex's own fixtures (testdata/codex-scenarios,
// its README says whence) through Parse and Apply, over a tree in memory
// published all or nothing, as the executor publishes a patch: every case
// ends in its expected state, except codexDiffers.
func TestCodexScenarios(t *testing.T) {
	root := "testdata/codex-scenarios"
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			dir := filepath.Join(root, e.Name())
			in := readTree(t, filepath.Join(dir, "input"))
			want := readTree(t, filepath.Join(dir, "expected"))
			if d, ok := codexDiffers[e.Name()]; ok {
				want = d
			}
			text, err := os.ReadFile(filepath.Join(dir, "patch.txt"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := applyTree(in, string(text))
			if err != nil {
				got = in
				t.Logf("refused: %v", err)
			}
			if !maps.Equal(got, want) {
				t.Errorf("tree after the patch:\n got %q\nwant %q", got, want)
			}
		})
	}
	if n != 23 {
		t.Errorf("%d scenarios, want the 23 copied", n)
	}
}

// readTree is every regular file under dir, by slash path ("" → none).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// applyTree applies text to the tree of files in, all or nothing: every
// operation is checked and computed first, then all are published. A
// folder is any prefix of a file's path.
func applyTree(in map[string]string, text string) (map[string]string, error) {
	p, err := Parse(text)
	if err != nil {
		return nil, err
	}
	isDir := func(name string) bool {
		return slices.ContainsFunc(slices.Collect(maps.Keys(in)), func(k string) bool { return strings.HasPrefix(k, name+"/") })
	}
	out := maps.Clone(in)
	type write struct {
		path, content string
		remove        string
	}
	var writes []write
	for _, f := range p.Files {
		name := path.Clean(f.Path)
		switch f.Op {
		case OpAdd:
			if isDir(name) {
				return nil, errors.New("add over a folder")
			}
			writes = append(writes, write{path: name, content: f.Content})
		case OpDelete:
			if _, ok := in[name]; !ok {
				return nil, errors.New("delete of a missing file or a folder")
			}
			writes = append(writes, write{remove: name})
		case OpUpdate:
			old, ok := in[name]
			if !ok {
				return nil, errors.New("update of a missing file")
			}
			r, err := Apply([]byte(old), f.Hunks, name)
			if err != nil {
				return nil, err
			}
			if f.MoveTo != "" {
				writes = append(writes, write{remove: name}, write{path: path.Clean(f.MoveTo), content: string(r.Content)})
			} else {
				writes = append(writes, write{path: name, content: string(r.Content)})
			}
		}
	}
	for _, w := range writes {
		if w.remove != "" {
			delete(out, w.remove)
		} else {
			out[w.path] = w.content
		}
	}
	return out, nil
}
