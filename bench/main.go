// Command bench measures toolfs-api against baselines started in the same
// run, on loopback, and prints the ratios (docs/performance.md explains every
// figure):
//
//	read     2,000-line source file: toolfs-api vs Go's http.FileServer, 1 and 32 connections
//	bigread  read window at offset 1 of a large file vs `wc -l`, and the server's peak memory
//	edit     edit of a 10 MiB file vs the floor: temp file, write, fsync, rename, folder fsync
//	policy   write and edit throughput with --policy=true vs --policy=false
//	mcp      read, write, edit vs @modelcontextprotocol/server-filesystem over stdio
//	load     mixed workload (80% read, 15% edit, 5% write) over many files and sessions
//
// Usage:
//
//	go run ./bench -mode=short   # tiny files, about a second per scenario (CI smoke)
//	go run ./bench -mode=full    # the documented figures
//
// Servers run as child processes (the toolfs-api binary is built first), so
// their memory can be read from /proc and the client does not share their
// heap. With -pin (the default on two or more CPUs) servers and baselines run
// on the last CPU and the client on the others. With -cpuprofile or
// -memprofile the toolfs-api server runs in-process instead, so the profile
// covers it.
//
// Every scenario also checks that the answers are right (status, content,
// bytes on disk); any failure makes the command exit 1. Timing is reported,
// never asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// params are the sizes and durations of one mode.
type params struct {
	readDur      time.Duration // per configuration of the read scenario
	bigSize      int64         // bytes of the bigread file
	bigReps      int           // timed repetitions of bigread (median reported)
	editSize     int64         // bytes of the edit file
	editReps     int           // timed edits (median reported)
	policyDur    time.Duration // per round of the policy scenario
	policyRounds int           // alternating on/off rounds
	mcpCalls     int           // timed calls per tool and server
	loadDur      time.Duration // mixed workload duration
	loadFiles    int
	loadSessions int
	loadWorkers  int
}

var modes = map[string]params{
	"short": {
		readDur: 500 * time.Millisecond, bigSize: 16 << 20, bigReps: 3,
		editSize: 1 << 20, editReps: 5, policyDur: 300 * time.Millisecond, policyRounds: 2,
		mcpCalls: 50, loadDur: 2 * time.Second, loadFiles: 100, loadSessions: 20, loadWorkers: 8,
	},
	"full": {
		readDur: 10 * time.Second, bigSize: 1 << 30, bigReps: 7,
		editSize: 10 << 20, editReps: 41, policyDur: 5 * time.Second, policyRounds: 6,
		mcpCalls: 1000, loadDur: 30 * time.Second, loadFiles: 1000, loadSessions: 100, loadWorkers: 32,
	},
}

var scenarioOrder = []string{"read", "bigread", "edit", "policy", "mcp", "load"}

type options struct {
	params
	mode       string
	dir        string
	serverBin  string
	pin        bool
	serverCPU  int
	cpuprofile string
	memprofile string
	// serverArgs are extra flags of every toolfs-api child; not in params,
	// which the mode overwrites after the flags are parsed.
	serverArgs string
	mcpDir     string
	mcp        string
	keep       bool
	// sessionStore is passed to every toolfs-api child as --session-store
	// ("" = the default, memory).
	sessionStore string
}

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	if len(os.Args) > 1 && os.Args[1] == "fileserver" {
		return serveFiles(os.Args[2:])
	}
	var o options
	var only string
	var loadDur time.Duration
	var loadFiles int
	flag.StringVar(&o.mode, "mode", "short", "short (tiny, for CI) or full (the documented figures)")
	flag.StringVar(&only, "only", "", "comma-separated scenarios to run (default all): "+strings.Join(scenarioOrder, ","))
	flag.StringVar(&o.dir, "dir", "", "work folder (default: a new temporary folder, removed at the end)")
	flag.StringVar(&o.serverBin, "server", "", "toolfs-api binary (default: go build ./cmd/toolfs-api into the work folder)")
	flag.BoolVar(&o.pin, "pin", runtime.NumCPU() >= 2, "pin servers to one CPU and the client to the others")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process; toolfs-api then runs in-process")
	flag.StringVar(&o.memprofile, "memprofile", "", "write a heap profile of this process at the end of the load scenario; toolfs-api then runs in-process")
	flag.StringVar(&o.mcpDir, "mcp-dir", "bench/mcp", "folder with node_modules/@modelcontextprotocol/server-filesystem (npm ci there)")
	flag.StringVar(&o.mcp, "mcp", "auto", "MCP peer: auto (skip when not installed), on (fail when not installed), off")
	flag.DurationVar(&loadDur, "load-duration", 0, "mixed workload duration (default: 2s short, 30s full)")
	flag.StringVar(&o.serverArgs, "server-args", "", "comma-separated extra flags of every toolfs-api child (e.g. --cache-bytes=0)")
	flag.IntVar(&loadFiles, "load-files", 0, "files of the mixed workload (default: 100 short, 1000 full)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work folder")
	flag.StringVar(&o.sessionStore, "session-store", "", "--session-store of every toolfs-api child (e.g. redis://127.0.0.1:6379/0; default memory)")
	flag.Parse()

	p, ok := modes[o.mode]
	if !ok {
		return fmt.Errorf("-mode must be short or full, not %q", o.mode)
	}
	o.params = p
	if o.mcp != "auto" && o.mcp != "on" && o.mcp != "off" {
		return fmt.Errorf("-mcp must be auto, on or off, not %q", o.mcp)
	}
	if loadDur > 0 {
		o.loadDur = loadDur
	}
	if loadFiles > 0 {
		o.loadFiles = loadFiles
	}
	run := map[string]bool{}
	for _, s := range scenarioOrder {
		run[s] = only == ""
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, known := run[s]; !known {
			return fmt.Errorf("-only: unknown scenario %q (known: %s)", s, strings.Join(scenarioOrder, ","))
		}
		run[s] = true
	}
	if o.mcp == "off" {
		run["mcp"] = false
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.dir == "" {
		d, err := os.MkdirTemp("", "toolfs-bench-")
		if err != nil {
			return err
		}
		o.dir = d
		if !o.keep {
			defer os.RemoveAll(d)
		}
	}
	o.dir, _ = filepath.Abs(o.dir)
	if o.pin {
		cpu, err := pinClient()
		if err != nil {
			return fmt.Errorf("-pin: %w", err)
		}
		o.serverCPU = cpu
	}
	if o.serverBin == "" && !o.inProcess() {
		bin, err := buildServer(ctx, o.dir)
		if err != nil {
			return err
		}
		o.serverBin = bin
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	rep := &report{out: os.Stdout}
	rep.machine(o)
	failed := 0
	for _, s := range scenarioOrder {
		if !run[s] || ctx.Err() != nil {
			continue
		}
		start := time.Now()
		fmt.Fprintf(os.Stderr, "== %s\n", s)
		if err := scenarios[s](ctx, o, rep); err != nil {
			failed++
			rep.failure(s, err)
		}
		fmt.Fprintf(os.Stderr, "== %s done in %.1fs (load average %s)\n", s, time.Since(start).Seconds(), loadAverage())
	}
	fmt.Fprintf(rep.out, "load average at the end: %s\n", loadAverage())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed > 0 {
		return fmt.Errorf("%d scenario(s) failed", failed)
	}
	return nil
}

// inProcess reports whether toolfs-api runs in this process, for profiles.
func (o options) inProcess() bool { return o.cpuprofile != "" || o.memprofile != "" }

var scenarios = map[string]func(context.Context, options, *report) error{
	"read":    benchRead,
	"bigread": benchBigRead,
	"edit":    benchEdit,
	"policy":  benchPolicy,
	"mcp":     benchMCP,
	"load":    benchLoad,
}

// report collects result tables and prints them as Markdown.
type report struct{ out io.Writer }

func (r *report) machine(o options) {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, cpu, _ = strings.Cut(l, ": ")
				break
			}
		}
	}
	var uts syscall.Utsname
	syscall.Uname(&uts)
	kernel := utsString(uts.Release[:])
	pin := "not pinned: client and servers share every CPU"
	if o.pin {
		pin = fmt.Sprintf("servers and baselines pinned to CPU %d, client to the other CPUs", o.serverCPU)
	}
	fmt.Fprintf(r.out, "# toolfs-api bench, mode %s\n\nmachine: %d CPUs (%s), kernel %s, %s, %s; %s; load average at start: %s\n\n",
		o.mode, runtime.NumCPU(), cpu, kernel, runtime.Version(), runtime.GOARCH, pin, loadAverage())
}

// loadAverage is the 1, 5 and 15 minute load average: other work on the
// machine shows here.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// table adds a Markdown table and prints it at once (long runs show progress).
func (r *report) table(title string, header []string, rows [][]string, notes ...string) {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n| %s |\n|%s\n", title, strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	b.WriteString("\n")
	fmt.Fprint(r.out, b.String())
}

func (r *report) failure(scenario string, err error) {
	fmt.Fprintf(r.out, "## %s: FAILED\n\n    %v\n\n", scenario, err)
}
