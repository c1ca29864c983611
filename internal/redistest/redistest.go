// Package redistest runs a real redis-server on a loopback port for tests
// (Debian's package: apt-get install redis-server; .ci/run installs it).
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MissingReason says why Redis tests skip when the binary is absent.
const MissingReason = "redis-server not found on PATH (apt-get install redis-server; .ci/run installs it)"

// Server is one redis-server process on a loopback port, its data in Dir.
// Stop and Start may be called again to simulate an outage on the same
// port.
type Server struct {
	Bin, Dir, Addr string
	Port           int
	extra          []string
	pid            int
	exited         chan struct{} // closed when the process has exited; nil when stopped
}

// Available reports whether redis-server is on PATH.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Start starts a server for t in a temporary folder, stopped at cleanup;
// it skips t when the binary is absent. Without extra arguments nothing
// is persisted.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip(MissingReason)
	}
	s, err := StartIn(bin, t.TempDir(), 0, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartIn starts bin on port (0: a free one), its data in dir.
func StartIn(bin, dir string, port int, extra ...string) (*Server, error) {
	var last error
	for range 5 {
		p := port
		if p == 0 {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			p = ln.Addr().(*net.TCPAddr).Port
			ln.Close()
		}
		s := &Server{Bin: bin, Dir: dir, Port: p, Addr: "127.0.0.1:" + strconv.Itoa(p), extra: extra}
		if last = s.Start(); last == nil {
			return s, nil
		}
		if port != 0 {
			break
		}
	}
	return nil, last
}

// Start (re)starts the server on its port and waits until it answers PING.
func (s *Server) Start() error {
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(s.Dir, "redis.log")}, s.extra...)
	cmd := exec.Command(s.Bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	client := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, Password: s.password()})
	defer client.Close()
	for range 200 {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redis-server exited at start-up: %s", log)
		case <-time.After(25 * time.Millisecond):
		}
		if client.Ping(context.Background()).Err() == nil {
			s.pid, s.exited = cmd.Process.Pid, exited
			return nil
		}
	}
	cmd.Process.Kill()
	<-exited
	return errors.New("redis-server did not answer PING within 5s")
}

// password is the --requirepass among the extra arguments ("" = none), so
// that Start's PING authenticates.
func (s *Server) password() string {
	for i := 0; i+1 < len(s.extra); i++ {
		if s.extra[i] == "--requirepass" {
			return s.extra[i+1]
		}
	}
	return ""
}

// Stop ends the server with SIGTERM and waits for it; a no-op when stopped.
func (s *Server) Stop() {
	if s.exited == nil {
		return
	}
	syscall.Kill(s.pid, syscall.SIGTERM)
	<-s.exited
	s.exited = nil
}

// URL is the server's redis:// URL for database db.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr, db) }

// Main runs a package's tests with one redis-server shared by all of them,
// stored in *shared (left nil when the binary is absent: the Redis cases
// skip, saying MissingReason), and exits with their status. A package's
// TestMain is just this call; its tests share the server through key
// prefixes of their own.
func Main(m *testing.M, shared **Server) {
	if bin, err := exec.LookPath("redis-server"); err == nil {
		dir, err := os.MkdirTemp("", "toolfs-redis-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if *shared, err = StartIn(bin, dir, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if s := *shared; s != nil {
		s.Stop()
		os.RemoveAll(s.Dir)
	}
	os.Exit(code)
}
