package search

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// The search sandbox (docs/search.md, "Confinement"): rg runs as a
// sandbox.Command, the server's one confined child, whose ruleset lets it
// read the workspace root (files and folders, by descriptor) and read and
// execute its own binary and shared libraries, file by file; nothing
// else, and no writes anywhere. So a folder swapped for a symlink while
// rg walks cannot lead it outside the root: the kernel refuses the open,
// whatever path rg used.

// command is rg's sandbox.Command for argv, started in the pinned folder.
// Unconfined, the same Command runs rg directly. Its environment is empty:
// rg reads nothing it needs from one (--no-config), and the server's own
// (its token) must reach neither rg nor the child's command line, where
// the sandbox passes a program's environment (docs/decisions.md, "rg's
// environment").
func (s *Searcher) command(argv []string, pinned pinnedPlace) sandbox.Command {
	return sandbox.Command{
		Path:        s.rg,
		Args:        argv,
		Env:         []string{},
		Policy:      sandbox.Policy{Exec: s.rgFiles},
		Dir:         pinned.cwd,
		ReadBeneath: pinned.root,
	}
}

// prove is sandbox.Prove; tests play a kernel that cannot confine.
var prove = sandbox.Prove

// proof is the outcome of confining one rg binary.
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

// proveSandbox decides whether rg runs confined: the kernel confines the
// sandbox's child (sandbox.Prove, one proof per process, shared with the
// checkers), and rg starts under the ruleset with the files listed for it
// (rg --version). What rg needs is kept per rg binary for the life of the
// process.
func proveSandbox(rg string) proof {
	exe, err := sandbox.Self()
	if err != nil {
		return proof{why: "cannot find the server's own binary: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := prove(ctx, exe); err != nil {
		return proof{why: err.Error()}
	}
	v, _ := proofs.LoadOrStore(rg, &proofOnce{})
	po := v.(*proofOnce)
	po.once.Do(func() { po.p = startsConfined(ctx, exe, rg) })
	return po.p
}

// startsConfined lists the files rg needs and runs rg --version under the
// ruleset that lists them.
func startsConfined(ctx context.Context, exe, rg string) proof {
	files, err := sandbox.RuntimeFiles(rg)
	if err != nil {
		return proof{why: "cannot list the files ripgrep needs: " + err.Error()}
	}
	dir, err := os.Open("/")
	if err != nil {
		return proof{why: err.Error()}
	}
	defer dir.Close()
	s := &Searcher{rg: rg, rgFiles: files}
	cmd, err := s.command([]string{"rg", "--no-config", "--version"}, pinnedPlace{cwd: dir}).Cmd(exe, false)
	if err != nil {
		return proof{why: err.Error()}
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := runBounded(ctx, cmd); err != nil {
		why := strings.TrimSpace(strings.TrimPrefix(stderr.String(), sandbox.ChildErrPrefix))
		if why == "" {
			why = err.Error()
		}
		return proof{why: "ripgrep did not run under the ruleset: " + why}
	}
	if !strings.HasPrefix(out.String(), "ripgrep ") {
		return proof{why: "ripgrep did not run under the ruleset: it printed " + strings.TrimSpace(out.String())}
	}
	return proof{ok: true, exe: exe, files: files}
}

// runBounded runs cmd until it exits or ctx ends, then kills its process
// group.
func runBounded(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return errors.New("it did not finish in time")
	}
}
