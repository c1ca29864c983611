package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// unitPath is the shipped systemd unit (docs/deployment.md).
const unitPath = "../../deploy/systemd/toolfs-api@.service"

// landlockCalls are the system calls rg's confinement makes (docs/search.md,
// "Confinement of the search process"), which systemd 252's @system-service leaves out.
var landlockCalls = []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"}

// unitFilter is the unit's SystemCallFilter= lines, in order.
func unitFilter(t *testing.T, unit string) []string {
	t.Helper()
	var lines []string
	for l := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "SystemCallFilter="); ok {
			lines = append(lines, v)
		}
	}
	return lines
}

// TestSystemdUnitAllowsLandlock: the unit's syscall filter names the
// Landlock calls itself, in an allow line, and no deny line takes them back.
func TestSystemdUnitAllowsLandlock(t *testing.T) {
	b, err := os.ReadFile(unitPath)
	require.NoError(t, err)
	allowed := map[string]bool{}
	for _, l := range unitFilter(t, string(b)) {
		deny := strings.HasPrefix(l, "~")
		for _, name := range strings.Fields(strings.TrimPrefix(l, "~")) {
			allowed[name] = !deny
		}
	}
	for _, c := range landlockCalls {
		assert.True(t, allowed[c], "%s: SystemCallFilter= must list it (systemd 252's @system-service does not)", c)
	}
}

// TestSystemdUnitFilterConfinesSearch runs the built binary under the
// unit's syscall filter as systemd builds it (its groups expanded by the
// local systemd-analyze, every other call failing with the unit's
// SystemCallErrorNumber) and sees glob and grep run confined by Landlock.
// The same filter without the unit's explicit Landlock line is the shipped
// unit before it had one: glob and grep turn themselves off, blaming the
// kernel (the issue this line fixed). It skips without systemd-analyze or
// without Landlock in the kernel.
func TestSystemdUnitFilterConfinesSearch(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze to expand the unit's groups")
	}
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("no rg")
	}
	if v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); errno != 0 || int(v) < 1 {
		t.Skip("the kernel has no Landlock")
	}
	b, err := os.ReadFile(unitPath)
	require.NoError(t, err)
	lines := unitFilter(t, string(b))
	require.NotEmpty(t, lines)
	numbers := syscallNumbers(t)

	for _, tc := range []struct {
		name     string
		lines    []string
		confined bool
	}{
		{"the unit", lines, true},
		{"without its Landlock line", slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return strings.Contains(l, "landlock_") }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed := resolveFilter(t, tc.lines, numbers)
			root := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("needle\n"), 0o644))
			cmd := exec.Command(os.Args[0], "-test.run=^TestSeccompChild$")
			cmd.Env = append(os.Environ(), "TOOLFS_SECCOMP_CHILD="+childSpec(allowed, binary(t), root))
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			require.NoError(t, err, "stderr: %s", stderr)
			m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(line)
			require.NotNil(t, m, line)
			grep := call(t, "POST", m[1]+"/tools/grep", "", `{"pattern":"needle"}`)
			glob := call(t, "POST", m[1]+"/tools/glob", "", `{"pattern":"*.txt"}`)
			logs := stderr.String()
			if tc.confined {
				assert.Contains(t, logs, `msg="search sandbox on: rg is confined to the root by Landlock"`)
				assert.Equal(t, 200, grep.status, grep.body)
				assert.Contains(t, grep.body, "Found 1 match")
				assert.Equal(t, 200, glob.status, glob.body)
				assert.Contains(t, glob.body, "a.txt")
				return
			}
			assert.Contains(t, logs, `msg="glob and grep are unavailable"`)
			assert.NotEqual(t, 200, grep.status, grep.body)
		})
	}
}

// syscallNumbers maps this architecture's system call names to their
// numbers, read from golang.org/x/sys's table in the module cache.
func syscallNumbers(t *testing.T) map[string]uint32 {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "unix", "zsysnum_linux_"+runtime.GOARCH+".go"))
	if err != nil {
		t.Skipf("no system call table for %s: %v", runtime.GOARCH, err)
	}
	out := map[string]uint32{}
	for _, m := range regexp.MustCompile(`(?m)^\s*SYS_(\w+)\s*=\s*(\d+)`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseUint(m[2], 10, 32)
		out[strings.ToLower(m[1])] = uint32(n)
	}
	return out
}

// resolveFilter is the set of system calls systemd allows for the unit's
// SystemCallFilter= lines: the first line without ~ starts an allow list,
// each later one adds to it, each ~ line takes its calls out; a @group is
// what systemd-analyze syscall-filter lists for it, nested groups
// expanded. Names this architecture does not have are left out.
func resolveFilter(t *testing.T, lines []string, numbers map[string]uint32) []uint32 {
	t.Helper()
	groups := map[string][]string{}
	var expand func(name string) []string
	expand = func(name string) []string {
		if !strings.HasPrefix(name, "@") {
			return []string{name}
		}
		if _, ok := groups[name]; !ok {
			out, err := exec.Command("systemd-analyze", "syscall-filter", name).Output()
			require.NoError(t, err, name)
			var names []string
			for _, l := range strings.Split(string(out), "\n")[1:] {
				l = strings.TrimSpace(l)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				names = append(names, expand(l)...)
			}
			groups[name] = names
		}
		return groups[name]
	}
	set := map[string]bool{}
	for _, l := range lines {
		deny := strings.HasPrefix(l, "~")
		for _, f := range strings.Fields(strings.TrimPrefix(l, "~")) {
			for _, n := range expand(f) {
				if deny {
					delete(set, n)
				} else {
					set[n] = true
				}
			}
		}
	}
	// systemd always allows what starting the service needs.
	for _, n := range []string{"execve", "exit", "exit_group", "getrlimit", "rt_sigreturn", "sigreturn"} {
		set[n] = true
	}
	var nrs []uint32
	for n := range set {
		if nr, ok := numbers[n]; ok {
			nrs = append(nrs, nr)
		}
	}
	slices.Sort(nrs)
	require.Greater(t, len(nrs), 100, "the filter resolved to too few calls to be the unit's")
	return nrs
}

type seccompChild struct {
	Allowed []uint32
	Bin     string
	Root    string
}

func childSpec(allowed []uint32, bin, root string) string {
	b, _ := json.Marshal(seccompChild{allowed, bin, root})
	return string(b)
}

// TestSeccompChild is not a test: started by TestSystemdUnitFilterConfinesSearch
// with TOOLFS_SECCOMP_CHILD, it installs the allow list as a seccomp filter
// (EPERM for every other call, as the unit's SystemCallErrorNumber=EPERM;
// another ABI fails too, as SystemCallArchitectures=native) with
// no_new_privs (NoNewPrivileges=yes) and executes the server under it.
func TestSeccompChild(t *testing.T) {
	spec := os.Getenv("TOOLFS_SECCOMP_CHILD")
	if spec == "" {
		t.Skip("started by TestSystemdUnitFilterConfinesSearch only")
	}
	var c seccompChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	arch := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if arch == 0 {
		t.Fatalf("no seccomp filter for %s", runtime.GOARCH)
	}
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
	)
	eperm := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	filter := []unix.SockFilter{
		{Code: ldAbs, K: 4}, // arch
		{Code: jeq, Jt: 1, Jf: 0, K: arch},
		{Code: ret, K: eperm},
		{Code: ldAbs, K: 0}, // nr
	}
	for _, nr := range c.Allowed {
		filter = append(filter, unix.SockFilter{Code: jeq, Jt: 0, Jf: 1, K: nr}, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})
	}
	filter = append(filter, unix.SockFilter{Code: ret, K: eperm})
	env := []string{"PATH=" + os.Getenv("PATH"), "TOOLFS_ROOT=" + c.Root, "TOOLFS_ADDR=127.0.0.1:0", "TOOLFS_LOCK_DIR=off"}
	runtime.LockOSThread() // the filter is this thread's, and exec runs from it
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		t.Fatal(err)
	}
	err := syscall.Exec(c.Bin, []string{c.Bin}, env)
	t.Fatalf("exec under the filter: %v", err)
}
