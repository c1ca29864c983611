package tools

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

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

func BenchmarkDecodeWriteBody(b *testing.B) {
	body, _ := json.Marshal(map[string]string{"file_path": "src.go", "content": strings.Repeat("\tv0001 := compute(a, b) * 0001\n", 2000)})
	b.SetBytes(int64(len(body)))
	reportCPU(b)
	for b.Loop() {
		if _, err := writeArgsOf(body); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU adds cpu-ns/op, the process's CPU time per operation (from
// getrusage): on a shared machine it grows much less with others' load than
// wall time does.
func reportCPU(b *testing.B) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
		}
	})
}
