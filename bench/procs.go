package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	toolfs "github.com/toolfs/toolfs-api/internal/server"
)

// buildServer builds cmd/toolfs-api into dir, as a user would.
func buildServer(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "toolfs-api")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/toolfs-api")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/toolfs-api (run the bench from the repository root): %w", err)
	}
	return bin, nil
}

// pinClient restricts this process to every allowed CPU but the last, which
// it returns for the servers. Every existing thread is moved; threads created
// later inherit the mask.
func pinClient() (int, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return 0, err
	}
	var cpus []int
	for i := 0; i < 1024; i++ {
		if all.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	if len(cpus) < 2 {
		return 0, errors.New("needs at least 2 CPUs")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return 0, errors.New("taskset (util-linux) is needed to pin the servers")
	}
	server := cpus[len(cpus)-1]
	var client unix.CPUSet
	for _, c := range cpus[:len(cpus)-1] {
		client.Set(c)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, err
	}
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t.Name())
		if err := unix.SchedSetaffinity(tid, &client); err != nil && !errors.Is(err, unix.ESRCH) {
			return 0, err
		}
	}
	runtime.GOMAXPROCS(len(cpus) - 1)
	return server, nil
}

// command prepares a server or baseline process, pinned when asked. It dies
// with the bench (Pdeathsig), so an interrupted run leaves nothing behind.
func command(o options, name string, args ...string) *exec.Cmd {
	if o.pin {
		args = append([]string{"-c", strconv.Itoa(o.serverCPU), name}, args...)
		name = "taskset"
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// server is a running HTTP server under test.
type server struct {
	url  string
	pid  int // the process whose memory is reported (this one when in-process)
	stop func() error
}

var serverSeq atomic.Int64

// startToolfs starts toolfs-api on root with extra flags (e.g.
// --policy=false): the built binary as a child process, or in-process when
// profiling. Its log goes to a file in the work folder.
func startToolfs(ctx context.Context, o options, root string, extra ...string) (*server, error) {
	n := serverSeq.Add(1)
	for _, a := range strings.Split(o.serverArgs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			extra = append(extra, a)
		}
	}
	if o.inProcess() {
		return startInProcess(root, extra)
	}
	args := append([]string{"--root", root, "--addr", "127.0.0.1:0"}, extra...)
	if o.sessionStore != "" {
		args = append(args, "--session-store", o.sessionStore)
	}
	logf, err := os.Create(filepath.Join(o.dir, fmt.Sprintf("toolfs-%d.log", n)))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	return startChild(ctx, command(o, o.serverBin, args...), logf, func(line string) (string, bool) {
		_, addr, ok := strings.Cut(line, " on http://")
		return "http://" + addr, ok && strings.HasPrefix(line, "toolfs-api serving ")
	})
}

// startFileServer starts the baseline: Go's http.FileServer over root, in a
// child process of this same binary (see serveFiles), pinned like toolfs-api.
func startFileServer(ctx context.Context, o options, root string, answers ...string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startChild(ctx, command(o, self, append([]string{"fileserver", root}, answers...)...), os.Stderr, func(line string) (string, bool) {
		addr, ok := strings.CutPrefix(line, "fileserver on ")
		return addr, ok
	})
}

// startChild starts cmd and waits for the line that gives its URL.
func startChild(ctx context.Context, cmd *exec.Cmd, stderr io.Writer, parse func(string) (string, bool)) (*server, error) {
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{pid: cmd.Process.Pid, stop: func() error { return stopChild(cmd) }}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := parse(sc.Text()); ok {
				found <- u
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if ok {
			s.url = u
			return s, nil
		}
		s.stop()
		return nil, fmt.Errorf("%s exited before it listened", cmd.Path)
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	s.stop()
	return nil, fmt.Errorf("%s did not listen within 30s", cmd.Path)
}

// stopChild asks the process to drain (SIGTERM) and kills it after 10 s.
func stopChild(cmd *exec.Cmd) error {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
			return nil // killed by our signal: an expected end for a baseline
		}
		return err
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		return errors.New("did not stop within 10s of SIGTERM; killed")
	}
}

// serveFiles is the "fileserver" role: http.FileServer over a folder, with
// the same server timeouts as toolfs-api.
func serveFiles(args []string) error {
	if len(args) != 1 && len(args) != 2 {
		return errors.New("usage: bench fileserver <root> [<answers folder>]")
	}
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(args[0])))
	if len(args) == 2 {
		// The floor rows of the read scenario: a read's answers, from
		// memory, with one Write each.
		j, err := os.ReadFile(filepath.Join(args[1], answerJSONFile))
		if err != nil {
			return err
		}
		t, err := os.ReadFile(filepath.Join(args[1], answerTextFile))
		if err != nil {
			return err
		}
		length := strconv.Itoa(len(j))
		mux.HandleFunc(answerJSONPath, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", length)
			w.Write(j)
		})
		mux.HandleFunc(answerTextPath, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write(t) // no Content-Length: chunked
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("fileserver on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// racyWindow2s caches a file 2 s after its last change instead of the
// kernel's writeback bound, so the bench need not wait 35 s.
const racyWindow2s = "--cache-racy-window=2s"

// startInProcess wires toolfs-api as cmd/toolfs-api does with its defaults
// (policy on unless --policy=false is among extra, caches on unless
// --cache-bytes=0 is; the change feed off), for CPU and heap profiles.
func startInProcess(root string, extra []string) (*server, error) {
	cfg := toolfs.DefaultConfig()
	cfg.Root, cfg.Addr, cfg.Events.Enabled = root, "127.0.0.1:0", false
	for _, a := range extra {
		switch a {
		case "--policy=false":
			cfg.Policy.Enabled = false
		case "--cache-bytes=0":
			cfg.Cache.Bytes = 0
		case racyWindow2s:
			cfg.Cache.RacyWindow = 2 * time.Second
		default:
			return nil, fmt.Errorf("in-process server: unsupported flag %q", a)
		}
	}
	built, err := toolfs.New(cfg, nil)
	if err != nil {
		return nil, err
	}
	addr, err := built.Listen()
	if err != nil {
		built.Shutdown(context.Background())
		return nil, err
	}
	go built.Serve()
	return &server{url: "http://" + addr.String(), pid: os.Getpid(), stop: func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return built.Shutdown(ctx)
	}}, nil
}

// memory is a process's resident set: now and at its peak, in bytes.
type memory struct{ rss, hwm int64 }

// readMemory reads VmRSS and VmHWM from /proc/<pid>/status.
func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			m.rss = kb << 10
		case "VmHWM":
			m.hwm = kb << 10
		}
	}
	return m, nil
}

// cpuOf is the CPU time (user + system, all threads) a process has used so
// far, from /proc/<pid>/stat in USER_HZ ticks (100 per second on Linux).
// Differences over many requests give CPU per request, which other work on
// the machine disturbs far less than wall time.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
