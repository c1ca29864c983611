package server_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/toolfs/toolfs-api"

// ours are the module's packages each package may import, as
// docs/architecture.md's table says: the arrows point one way, the binary
// knows only the builder, a transport reaches the provider, the policy and
// the approvals only through the executor, and every package may import the
// leaf internal/fault.
var ours = map[string][]string{
	"api":                        nil,
	"cmd/toolfs-api":             {"internal/server"},
	"internal/server":            {"internal/approval", "internal/audit", "internal/sandbox", "internal/checkpoint", "internal/console", "internal/diagnostics", "internal/events", "internal/fs", "internal/handlers", "internal/identity", "internal/journal", "internal/mcp", "internal/media", "internal/metrics", "internal/policy", "internal/render", "internal/search", "internal/telemetry", "internal/tools"},
	"internal/handlers":          {"api", "internal/events", "internal/identity", "internal/render", "internal/telemetry", "internal/tools"},
	"internal/mcp":               {"internal/identity", "internal/jsonscan", "internal/render", "internal/telemetry", "internal/tools"},
	"internal/metrics":           {"internal/tools"},
	"internal/tools":             {"internal/approval", "internal/audit", "internal/checkpoint", "internal/diagnostics", "internal/fs", "internal/journal", "internal/jsonscan", "internal/media", "internal/patch", "internal/policy", "internal/render", "internal/search"},
	"internal/events":            {"internal/fs", "internal/render"},
	"internal/search":            {"internal/fs", "internal/sandbox"},
	"internal/sandbox":           nil,
	"internal/diagnostics":       {"internal/fs", "internal/render", "internal/sandbox"},
	"internal/checkpoint":        {"internal/fs", "internal/journal", "internal/render"},
	"internal/policy":            {"internal/fs"},
	"internal/approval":          nil,
	"internal/identity":          nil,
	"internal/audit":             nil,
	"internal/console":           nil,
	"internal/journal":           nil,
	"internal/telemetry":         nil,
	"internal/hydratest":         nil,
	"internal/render":            nil,
	"internal/fs":                {"internal/textnorm"},
	"internal/patch":             {"internal/textnorm"},
	"internal/textnorm":          nil,
	"internal/jsonscan":          nil,
	"internal/media":             nil,
	"internal/fault":             nil,
	"internal/redistest":         nil,
	"internal/server/servertest": {"internal/server"},
	"bench":                      {"internal/server"},
	"test/proxy/check":           nil,
}

// everywhere may be imported by every package: internal/fault, the one
// vocabulary of failures (docs/architecture.md, "Where each kind of change goes").
var everywhere = "internal/fault"

// prometheus may be imported only where series are defined.
var prometheusAt = []string{"internal/metrics", "internal/events"}

// otelAt may import OpenTelemetry: the traces are made in one place
// (docs/running.md, "Traces").
var otelAt = []string{"internal/telemetry"}

// TestImportsFollowTheArrows parses every package's non-test files (go/parser,
// no build, no network) and checks the imports of ours against the table
// above, that only the metrics packages import Prometheus and only
// internal/telemetry OpenTelemetry. A package the
// table does not know fails, so a new one is placed on purpose.
func TestImportsFollowTheArrows(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	imports := map[string]map[string]bool{} // package dir → imported paths
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir = filepath.ToSlash(dir)
		if imports[dir] == nil {
			imports[dir] = map[string]bool{}
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return err
			}
			imports[dir][p] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, imports, "cmd/toolfs-api", "the walk found the module's packages")

	for dir := range ours {
		assert.Contains(t, imports, dir, "the table names a package that is gone")
	}
	for dir, paths := range imports {
		allowed, known := ours[dir]
		if !assert.True(t, known, "package %s is not in the table: add it with the imports of ours it may have", dir) {
			continue
		}
		for p := range paths {
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				assert.True(t, rel == everywhere || slices.Contains(allowed, rel), "%s imports %s", dir, rel)
			}
			if strings.HasPrefix(p, "github.com/prometheus/") {
				assert.True(t, slices.Contains(prometheusAt, dir), "%s imports %s: metrics live in internal/metrics", dir, p)
			}
			if strings.HasPrefix(p, "go.opentelemetry.io/") {
				assert.True(t, slices.Contains(otelAt, dir), "%s imports %s: traces are made in internal/telemetry", dir, p)
			}
		}
	}
}

// TestTheBinaryKnowsOnlyTheBuilder: cmd/toolfs-api's imports are the
// standard library and internal/server, nothing else (flags → Config → New
// → Listen, Serve → Shutdown).
func TestTheBinaryKnowsOnlyTheBuilder(t *testing.T) {
	entries, err := os.ReadDir("../../cmd/toolfs-api")
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("../../cmd/toolfs-api", e.Name()), nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, s := range f.Imports {
			p, _ := strconv.Unquote(s.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			stdlib := !strings.Contains(first, ".")
			assert.True(t, stdlib || p == module+"/internal/server", "%s imports %s", e.Name(), p)
		}
	}
}

// TestTransportsReachTheProviderThroughTheExecutor: no transport imports
// the provider, the policy or the approvals (docs/architecture.md): a
// transport that needs one of them needs a verb of the executor instead.
func TestTransportsReachTheProviderThroughTheExecutor(t *testing.T) {
	for _, transport := range []string{"internal/handlers", "internal/mcp"} {
		for _, p := range ours[transport] {
			assert.NotContains(t, []string{"internal/fs", "internal/policy", "internal/approval"}, p, "%s may not import %s", transport, p)
		}
	}
}

// eventsDiskCalls are the only calls into os, syscall, x/sys/unix and
// path/filepath the change feed makes: inotify itself, descriptors the
// provider opened (fs.Workspace.OpenBeneath; Access and InotifyAddWatch
// name them as /proc/self/fd/N), and the process's own names. Anything
// that opens, stats or walks a path of the workspace goes through the
// provider.
var eventsDiskCalls = []string{
	"os.Getpid", "os.Hostname", "os.NewFile",
	"unix.Access", "unix.Close", "unix.Fstat", "unix.InotifyInit1", "unix.InotifyAddWatch", "unix.InotifyRmWatch",
}

// TestEventsReadTheDiskThroughTheProvider parses internal/events and checks
// that it calls no function of the disk besides eventsDiskCalls, and no
// function of internal/fs (only its Workspace interface and types).
func TestEventsReadTheDiskThroughTheProvider(t *testing.T) {
	pkgs := map[string]string{"os": "os", "syscall": "syscall", "golang.org/x/sys/unix": "unix", "path/filepath": "filepath", "io/ioutil": "ioutil", module + "/internal/fs": "fs"}
	entries, err := os.ReadDir("../events")
	require.NoError(t, err)
	calls := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join("../events", e.Name()), nil, 0)
		require.NoError(t, err)
		names := map[string]string{} // local name → the package's usual name
		for _, s := range f.Imports {
			p, _ := strconv.Unquote(s.Path.Value)
			if usual, ok := pkgs[p]; ok {
				local := usual
				if s.Name != nil {
					local = s.Name.Name
				}
				names[local] = usual
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || names[x.Name] == "" {
				return true
			}
			calls++
			name := names[x.Name] + "." + sel.Sel.Name
			assert.True(t, slices.Contains(eventsDiskCalls, name), "%s calls %s: the change feed reads the disk through the provider's fs.Workspace", fset.Position(call.Pos()), name)
			return true
		})
	}
	assert.NotZero(t, calls, "the parse found the package's calls")
}
