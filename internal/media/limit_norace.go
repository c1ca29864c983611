//go:build !race

package media

import "syscall"

// limitMemory caps the child's data (its heap, RLIMIT_DATA) at PDFMemoryBytes: past it
// an allocation fails and the runtime stops the child.
func limitMemory() {
	syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: PDFMemoryBytes, Max: PDFMemoryBytes})
}
