package sandbox

import (
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// auditArch is this architecture's AUDIT_ARCH value, 0 where the filter
// is not built.
var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]

// keepProcessGroup installs a seccomp filter on this thread (inherited
// across exec and by every child) that fails setsid(2) and setpgid(2) with
// EPERM: a confined program and everything it starts stay in the process
// group the server kills at the timeout, so nothing can leave it to
// outlive the run (docs/diagnostics.md, "Confinement"). System calls of
// another ABI (x32, 32-bit) fail with ENOSYS, so they cannot go around it.
func keepProcessGroup() error {
	if auditArch == 0 {
		return errors.New("no seccomp filter for " + runtime.GOARCH)
	}
	const (
		ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret    = unix.BPF_RET | unix.BPF_K
		offNr  = 0 // struct seccomp_data: int nr; __u32 arch; ...
		offArc = 4
		x32Bit = 0x40000000
	)
	filter := []unix.SockFilter{
		{Code: ldAbs, K: offArc},
		{Code: jeq, Jt: 1, Jf: 0, K: auditArch},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: ldAbs, K: offNr},
		{Code: jge, Jt: 0, Jf: 1, K: x32Bit},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: jeq, Jt: 2, Jf: 0, K: unix.SYS_SETSID},
		{Code: jeq, Jt: 1, Jf: 0, K: unix.SYS_SETPGID},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0)
}
