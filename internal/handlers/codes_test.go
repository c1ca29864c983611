package handlers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// faultCodes parses internal/fault (go/parser, no build) and returns every
// constant of type Code: name → value.
func faultCodes(t *testing.T) map[string]fault.Code {
	t.Helper()
	names, err := filepath.Glob("../fault/*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	codes := map[string]fault.Code{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, n := range v.Names {
					lit := v.Values[i].(*ast.BasicLit)
					val, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					codes[n.Name] = fault.Code(val)
				}
			}
		}
	}
	require.NotEmpty(t, codes, "the parse found internal/fault's codes")
	return codes
}

// TestEveryCodeHasAStatus: adding a code is one constant in internal/fault
// and one row of statusByCode; every constant has its row, every row is a
// constant, and no two constants share a value.
func TestEveryCodeHasAStatus(t *testing.T) {
	codes := faultCodes(t)
	seen := map[fault.Code]string{}
	for name, c := range codes {
		if other, dup := seen[c]; dup {
			t.Errorf("%s and %s are both %q", name, other, c)
		}
		seen[c] = name
		s, ok := statusByCode[c]
		if assert.True(t, ok, "fault.%s (%s) has no row in statusByCode", name, c) {
			assert.True(t, s == 499 || s >= 400 && s <= 599 && http.StatusText(s) != "", "fault.%s: status %d", name, s)
		}
	}
	for c := range statusByCode {
		_, ok := seen[c]
		assert.True(t, ok, "statusByCode row %q is no constant of internal/fault", c)
	}
}

// TestDocumentedStatusesMatchTheTable: docs/api.md's status table lists
// exactly statusByCode, and every "CODE (status" api/openapi.yaml mentions
// is the table's.
func TestDocumentedStatusesMatchTheTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	row := regexp.MustCompile(`(?m)^\| (\d{3}) \| (.*) \|$`)
	code := regexp.MustCompile("^`([A-Z][A-Z_]+)`")
	documented := map[fault.Code]int{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		status, _ := strconv.Atoi(m[1])
		for _, item := range splitTopLevel(m[2]) {
			if c := code.FindStringSubmatch(item); c != nil {
				documented[fault.Code(c[1])] = status
			}
		}
	}
	assert.Equal(t, statusByCode, documented, "docs/api.md, \"Errors\"")

	spec, err := os.ReadFile("../../api/openapi.yaml")
	require.NoError(t, err)
	mention := regexp.MustCompile(`\b([A-Z][A-Z_]{3,}) \((\d{3})`)
	ms := mention.FindAllStringSubmatch(string(spec), -1)
	require.NotEmpty(t, ms)
	for _, m := range ms {
		status, _ := strconv.Atoi(m[2])
		s, ok := statusByCode[fault.Code(m[1])]
		if assert.True(t, ok, "api/openapi.yaml names %s, no code", m[1]) {
			assert.Equal(t, s, status, "api/openapi.yaml: %s", m[1])
		}
	}
}

// splitTopLevel splits a table cell at the commas outside parentheses.
func splitTopLevel(cell string) []string {
	var items []string
	depth, start := 0, 0
	for i, r := range cell {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, strings.TrimSpace(cell[start:i]))
				start = i + 1
			}
		}
	}
	return append(items, strings.TrimSpace(cell[start:]))
}
