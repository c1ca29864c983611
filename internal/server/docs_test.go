package server_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the module's root, two folders above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// goPackages are the folders under internal/ and cmd/ that hold a package
// (a .go file that is not a test), relative to the root.
func goPackages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, top := range []string{"internal", "cmd"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			dir, _ := filepath.Rel(root, filepath.Dir(p))
			if !seen[dir] {
				seen[dir] = true
				out = append(out, dir)
			}
			return nil
		}))
	}
	return out
}

// TestArchitectureShowsEveryPackage: docs/architecture.md's table has one
// row for each package of the module under internal/ and cmd/, and no row
// for a package that is not there, and its drawing names each of them
// (issue 42 item 6: the map matches the house).
func TestArchitectureShowsEveryPackage(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	require.NoError(t, err)
	text := string(doc)
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9/_-]+)` \\|").FindAllStringSubmatch(text, -1) {
		rows[m[1]] = true
	}
	drawing := text[:strings.Index(text, "\n| package |")]
	for _, p := range goPackages(t, root) {
		assert.True(t, rows[p], "docs/architecture.md has no row for %s", p)
		assert.Contains(t, drawing, p, "docs/architecture.md's drawing does not show %s", p)
		delete(rows, p)
	}
	assert.Empty(t, rows, "rows of docs/architecture.md for packages that do not exist")
}

// citation is a doc section named in a comment or a string:
// docs/<file>.md, "<Section>" (the comma optional).
var citation = regexp.MustCompile(`docs/([a-z0-9_-]+\.md),?\s+\\?"([^"\\]+)\\?"`)

// TestDocCitationsResolve: every `docs/<file>.md, "<Section>"` that a Go
// comment or string of the module cites names a heading that file has (or
// its first words), or a paragraph it leads with that name in bold, so a
// reader sent there finds it (issue 42 item 6).
func TestDocCitationsResolve(t *testing.T) {
	root := repoRoot(t)
	headings := map[string]map[string]bool{}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, p := range docs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		h := map[string]bool{}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "#") {
				h[strings.TrimSpace(strings.TrimLeft(line, "#"))] = true
			}
			// A list item or paragraph led by a bold name is a section
			// too: docs/decisions.md is made of them.
			if m := boldLead.FindStringSubmatch(line); m != nil {
				h[strings.TrimRight(m[1], ".:")] = true
			}
		}
		headings[filepath.Base(p)] = h
	}
	checked := 0
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, p)
		// A comment's lines are joined, since a citation may break
		// between them.
		var texts []string
		for _, g := range f.Comments {
			texts = append(texts, strings.Join(strings.Fields(g.Text()), " "))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
				texts = append(texts, l.Value)
			}
			return true
		})
		for _, text := range texts {
			for _, m := range citation.FindAllStringSubmatch(text, -1) {
				checked++
				h, ok := headings[m[1]]
				if assert.True(t, ok, "%s cites docs/%s, which does not exist", rel, m[1]) {
					assert.True(t, names(h, m[2]), "%s cites docs/%s, %q: no such heading", rel, m[1], m[2])
				}
			}
		}
		return nil
	}))
	assert.Greater(t, checked, 100, "the citations were found")
}

// boldLead is a paragraph or list item led by its name in bold.
var boldLead = regexp.MustCompile(`^(?:- )?\*\*([^*]+)\*\*`)

// number is a heading's numbering ("5a. ").
var number = regexp.MustCompile(`^[0-9]+[a-z]?\. `)

// names reports whether a citation names one of headings: the heading
// itself, or its first words (numbering aside), as a citation shortens
// "Tolerant edits (extended profile)" to "Tolerant edits".
func names(headings map[string]bool, cited string) bool {
	for h := range headings {
		h = number.ReplaceAllString(h, "")
		if rest, ok := strings.CutPrefix(h, cited); ok && (rest == "" || strings.ContainsRune(" (:,", rune(rest[0]))) {
			return true
		}
	}
	return false
}
