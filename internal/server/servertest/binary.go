package servertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunWithBinary builds the toolfs-api binary (without -race: child
// processes are the system under load, not under the detector) into a
// temporary folder, sets *bin to its path, runs the tests and removes it.
// It is a TestMain body for suites that start real server processes; the
// result is the exit code.
func RunWithBinary(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "toolfs-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "toolfs-api")
	build := exec.Command("go", "build", "-o", *bin, "github.com/toolfs/toolfs-api/cmd/toolfs-api")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building toolfs-api:", err)
		return 1
	}
	return m.Run()
}
