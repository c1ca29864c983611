package diagnostics

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goSource is valid Go source of about size bytes.
func goSource(size int) string {
	var b strings.Builder
	b.WriteString("package big\n\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "// F%d returns its argument plus %d.\nfunc F%d(x int) int {\n\tif x > %d {\n\t\treturn x - %d\n\t}\n\treturn x + %d\n}\n\n", i, i, i, i, i, i)
	}
	return b.String()
}

// serverBinary builds cmd/toolfs-api once, so the benchmark's checkers
// start from the server's own binary, as in production, not from the test
// binary. TOOLFS_BENCH_SERVER_BINARY names a binary already built.
func serverBinary(b *testing.B) string {
	if p := os.Getenv("TOOLFS_BENCH_SERVER_BINARY"); p != "" {
		return p
	}
	out := filepath.Join(b.TempDir(), "toolfs-api")
	cmd := exec.Command("go", "build", "-o", out, "../../cmd/toolfs-api")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, msg)
	}
	return out
}

// BenchmarkCheckGofmt60KiB is the latency a check adds to an edit of a
// 60 KiB Go file with gofmt (docs/diagnostics.md, "Cost"): "both" runs
// the checker on both versions, "after only" finds the version before in
// the cache (the usual edit after an edit); "gofmt alone" is gofmt run
// directly, unconfined, on each version, for comparison.
//
//	go test -run '^$' -bench CheckGofmt -benchtime 100x ./internal/diagnostics
func BenchmarkCheckGofmt60KiB(b *testing.B) {
	requireLandlock(b)
	gofmt := tool(b, "gofmt")
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	cfgs, err := ParseConfig([]byte(gofmtChecker))
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{Root: root, Checkers: cfgs})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	r.exe = serverBinary(b)
	before := goSource(60 << 10)
	after := strings.Replace(before, "return x + 7\n", "return x + 7 +\n", 1)
	p := filepath.Join(root, "big.go")
	if err := os.WriteFile(p, []byte(after), 0o644); err != nil {
		b.Fatal(err)
	}
	ch := Change{Path: p, Before: []byte(before), After: []byte(after)}
	want := "\nNew problems after this change (the change was applied):\n"
	rep := r.Check(context.Background(), ch)
	if !strings.HasPrefix(rep.Text(), want) {
		b.Fatalf("unexpected report %q", rep.Text())
	}
	meta, _ := json.Marshal(rep.Metadata())
	b.Logf("the text gains %d bytes %q; the metadata's diagnostics is %d bytes", len(rep.Text()), rep.Text(), len(meta))
	b.Run("both", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			// A version before never seen: a fresh copy each time.
			ch.Before = []byte(before + "// " + fmt.Sprint(i) + "\n")
			r.Check(context.Background(), ch)
		}
	})
	b.Run("after only", func(b *testing.B) {
		ch.Before = []byte(before)
		for b.Loop() {
			r.Check(context.Background(), ch)
		}
	})
	// The checker itself, unconfined, on each version: the valid version
	// before is formatted and printed whole, so it costs more.
	pb := filepath.Join(b.TempDir(), "big.go")
	if err := os.WriteFile(pb, []byte(before), 0o644); err != nil {
		b.Fatal(err)
	}
	for name, file := range map[string]string{"gofmt alone on the version after": p, "gofmt alone on the version before": pb} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = exec.Command(gofmt, "-e", file).Run()
			}
		})
	}
}

// BenchmarkConfinementOverhead is what confinement costs one run: a
// checker that does nothing (true), confined through the server's binary,
// against true run directly.
//
//	go test -run '^$' -bench ConfinementOverhead -benchtime 200x ./internal/diagnostics
func BenchmarkConfinementOverhead(b *testing.B) {
	requireLandlock(b)
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	cfgs, err := ParseConfig([]byte(`{"checkers": [{"name": "true", "glob": "*", "command": ["true"]}]}`))
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{Root: root, Checkers: cfgs})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	r.exe = serverBinary(b)
	p := filepath.Join(root, "a.txt")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	ch := Change{Path: p, Created: true, After: []byte("x")}
	b.Run("confined", func(b *testing.B) {
		for b.Loop() {
			r.Check(context.Background(), ch)
		}
	})
	b.Run("alone", func(b *testing.B) {
		for b.Loop() {
			_ = exec.Command("true").Run()
		}
	})
}
