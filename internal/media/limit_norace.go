//go:build !race

package media

import "syscall"

// limitMemory caps the child's address space at PDFMemoryBytes: past it
// an allocation fails and the runtime stops the child.
func limitMemory() {
	syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: PDFMemoryBytes, Max: PDFMemoryBytes})
}
