package search

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// errOverflow marks rg's stdout passing the raw budget.
var errOverflow = errors.New("raw output over budget")

// invalidPattern is how rg's stderr names a bad regex or glob. Beyond the
// original's two phrases, a literal newline in a regex ("the literal '"\n"'
// is not allowed in a regex") is the caller's pattern too, not a failure.
var invalidPattern = regexp.MustCompile(`(?i)regex parse error|error parsing glob|is not allowed in a regex`)

// ignoreFileError is how rg names a bad line of an ignore file
// ("./.ignore: line 1: error parsing glob ..."): the tree's fault, not the
// caller's pattern.
var ignoreFileError = regexp.MustCompile(`^.*: line [0-9]+: `)

// patternRejected reports whether rg's stderr says the caller's pattern or
// include glob is invalid; complaints about ignore files do not count.
func patternRejected(stderr string) bool {
	if !invalidPattern.MatchString(stderr) {
		return false
	}
	for _, line := range strings.Split(stderr, "\n") {
		if invalidPattern.MatchString(line) && !ignoreFileError.MatchString(line) {
			return true
		}
	}
	// A multi-line regex error names the pattern on later lines.
	return strings.HasPrefix(stderr, "regex parse error")
}

// budgetReader fails with errOverflow once more than max bytes were read, so
// a runaway search is cut off instead of buffered.
type budgetReader struct {
	r    io.Reader
	n    int64
	max  int64
	over bool
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.over {
		return 0, errOverflow
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		b.over = true
		return n, errOverflow
	}
	return n, err
}

// stderrTail keeps the first max bytes of rg's stderr and drains the rest,
// so rg never blocks on a full stderr pipe. Lines skip matches are counted
// in skipped instead, so they never use up the cap.
type stderrTail struct {
	buf     bytes.Buffer
	max     int
	lossy   bool
	skip    func(line string) bool
	skipped int
}

// stderrLineMax is the longest line fill hands to skip, room for a walk
// complaint naming a path of PATH_MAX bytes twice; a longer one is kept.
const stderrLineMax = 16 << 10

func (t *stderrTail) fill(r io.Reader) {
	br := bufio.NewReaderSize(r, stderrLineMax)
	long := false // inside a line longer than the reader's buffer
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			whole := !long && err != bufio.ErrBufferFull
			if whole && t.skip != nil && t.skip(strings.TrimSuffix(string(line), "\n")) {
				t.skipped++
			} else {
				t.keep(line)
			}
			long = err == bufio.ErrBufferFull
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

func (t *stderrTail) keep(b []byte) {
	room := t.max - t.buf.Len()
	if len(b) > room {
		t.lossy = true
		b = b[:max(room, 0)]
	}
	t.buf.Write(b)
}

// run executes rg with args in dir, never through a shell, and hands its
// stdout (bounded by the raw budget) to consume, which reads it as a stream.
// It returns rg's exit code (0, or 1 for an empty search) or a *fault.Error. rg
// runs in its own process group with stdin on /dev/null; on cancellation,
// timeout, overflow or malformed output the whole group is killed, and the
// child is always reaped before run returns.
func (s *Searcher) run(ctx context.Context, tool string, at place, args []string, consume func(io.Reader) error) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, abortedError(tool, err)
	}
	if s.unavailable != "" {
		return 0, launchError(tool, errors.New(s.unavailable))
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return 0, abortedError(tool, ctx.Err())
	}
	pinned, err := at.pin(ctx)
	if err != nil {
		return 0, err
	}
	defer pinned.close()

	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, launchError(tool, err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return 0, launchError(tool, err)
	}
	defer errR.Close()

	// Confined, the sandbox's child confines itself, moves into the pinned
	// folder and execs rg in its place (same pid, so the same process
	// group); unconfined, rg starts in that folder, by descriptor too.
	cmd, err := s.command(append([]string{"rg", "--no-config"}, args...), pinned).Cmd(s.exe, !s.confined)
	if err != nil {
		outW.Close()
		errW.Close()
		return 0, launchError(tool, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		if ctx.Err() != nil {
			return 0, abortedError(tool, ctx.Err())
		}
		return 0, launchError(tool, err)
	}
	pid := cmd.Process.Pid
	if s.onStart != nil {
		s.onStart(pid)
	}

	// exited closes when rg has exited but is not yet reaped: its pid, and
	// so its process group id, cannot be reused while we signal the group.
	exited := make(chan struct{})
	go func() {
		waitExited(pid)
		close(exited)
	}()
	// The supervisor kills the group on cancellation (SIGTERM, then SIGKILL
	// after a grace), and in any case once rg has exited: a straggler left
	// in the group must not hold the pipes open. rg's output is already in
	// the pipe by then, so nothing is lost.
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		select {
		case <-ctx.Done():
			signalGroup(pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(killGrace):
			}
		case <-exited:
		}
		signalGroup(pid, syscall.SIGKILL)
	}()
	stderr := stderrTail{max: StderrMaxBytes, skip: at.vanished}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		stderr.fill(errR)
	}()

	consumeErr := consume(&budgetReader{r: outR, max: s.rawMax})
	if consumeErr != nil {
		signalGroup(pid, syscall.SIGKILL)
	}
	outR.Close()
	<-supervised // rg has exited and its group was killed; rg is not yet reaped
	<-stderrDone
	waitErr := cmd.Wait()

	switch {
	case errors.Is(consumeErr, errOverflow):
		return 0, &fault.Error{Code: fault.CodeSearchOverflow, Message: tool + " produced more raw output than the subprocess seam retained within the " +
			strconv.FormatInt(s.rawMax, 10) + "-byte cap; narrow pattern, path, or include and retry"}
	case ctx.Err() != nil:
		return 0, abortedError(tool, ctx.Err())
	case consumeErr != nil:
		return 0, consumeErr
	}
	if cmd.ProcessState == nil {
		return 0, &fault.Error{Code: fault.CodeSearchFailed, Message: tool + " search command produced no collected output streams", Err: waitErr}
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 0, &fault.Error{Code: fault.CodeSearchFailed, Message: tool + " search command was killed by signal " + signalName(ws.Signal())}
	}
	code := cmd.ProcessState.ExitCode()
	if code == 0 || code == 1 {
		return code, nil
	}
	// The cap may split a character; messages must stay valid UTF-8.
	text := strings.ToValidUTF8(strings.TrimSpace(stderr.buf.String()), "\uFFFD")
	if s.confined && code == sandbox.ChildFailed && strings.HasPrefix(text, sandbox.ChildErrPrefix) {
		return 0, launchError(tool, errors.New(text))
	}
	if s.confined && code == 2 {
		rest, argOutside := at.sortDenials(ctx, text)
		if argOutside {
			return 0, at.argOutside()
		}
		if rest == "" {
			return 0, nil // only folders swapped out of the tree were missed
		}
		text = rest
	}
	if code == 2 && text == "" && stderr.skipped > 0 {
		return 0, nil // only entries that left the tree during the walk were missed
	}
	if code == 2 && strings.HasPrefix(text, "No files were searched") {
		// rg 13 exits 2 when filters (include) leave nothing to search: that
		// is an empty result, not a failure.
		return 1, nil
	}
	if patternRejected(text) {
		return 0, &fault.Error{Code: fault.CodeSearchInvalidPattern, Message: tool + " pattern rejected by ripgrep: " + text}
	}
	text = at.redact(text)
	msg := tool + " search failed (exit " + strconv.Itoa(code) + ")"
	if text != "" {
		msg += ": " + text
		if stderr.lossy {
			msg += " [stderr truncated]"
		}
	}
	return 0, &fault.Error{Code: fault.CodeSearchFailed, Message: msg, Err: waitErr}
}

func launchError(tool string, cause error) *fault.Error {
	return &fault.Error{Code: fault.CodeSearchFailed, Message: tool + " could not start its search command (ripgrep launch failed)", Err: cause}
}
