package handlers

import (
	"syscall"
	"testing"
	"time"
)

// ReportCPU reports the process CPU time (user + system, every thread, GC
// included) per benchmark iteration as "cpu-ns/op", read from getrusage when
// the benchmark ends. On a machine shared with other work, wall time per op
// grows with the load while CPU time per op stays close to the real cost.
// Call it once, right before the loop.
func ReportCPU(b *testing.B) {
	start := cpuNow()
	b.Cleanup(func() {
		if n := b.N; n > 0 {
			b.ReportMetric(float64(cpuNow()-start)/float64(n), "cpu-ns/op")
		}
	})
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
