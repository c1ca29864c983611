package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// sourceText is a Go-like source file of n lines, about 31 bytes a line (so
// 2,000 lines are about 60 KiB). Every line is unique, so any line can be
// the old_string of an edit.
func sourceText(n int) string {
	var b strings.Builder
	b.WriteString("package fixture\n")
	for i := 2; i <= n; i++ {
		switch i % 8 {
		case 0:
			fmt.Fprintf(&b, "func step%04d(a, b int) int {\n", i)
		case 7:
			fmt.Fprintf(&b, "} // end of step %04d ....\n", i)
		default:
			fmt.Fprintf(&b, "\tv%04d := compute(a, b) * %04d\n", i, i%97)
		}
	}
	return b.String()
}

// writeFile writes content to dir/name, making dir.
func writeFile(dir, name, content string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(content), 0o644)
}

// bigText writes a text file of exactly size bytes made of numbered source
// lines ending in '\n', and returns its line count.
func bigText(path string, size int64) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var written int64
	lines := 0
	for written < size {
		line := fmt.Sprintf("\tv%09d := compute(a, b) + %d // %s\n", lines, lines%97, pad[:lines%23])
		if rest := size - written; int64(len(line)) > rest {
			line = strings.Repeat("x", int(rest)-1) + "\n"
		}
		n, err := io.WriteString(w, line)
		if err != nil {
			return 0, err
		}
		written += int64(n)
		lines++
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return lines, f.Close()
}

const pad = "........................"

// warmCache reads the file once so that timed runs find it in the page cache.
func warmCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}
