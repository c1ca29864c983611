package diagnostics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// drainGrace is how long the output pipes may stay open once the checker
// has exited and its process group was killed: only a process that left
// the group (setsid) can hold them, and its output is not waited for.
const drainGrace = 50 * time.Millisecond

// execResult is how one checker process ended.
type execResult struct {
	stdout, stderr []byte
	code           int    // exit status, when it exited
	signal         string // the signal that killed it, when one did (not ours)
	failure        string // why it gave no answer, "" when it ran to its end
}

// exec runs argv confined, in dir, with stdin from the file input (nil:
// /dev/null), in its own process group. It never outlives ctx: at ctx's end
// the whole group is killed, and the pipes are abandoned shortly after.
func (r *Runner) exec(ctx context.Context, c *checker, argv []string, dir, input *os.File) execResult {
	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	case <-ctx.Done():
		return execResult{failure: r.ctxReason(ctx)}
	}
	cmd, err := sandbox.Command{
		Path: c.bin, Args: argv, Env: c.env, Dir: dir, ReadBeneath: r.rootFD,
		Policy: sandbox.Policy{Exec: c.files, Read: c.Read, Write: []string{c.home}, Devices: []string{os.DevNull}},
	}.Cmd(r.exe, !r.confined)
	if err != nil {
		return r.noStart(c, err)
	}
	stdin := input
	if stdin == nil {
		if stdin, err = os.Open(os.DevNull); err != nil {
			return r.noStart(c, err)
		}
		defer stdin.Close()
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return r.noStart(c, err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return r.noStart(c, err)
	}
	defer errR.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		return r.noStart(c, err)
	}
	pid := cmd.Process.Pid
	if r.onStart != nil {
		r.onStart(pid)
	}

	budget := &outputBudget{left: r.maxOut, over: make(chan struct{})}
	var stdout, stderr bytes.Buffer
	var readers sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		b *bytes.Buffer
	}{{outR, &stdout}, {errR, &stderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			budget.copy(p.b, p.r)
		}()
	}
	// exited closes when the checker has exited but is not yet reaped: its
	// pid, and so its group id, cannot be reused while the group is
	// signalled.
	exited := make(chan struct{})
	go func() {
		waitExited(pid)
		close(exited)
	}()
	killed := ""
	select {
	case <-exited:
	case <-ctx.Done():
		killed = r.ctxReason(ctx)
	case <-budget.over:
		killed = reasonOverflow(r.maxOut)
	}
	// Also after a normal exit: a straggler left in the group must not
	// hold the pipes open.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		outR.Close()
		errR.Close()
		<-drained
	}
	_ = cmd.Wait()
	if killed == "" && budget.exceeded() {
		killed = reasonOverflow(r.maxOut)
	}
	if killed != "" {
		return execResult{failure: killed}
	}
	res := execResult{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		res.signal = unix.SignalName(ws.Signal())
		if res.signal == "" {
			res.signal = "(unknown)"
		}
		return res
	}
	res.code = ws.ExitStatus()
	if r.confined && res.code == sandbox.ChildFailed && bytes.HasPrefix(res.stderr, []byte(sandbox.ChildErrPrefix)) {
		return r.noStart(c, errors.New(strings.TrimSpace(string(res.stderr))))
	}
	return res
}

// ctxReason is why a run ended with its context: the limit, or the
// caller's cancellation.
func (r *Runner) ctxReason(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return reasonTimeout(r.timeout.String())
	}
	return reasonCancelled
}

func (r *Runner) noStart(c *checker, err error) execResult {
	r.log.Warn("diagnostics checker did not start", "checker", c.Name, "reason", err.Error())
	return execResult{failure: reasonNoStart}
}

// outputBudget is the bytes one run may still print, stdout and stderr
// together; over closes once it is spent.
type outputBudget struct {
	mu   sync.Mutex
	left int64
	over chan struct{}
	done bool
}

func (b *outputBudget) copy(dst *bytes.Buffer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.take(dst, buf[:n]) {
			_, _ = io.Copy(io.Discard, src) // the run is being killed
			return
		}
		if err != nil {
			return
		}
	}
}

func (b *outputBudget) take(dst *bytes.Buffer, p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if int64(len(p)) > b.left {
		if !b.done {
			b.done = true
			close(b.over)
		}
		return false
	}
	b.left -= int64(len(p))
	dst.Write(p)
	return true
}

func (b *outputBudget) exceeded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

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
