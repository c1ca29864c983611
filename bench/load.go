package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The mixed workload is a bounded pool of workers driving sessions, not an
// open-loop generator such as vegeta: each session's next request depends on
// its last answer (an edit's old_string comes from the lines its read
// returned, and the server only accepts it after that read), so requests
// cannot be prepared in advance. A worker takes a free session, makes one
// call for it, and gives it back, so each session behaves as one agent: one
// call at a time.

const loadLinesPerFile = 40

// loadSession is one agent: what it has read, per file.
type loadSession struct {
	id    string
	known map[int][]string // file -> its lines as last read or written
}

// loadStats is what the workers count.
type loadStats struct {
	mu         sync.Mutex
	byTool     map[string][]time.Duration
	stale      int
	unobserved int // FS_NOT_OBSERVED of a file the session had read: see storeMetrics
	errors     int
	errorList  []string
}

func (s *loadStats) add(tool string, d time.Duration) {
	s.mu.Lock()
	s.byTool[tool] = append(s.byTool[tool], d)
	s.mu.Unlock()
}

func (s *loadStats) fail(msg string) {
	s.mu.Lock()
	s.errors++
	if len(s.errorList) < 5 {
		s.errorList = append(s.errorList, msg)
	}
	s.mu.Unlock()
}

func (s *loadStats) staleVersion() {
	s.mu.Lock()
	s.stale++
	s.mu.Unlock()
}

func (s *loadStats) unobservedAfterRead() {
	s.mu.Lock()
	s.unobserved++
	s.mu.Unlock()
}

// storeMetrics reads the server's toolfs_observations_evicted_total
// (observations its session store's bounds removed) and toolfs_observations
// (held now): docs/api.md, "Metrics". Each is 0 when the store does not
// report it.
func storeMetrics(ctx context.Context, c *http.Client, base string) (evicted, held int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		n, _ := strconv.ParseFloat(v, 64)
		switch name {
		case "toolfs_observations_evicted_total":
			evicted = int(n)
		case "toolfs_observations":
			held = int(n)
		}
	}
	return evicted, held, nil
}

func loadFile(f int) string { return fmt.Sprintf("pkg%02d/file%04d.go", f%10, f) }

func loadLine(f, k, n int) string { return fmt.Sprintf("counter_%02d = %d // file %04d", k, n, f) }

// bump increments the counter of a line made by loadLine.
func bump(line string) string {
	name, rest, _ := strings.Cut(line, " = ")
	n, comment, _ := strings.Cut(rest, " ")
	v, _ := strconv.Atoi(n)
	return name + " = " + strconv.Itoa(v+1) + " " + comment
}

// benchLoad: 80% reads, 15% edits, 5% writes over many files and sessions
// for a bounded time, with the server's memory sampled every second.
func benchLoad(ctx context.Context, o options, rep *report) error {
	root := filepath.Join(o.dir, "load")
	for f := range o.loadFiles {
		lines := make([]string, loadLinesPerFile)
		for k := range lines {
			lines[k] = loadLine(f, k, 0)
		}
		if _, err := writeFile(filepath.Dir(filepath.Join(root, loadFile(f))), filepath.Base(loadFile(f)), strings.Join(lines, "\n")+"\n"); err != nil {
			return err
		}
	}
	ts, err := startToolfs(ctx, o, root)
	if err != nil {
		return err
	}
	defer ts.stop()
	client := newClient(o.loadWorkers)
	if _, err := mustOK(ctx, client, ts.url, "read", "warm", map[string]any{"file_path": loadFile(0)}); err != nil {
		return err
	}

	sessions := make(chan *loadSession, o.loadSessions)
	for i := range o.loadSessions {
		sessions <- &loadSession{id: fmt.Sprintf("agent-%03d", i), known: map[int][]string{}}
	}
	stats := &loadStats{byTool: map[string][]time.Duration{}}
	runCtx, cancel := context.WithTimeout(ctx, o.loadDur)
	defer cancel()

	var rss []int64
	sampled := make(chan struct{})
	go func() { // server memory, every second
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if m, err := readMemory(ts.pid); err == nil {
				rss = append(rss, m.rss)
			}
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	cpu0, _ := cpuOf(ts.pid)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range o.loadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for runCtx.Err() == nil {
				var s *loadSession
				select {
				case s = <-sessions:
				case <-runCtx.Done():
					return
				}
				loadStep(runCtx, client, ts.url, o.loadFiles, rng, s, stats)
				sessions <- s
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu1, _ := cpuOf(ts.pid)
	evicted, held, err := storeMetrics(ctx, client, ts.url)
	if err != nil {
		return err
	}
	if stats.unobserved > evicted { // more than the bounds explain: lost reads
		stats.errors += stats.unobserved
		stats.errorList = append(stats.errorList, fmt.Sprintf("%d FS_NOT_OBSERVED after a read, but the server evicted only %d observations", stats.unobserved, evicted))
	}
	<-sampled
	var goMemory string
	if o.memprofile != "" {
		if err := writeHeapProfile(o.memprofile); err != nil {
			return err
		}
		goMemory = goMemoryNote()
	}
	final, err := readMemory(ts.pid)
	if err != nil {
		return err
	}

	var all []time.Duration
	var rows [][]string
	for _, tool := range []string{"read", "edit", "write"} {
		d := stats.byTool[tool]
		all = append(all, d...)
		slices.Sort(d)
		l := latencies{d: d, wall: wall}
		rows = append(rows, []string{tool, strconv.Itoa(len(d)), fmt.Sprintf("%.0f", l.perSecond()), ms(l.quantile(0.5)), ms(l.quantile(0.99))})
	}
	slices.Sort(all)
	l := latencies{d: all, wall: wall}
	rows = append(rows, []string{"**all**", strconv.Itoa(len(all)), fmt.Sprintf("%.0f", l.perSecond()), ms(l.quantile(0.5)), ms(l.quantile(0.99))})
	var series []string
	for _, r := range rss {
		series = append(series, strconv.FormatFloat(float64(r)/(1<<20), 'f', 1, 64))
	}
	notes := []string{
		fmt.Sprintf("%v, %d workers, %d sessions, %d files of %d lines. Edits and writes first read the file if their session has not (those reads count as reads). 409 FS_STALE_VERSION (two sessions raced on one file): %d, counted apart, not errors. 409 FS_NOT_OBSERVED of a file the session had read, after the session store's bounds evicted that read (the server counted %d evictions, toolfs_observations_evicted_total, and held %d observations at the end; the session reads again, as the answer asks): %d, counted apart, not errors. **Errors: %d.**",
			wall.Round(100*time.Millisecond), o.loadWorkers, o.loadSessions, o.loadFiles, loadLinesPerFile, stats.stale, evicted, held, stats.unobserved, stats.errors),
		fmt.Sprintf("Server RSS per second (MiB): %s; peak (VmHWM) %s.", strings.Join(series, " "), mib(final.hwm)),
	}
	if len(rss) > 0 {
		notes = append(notes, fmt.Sprintf("Peak RSS growth over the first sample (the server idle after one read): %s.", mib(final.hwm-rss[0])))
	}
	if len(all) > 0 && !o.inProcess() {
		notes = append(notes, fmt.Sprintf("Server CPU: %.0f µs per call.", float64((cpu1-cpu0).Microseconds())/float64(len(all))))
	}
	if goMemory != "" {
		notes = append(notes, goMemory)
	}
	if stats.errors > 0 {
		notes = append(notes, "First errors: "+strings.Join(stats.errorList, "; "))
	}
	rep.table("Mixed workload: 80% read, 15% edit, 5% write", []string{"tool", "calls", "calls/s", "p50 ms", "p99 ms"}, rows, notes...)
	if stats.errors > 0 {
		return fmt.Errorf("%d errors under load, first: %s", stats.errors, stats.errorList[0])
	}
	if len(all) == 0 {
		return fmt.Errorf("no call finished in %v", o.loadDur)
	}
	return nil
}

// loadStep makes one call for session s (two when an edit or a write first
// needs a read).
func loadStep(ctx context.Context, c *http.Client, url string, files int, rng *rand.Rand, s *loadSession, st *loadStats) {
	f := rng.IntN(files)
	p := rng.IntN(100)
	if _, ok := s.known[f]; p < 80 || !ok {
		if !loadRead(ctx, c, url, f, s, st) || p < 80 {
			return
		}
	}
	lines := s.known[f]
	t := time.Now()
	var a answer
	var err error
	var tool string
	var next []string
	if p < 95 {
		tool = "edit"
		k := rng.IntN(len(lines))
		next = slices.Clone(lines)
		next[k] = bump(lines[k])
		a, err = call(ctx, c, url, "edit", s.id, map[string]any{"file_path": loadFile(f), "old_string": lines[k], "new_string": next[k]})
	} else {
		tool = "write"
		next = make([]string, len(lines))
		for k, l := range lines {
			next[k] = bump(l)
		}
		a, err = call(ctx, c, url, "write", s.id, map[string]any{"file_path": loadFile(f), "content": strings.Join(next, "\n") + "\n"})
	}
	if ctx.Err() != nil {
		return // the run ended during the call: it counts for nothing
	}
	st.add(tool, time.Since(t))
	switch {
	case err != nil:
		st.fail(tool + ": " + err.Error())
	case a.status == http.StatusOK:
		s.known[f] = next
	case a.status == http.StatusConflict && a.Code == "FS_STALE_VERSION":
		st.staleVersion()
		delete(s.known, f)
	case a.status == http.StatusConflict && a.Code == "FS_NOT_OBSERVED":
		st.unobservedAfterRead() // checked against the server's evictions at the end
		delete(s.known, f)
	default:
		st.fail(fmt.Sprintf("%s: %d %s: %s", tool, a.status, a.Code, a.Output))
		delete(s.known, f)
	}
}

// loadRead reads file f for s and remembers its lines.
func loadRead(ctx context.Context, c *http.Client, url string, f int, s *loadSession, st *loadStats) bool {
	t := time.Now()
	a, err := call(ctx, c, url, "read", s.id, map[string]any{"file_path": loadFile(f)})
	if ctx.Err() != nil {
		return false
	}
	st.add("read", time.Since(t))
	if err != nil || a.status != http.StatusOK {
		st.fail(fmt.Sprintf("read: %v %d %s: %s", err, a.status, a.Code, a.Output))
		return false
	}
	var meta struct {
		Lines []struct {
			Text string `json:"text"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(a.Metadata, &meta); err != nil || len(meta.Lines) != loadLinesPerFile {
		st.fail(fmt.Sprintf("read %s: %d lines in metadata, want %d", loadFile(f), len(meta.Lines), loadLinesPerFile))
		return false
	}
	lines := make([]string, len(meta.Lines))
	for i, l := range meta.Lines {
		lines[i] = l.Text
	}
	s.known[f] = lines
	return true
}

// writeHeapProfile writes this process's heap profile after a collection,
// so in-use figures are the live heap (the server's, when in-process, and
// the client's sessions, which pprof shows under bench functions).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// goMemoryNote says where this process's memory is, from runtime/metrics,
// after the collection writeHeapProfile ran: live heap, what the heap holds
// beyond it, stacks, and what the runtime has mapped and not returned.
func goMemoryNote() string {
	names := []string{
		"/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/stacks:bytes",
		"/memory/classes/total:bytes", "/gc/heap/goal:bytes", "/gc/gomemlimit:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	parts := make([]string, len(samples))
	for i, sm := range samples {
		v := "n/a"
		if sm.Value.Kind() == metrics.KindUint64 {
			v = mib(int64(sm.Value.Uint64()))
		}
		parts[i] = sm.Name + " " + v
	}
	return "Go memory of this process (server and client, in-process) at the end, after a collection: " + strings.Join(parts, ", ") + "."
}
