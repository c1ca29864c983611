//go:build race

package media

// limitMemory does nothing under the race detector, whose shadow memory
// reserves far more address space than PDFMemoryBytes.
func limitMemory() {}
