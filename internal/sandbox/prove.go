package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// probe is what a probing child tests under its ruleset instead of
// executing a program: each path must be readable, or not, creatable, or
// not; setsid and setpgid must fail, and so must a TCP connection.
type probe struct {
	Read     string `json:"read"`
	NoRead   string `json:"no_read"`
	Create   string `json:"create"`
	NoCreate string `json:"no_create"`
	// NoConnect is a loopback TCP address that must not be reachable
	// (only where the kernel's Landlock handles TCP, ABI 4 and later).
	NoConnect string `json:"no_connect,omitempty"`
}

func (p *probe) run() error {
	if _, err := os.ReadFile(p.Read); err != nil {
		return fmt.Errorf("cannot read what the ruleset allows: %w", err)
	}
	if _, err := os.ReadFile(p.NoRead); !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("reading outside the ruleset was not refused: %v", err)
	}
	if err := os.WriteFile(p.Create, []byte("x"), 0o600); err != nil {
		return fmt.Errorf("cannot write where the ruleset allows: %w", err)
	}
	if err := os.WriteFile(p.NoCreate, []byte("x"), 0o600); !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("writing outside the ruleset was not refused: %v", err)
	}
	if _, err := unix.Setsid(); !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("leaving the process group was not refused: %v", err)
	}
	if err := unix.Setpgid(0, 0); !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("leaving the process group was not refused: %v", err)
	}
	if p.NoConnect != "" {
		c, err := net.DialTimeout("tcp", p.NoConnect, 2*time.Second)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("a TCP connection was not refused: %v", err)
		}
	}
	return nil
}

// Prove runs the child from exe (Self) once under a ruleset like a
// Command's, in a fresh folder: it must read a file beneath its readable
// folder and not one beside it, write in its writable folder and not in
// the readable one, not leave its process group, and (where the kernel's
// Landlock handles TCP) not connect to a loopback port. nil means the
// kernel confines the child as this package says; otherwise the error
// says what failed. The outcome is kept per binary for the life of the
// process, so the searcher and the checkers of one server share one
// proof; a proof cut short by ctx is not kept.
func Prove(ctx context.Context, exe string) error {
	if why := Problem(); why != "" {
		return errors.New(why)
	}
	proofs.Lock()
	defer proofs.Unlock()
	if err, ok := proofs.m[exe]; ok {
		return err
	}
	err := prove(ctx, exe)
	if ctx.Err() == nil {
		if proofs.m == nil {
			proofs.m = make(map[string]error)
		}
		proofs.m[exe] = err
	}
	return err
}

// proofs are Prove's outcomes by binary; the lock also makes a second
// caller wait for the proof under way.
var proofs struct {
	sync.Mutex
	m map[string]error
}

func prove(ctx context.Context, exe string) error {
	tmp, err := os.MkdirTemp("", "toolfs-sandbox-proof-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil {
		return err
	}
	root, outside, write := filepath.Join(tmp, "root"), filepath.Join(tmp, "outside"), filepath.Join(tmp, "write")
	for _, d := range []string{root, outside, write} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	p := &probe{
		Read: filepath.Join(root, "inside.txt"), NoRead: filepath.Join(outside, "outside.txt"),
		Create: filepath.Join(write, "new.txt"), NoCreate: filepath.Join(root, "new.txt"),
	}
	for _, f := range []string{p.Read, p.NoRead} {
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			return err
		}
	}
	if landlockABI() >= 4 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		p.NoConnect = ln.Addr().String()
	}
	dir, err := os.Open(root)
	if err != nil {
		return err
	}
	defer dir.Close()
	s := spec{Policy: Policy{Write: []string{write}, Devices: []string{os.DevNull}}, ReadBeneath: true, Probe: p}
	cmd, err := childCmd(exe, s, nil, dir, dir)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		<-done
		return fmt.Errorf("the probe did not finish: %w", ctx.Err())
	}
	if err != nil {
		why := strings.TrimSpace(strings.TrimPrefix(stderr.String(), ChildErrPrefix))
		if why == "" {
			why = err.Error()
		}
		return errors.New(why)
	}
	return nil
}
