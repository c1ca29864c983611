package search

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// The search sandbox (docs/search.md, "Confinement"): rg is started by a
// short re-exec of the server's own binary, which applies a Landlock ruleset
// to itself and then execs rg in its place. The ruleset lets rg read the
// workspace root (files and folders) and read and execute its own binary and
// shared libraries, file by file; nothing else, and no writes anywhere. So a
// folder swapped for a symlink while rg walks cannot lead it outside the
// root: the kernel refuses the open, whatever path rg used.
//
// The child is recognised by two markers only the server sets: argv[1] is
// childMarker (it starts with a control character nobody types) and the
// environment holds childEnv=1. Request data never reaches either.
const (
	childMarker = "\x01toolfs-search-sandbox-child"
	childEnv    = "_TOOLFS_SEARCH_CHILD"
	// childFailed is the child's exit code when it could not confine itself
	// or exec rg (rg itself exits 0, 1 or 2); its stderr then starts with
	// childErrPrefix.
	childFailed    = 125
	childErrPrefix = "toolfs-search-sandbox: "
	// The child's descriptors: the workspace root (the ruleset's one
	// folder) and the pinned working folder.
	childRootFD = 3
	childCwdFD  = 4
)

func init() {
	// Also here, not only in main: any binary that links this package (every
	// go test binary included) must turn into the child when asked to, or a
	// re-exec would run the whole program again.
	RunSandboxChildIfRequested()
}

// RunSandboxChildIfRequested turns this process into the confined rg when it
// was started as the search sandbox child, and returns at once otherwise. It
// never returns in the child: it execs rg, or exits 125 with the reason on
// stderr. cmd/toolfs-api calls it first thing in main (the package's init
// already did, so that test binaries behave the same).
func RunSandboxChildIfRequested() {
	if len(os.Args) < 2 || os.Args[1] != childMarker || os.Getenv(childEnv) != "1" {
		return
	}
	err := sandboxChild(os.Args[2:])
	fmt.Fprintf(os.Stderr, "%s%v\n", childErrPrefix, err)
	os.Exit(childFailed)
}

// childArgs is the child's argv after the marker: rg, the count of files it
// needs, those files, "--", then rg's own argv (argv[0] included).
func childArgs(rg string, files []string, rgArgv []string) []string {
	args := make([]string, 0, 4+len(files)+len(rgArgv))
	args = append(args, childMarker, rg, strconv.Itoa(len(files)))
	args = append(args, files...)
	args = append(args, "--")
	return append(args, rgArgv...)
}

func sandboxChild(args []string) error {
	if len(args) < 2 {
		return errors.New("missing arguments")
	}
	rg := args[0]
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || len(args) < 3+n || args[2+n] != "--" {
		return errors.New("malformed arguments")
	}
	files, rgArgv := args[2:2+n], args[3+n:]
	if len(rgArgv) == 0 {
		return errors.New("no rg argv")
	}

	// The ruleset is enforced on this thread only, and rg is exec'd from it:
	// the thread must never run another goroutine (so it is never unlocked).
	runtime.LockOSThread()
	cfg := landlock.V7.BestEffort()
	rs, flags, err := cfg.NewRulesetFD(landlock.PathAccess(ll.AccessFSExecute|ll.AccessFSReadFile, files...))
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if rs < 0 {
		return errors.New("landlock is not available")
	}
	root := ll.PathBeneathAttr{ParentFd: childRootFD, AllowedAccess: ll.AccessFSReadFile | ll.AccessFSReadDir}
	if err := ll.LandlockAddPathBeneathRule(rs, &root, 0); err != nil {
		return fmt.Errorf("landlock rule for the root: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(rs, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	unix.Close(rs)
	if err := unix.Fchdir(childCwdFD); err != nil {
		return fmt.Errorf("fchdir: %w", err)
	}
	unix.Close(childRootFD)
	unix.Close(childCwdFD)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, childEnv+"=") })
	return syscall.Exec(rg, rgArgv, env)
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock. A
// variable so that tests can play a kernel without it.
var landlockABI = kernelLandlockABI

func kernelLandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 1 {
		return 0
	}
	return v
}

// selfExe is the binary the child is started from: /proc/self/exe is this
// very binary even if the file on disk was replaced since start-up.
func selfExe() (string, error) {
	const proc = "/proc/self/exe"
	if _, err := os.Stat(proc); err == nil {
		return proc, nil
	}
	return os.Executable()
}

// sandboxProblem says why the kernel cannot confine rg, "" when it can.
func sandboxProblem(string) string {
	if landlockABI() == 0 {
		return "the kernel does not offer Landlock"
	}
	return ""
}

// proof is the outcome of proving the sandbox for one rg binary.
type proof struct {
	ok    bool
	exe   string
	files []string
	why   string
}

var proofs sync.Map // rg path -> *proofOnce

type proofOnce struct {
	once sync.Once
	p    proof
}

// proveSandbox finds what rg needs to start and runs it confined once, in a
// fresh folder beside another that it must not be able to read: the
// sandbox counts as working only if rg lists the one file and not the
// other. The outcome is kept per rg binary for the life of the process.
func proveSandbox(rg string) proof {
	v, _ := proofs.LoadOrStore(rg, &proofOnce{})
	po := v.(*proofOnce)
	po.once.Do(func() { po.p = runProof(rg) })
	return po.p
}

func runProof(rg string) proof {
	exe, err := selfExe()
	if err != nil {
		return proof{why: "cannot find the server's own binary: " + err.Error()}
	}
	files, err := sandbox.RuntimeFiles(rg)
	if err != nil {
		return proof{why: "cannot list the files ripgrep needs: " + err.Error()}
	}
	tmp, err := os.MkdirTemp("", "toolfs-search-proof-")
	if err != nil {
		return proof{why: err.Error()}
	}
	defer os.RemoveAll(tmp)
	tmp, err = filepath.EvalSymlinks(tmp)
	if err != nil {
		return proof{why: err.Error()}
	}
	root, outside := filepath.Join(tmp, "root"), filepath.Join(tmp, "outside")
	for _, f := range []string{filepath.Join(root, "inside.txt"), filepath.Join(outside, "outside.txt")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return proof{why: err.Error()}
		}
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			return proof{why: err.Error()}
		}
	}
	s := newSearcher(Config{RgPath: rg, Timeout: 10 * time.Second, MaxConcurrent: 1})
	s.confined, s.exe, s.rgFiles = true, exe, files
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// rg runs as a search does, over a provider on the fresh root.
	local, err := fs.NewLocal(root, fs.LocalOptions{InProcessLocksOnly: true, SweepInterval: -1})
	if err != nil {
		return proof{why: err.Error()}
	}
	defer local.Close()
	cwd, err := local.Resolve(ctx, "search", ".", "")
	if err != nil {
		return proof{why: err.Error()}
	}
	at, err := newPlace(ctx, "glob", local, cwd)
	if err != nil {
		return proof{why: err.Error()}
	}
	var out []byte
	_, err = s.run(ctx, "glob", at, []string{"--files", "--sort=path", "--", ".", "../outside"}, func(r io.Reader) error {
		out, err = io.ReadAll(r)
		return err
	})
	switch {
	case strings.Contains(string(out), "outside.txt"):
		return proof{why: "ripgrep read a folder outside the root under the ruleset"}
	case !strings.Contains(string(out), "inside.txt"):
		why := "ripgrep did not run under the ruleset"
		if err != nil {
			var se *fault.Error
			if errors.As(err, &se) && se.Err != nil {
				why += ": " + se.Err.Error()
			} else {
				why += ": " + err.Error()
			}
		}
		return proof{why: why}
	}
	return proof{ok: true, exe: exe, files: files}
}
