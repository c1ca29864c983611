package tools

import (
	"strings"
	"testing"

	"github.com/toolfs/toolfs-api/internal/render"
)

// The type and value passes alone, without the provider, so a change of
// the decoder shows beside the noise of fsync (docs/performance.md).

func BenchmarkReadArgs(b *testing.B) {
	x := &Executor{caps: render.DefaultCaps()}
	raw := []byte(`{"file_path":"src/main.go","offset":10,"limit":200}`)
	for b.Loop() {
		if _, err := x.readArgs(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteArgs(b *testing.B) {
	raw := []byte(`{"file_path":"src/main.go","content":"` + strings.Repeat(`func f() {\n\treturn\n}\n`, 3000) + `","dry_run":false}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := writeArgsOf(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEditArgs(b *testing.B) {
	raw := []byte(`{"file_path":"src/main.go","edits":[{"old_string":"a","new_string":"b"},{"old_string":"c","new_string":"d","replace_all":true}]}`)
	for b.Loop() {
		if _, err := editArgsOf(raw); err != nil {
			b.Fatal(err)
		}
	}
}
