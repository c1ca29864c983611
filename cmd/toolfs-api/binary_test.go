package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// testVersion is what the built binary of these tests was told its
// version is, as a release tells it (docs/running.md, "Versions").
const testVersion = "v9.8.7-test"

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolfs-cmd-")
	if err != nil {
		return "", err
	}
	// Reachable by other users: TestServesAsTheFolderOwner runs it as one.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "toolfs-api")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion, "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + ": " + string(e.out) }

// binary builds the real toolfs-api once for the package's tests (without
// -race: the process is the system under test, not under the detector) and
// returns its path.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatalf("building toolfs-api: %v", err)
	}
	return bin
}
