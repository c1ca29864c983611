package search

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// waitExited blocks until pid has exited, without reaping it (WNOWAIT), so
// the caller can still signal its process group safely.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// signalGroup signals every process in the group led by pid. Errors (the
// group is already empty) are of no interest.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// signalName is the conventional name of sig (SIGKILL), as the original tool-fs's
// Node runtime reported it.
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "(unknown)"
}
