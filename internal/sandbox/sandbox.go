// Package sandbox runs a program confined by Landlock: a short re-exec of
// the server's own binary applies a ruleset to itself and then execs the
// program in its place, so the program keeps the child's pid and process
// group (docs/diagnostics.md, "Confinement"). The ruleset grants exactly
// what a Policy lists; every other file access, every TCP bind and connect,
// and signals to processes outside the child are refused by the kernel,
// and a seccomp filter keeps the program and its children in their process
// group.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The child is recognised by two markers only the server sets: argv[1] is
// childMarker (it starts with a control character nobody types) and the
// environment holds childEnv=1. Request data never reaches either.
const (
	childMarker = "\x01toolfs-sandbox-child"
	childEnv    = "_TOOLFS_SANDBOX_CHILD"
	// ChildFailed is the child's exit code when it could not confine
	// itself or exec the program; its stderr then starts with
	// ChildErrPrefix.
	ChildFailed    = 125
	ChildErrPrefix = "toolfs-sandbox: "
	// The child's descriptors: the working folder, then the folder
	// readable beneath (when there is one).
	childDirFD  = 3
	childReadFD = 4
)

func init() {
	// Also here, not only in main: any binary that links this package (every
	// go test binary included) must turn into the child when asked to, or a
	// re-exec would run the whole program again.
	RunChildIfRequested()
}

// RunChildIfRequested turns this process into the confined program when it
// was started as the sandbox child, and returns at once otherwise. It never
// returns in the child: it execs the program, or exits ChildFailed with the
// reason on stderr.
func RunChildIfRequested() {
	if len(os.Args) < 3 || os.Args[1] != childMarker || os.Getenv(childEnv) != "1" {
		return
	}
	err := child(os.Args[2], os.Args[3:])
	fmt.Fprintf(os.Stderr, "%s%v\n", ChildErrPrefix, err)
	os.Exit(ChildFailed)
}

// Policy is what a confined program may touch, beyond the folder a Command
// passes as ReadBeneath. Paths are absolute; each must exist when the
// program starts.
type Policy struct {
	// Exec are files read and executed: the program's own (ProgramFiles).
	Exec []string `json:"exec,omitempty"`
	// Read are folders (read, listed and executed beneath) or files (read
	// and executed): a toolchain's installation, say.
	Read []string `json:"read,omitempty"`
	// Write are folders with every right beneath but linking or renaming
	// across folders: private temporary folders.
	Write []string `json:"write,omitempty"`
	// Devices are device files read and written (truncation and ioctl
	// included): /dev/null.
	Devices []string `json:"devices,omitempty"`
}

// spec is what the child receives as argv[2]. The program's environment
// and argv follow as argv[3:], one string each, so each may be as long as
// an exec of the program itself allows (a grep pattern, a large
// environment), not share the one string's 128 KiB.
type spec struct {
	Path   string `json:"path"`
	Policy Policy `json:"policy"`
	// Env is how many of the strings after the spec are the program's
	// environment; the rest are its argv.
	Env int `json:"env"`
	// ReadBeneath says fd 4 is a folder readable beneath.
	ReadBeneath bool `json:"read_beneath,omitempty"`
	// Probe makes the child test its ruleset instead of executing Path.
	Probe *probe `json:"probe,omitempty"`
}

// Command is one program to run confined.
type Command struct {
	// Path is the program, Args its argv (argv[0] included), Env its whole
	// environment: nothing of the server's own environment is passed on.
	// Confined, Env and Args reach the child as its own argv strings, one
	// each, so they are as visible on the host as a command line is.
	Path string
	Args []string
	Env  []string
	// Policy is what it may touch.
	Policy Policy
	// Dir is its working folder, a descriptor (so a path swapped after the
	// caller opened it cannot move it); required.
	Dir *os.File
	// ReadBeneath, when set, is a folder it may read beneath (files and
	// listings), passed by descriptor: the workspace root.
	ReadBeneath *os.File
}

// Cmd is the re-exec of exe (the server's binary: Self) that confines
// itself and execs c.Path. It runs in a process group of its own; the
// caller sets Stdin, Stdout and Stderr and starts it. With unconfined, the
// program is exec'd directly instead (no Landlock: the caller decided it
// may run without), in the same folder and with the same environment.
func (c Command) Cmd(exe string, unconfined bool) (*exec.Cmd, error) {
	if c.Dir == nil {
		return nil, errors.New("sandbox: no working folder")
	}
	if unconfined {
		return &exec.Cmd{
			Path: c.Path,
			Args: c.Args,
			Env:  c.Env,
			// The forked child still holds our descriptors when os/exec
			// changes its directory, so this is the opened folder.
			Dir:         fmt.Sprintf("/proc/self/fd/%d", c.Dir.Fd()),
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		}, nil
	}
	s := spec{Path: c.Path, Policy: c.Policy, Env: len(c.Env), ReadBeneath: c.ReadBeneath != nil}
	return childCmd(exe, s, append(slices.Clip(c.Env), c.Args...), c.Dir, c.ReadBeneath)
}

func childCmd(exe string, s spec, rest []string, dir, beneath *os.File) (*exec.Cmd, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	files := []*os.File{dir}
	if beneath != nil {
		files = append(files, beneath)
	}
	return &exec.Cmd{
		Path:        exe,
		Args:        append([]string{"toolfs-api", childMarker, string(b)}, rest...),
		Env:         []string{childEnv + "=1"},
		ExtraFiles:  files, // fds 3 and 4
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}, nil
}

func child(arg string, rest []string) error {
	var s spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		return fmt.Errorf("malformed arguments: %w", err)
	}
	if s.Env < 0 || s.Env > len(rest) {
		return errors.New("malformed arguments: no environment")
	}
	env, args := rest[:s.Env], rest[s.Env:]
	if s.Probe == nil && (s.Path == "" || len(args) == 0) {
		return errors.New("no program")
	}
	// The ruleset is enforced on this thread only, and the program is
	// exec'd from it: the thread must never run another goroutine (so it
	// is never unlocked).
	runtime.LockOSThread()
	if err := restrict(s); err != nil {
		return err
	}
	if err := unix.Fchdir(childDirFD); err != nil {
		return fmt.Errorf("fchdir: %w", err)
	}
	unix.Close(childDirFD)
	if s.ReadBeneath {
		unix.Close(childReadFD)
	}
	if s.Probe != nil {
		if err := s.Probe.run(); err != nil {
			return err
		}
		os.Exit(0)
	}
	return syscall.Exec(s.Path, args, env)
}

// restrict applies the ruleset of s to this thread.
func restrict(s spec) error {
	const execRead = ll.AccessFSExecute | ll.AccessFSReadFile
	var rules []landlock.Rule
	if len(s.Policy.Exec) > 0 {
		rules = append(rules, landlock.PathAccess(execRead, s.Policy.Exec...))
	}
	for _, p := range s.Policy.Read {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			rules = append(rules, landlock.PathAccess(execRead|ll.AccessFSReadDir, p))
		} else {
			rules = append(rules, landlock.PathAccess(execRead, p))
		}
	}
	if len(s.Policy.Write) > 0 {
		rules = append(rules, landlock.RWDirs(s.Policy.Write...))
	}
	if len(s.Policy.Devices) > 0 {
		rules = append(rules, landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSWriteFile|ll.AccessFSTruncate|ll.AccessFSIoctlDev, s.Policy.Devices...))
	}
	rs, flags, err := landlock.V7.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if rs < 0 {
		return errors.New("landlock is not available")
	}
	defer unix.Close(rs)
	if s.ReadBeneath {
		root := ll.PathBeneathAttr{ParentFd: childReadFD, AllowedAccess: ll.AccessFSReadFile | ll.AccessFSReadDir}
		if err := ll.LandlockAddPathBeneathRule(rs, &root, 0); err != nil {
			return fmt.Errorf("landlock rule for the readable folder: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(rs, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	if err := keepProcessGroup(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
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

// Problem says why the kernel cannot confine a program, "" when it can.
func Problem() string {
	if landlockABI() == 0 {
		return "the kernel does not offer Landlock"
	}
	return ""
}

// Self is the binary the child is started from: /proc/self/exe is this
// very binary even if the file on disk was replaced since start-up.
func Self() (string, error) {
	const proc = "/proc/self/exe"
	if _, err := os.Stat(proc); err == nil {
		return proc, nil
	}
	return os.Executable()
}
