package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// readBody is the read request of the read scenarios.
func readBody(path string) []byte {
	b, _ := json.Marshal(map[string]any{"file_path": path})
	return b
}

func readRequest(ctx context.Context, base string, body []byte, session string, stream bool) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tools/read", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", session)
	if stream {
		req.Header.Set("Accept", "text/plain")
	}
	return req
}

// benchRead: a 2,000-line source file through POST /tools/read (JSON and
// streamed) versus GET from http.FileServer, at 1 and 32 connections.
func benchRead(ctx context.Context, o options, rep *report) error {
	root := filepath.Join(o.dir, "read")
	src := sourceText(2000)
	if _, err := writeFile(root, "src.go", src); err != nil {
		return err
	}
	written := time.Now()
	// Read caches on, with a 2 s racy window: the bench writes its files
	// with write(2), never through a memory map (docs/performance.md,
	// "Caches").
	ts, err := startToolfs(ctx, o, root, racyWindow2s)
	if err != nil {
		return err
	}
	defer ts.stop()
	uncached, err := startToolfs(ctx, o, root, "--cache-bytes=0")
	if err != nil {
		return err
	}
	defer uncached.stop()
	client := newClient(32)
	// The answers' bytes, for the floor rows: the file server's process
	// sends them from memory, as any net/http handler would at best.
	answers := filepath.Join(o.dir, "answers")
	jsonSize, streamSize, err := saveAnswers(ctx, client, ts.url, answers)
	if err != nil {
		return err
	}
	fsrv, err := startFileServer(ctx, o, root, answers)
	if err != nil {
		return err
	}
	defer fsrv.stop()

	// Check the answers once: the window, and the file server's bytes.
	a, err := mustOK(ctx, client, ts.url, "read", "check", map[string]any{"file_path": "src.go"})
	if err != nil {
		return err
	}
	if !strings.Contains(a.Output, "\n1: package fixture\n") || !strings.Contains(a.Output, "(Output capped. Showing lines 1-") {
		return fmt.Errorf("read: unexpected output %.300q", a.Output)
	}
	resp, err := client.Get(fsrv.url + "/src.go")
	if err != nil {
		return err
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != src {
		return fmt.Errorf("file server: %d bytes, want the %d of src.go", len(got), len(src))
	}

	// The file's change time must leave the racy window (2s) before a read
	// of it is cached (docs/api.md, "Read caches").
	time.Sleep(time.Until(written.Add(2100 * time.Millisecond)))

	body := readBody("src.go")
	kinds := []struct {
		name string
		srv  *server
		min  int64
		req  func(w int) *http.Request
	}{
		{"http.FileServer GET", fsrv, int64(len(src)), func(int) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fsrv.url+"/src.go", nil)
			return req
		}},
		{"floor: net/http sends the JSON answer's bytes", fsrv, jsonSize, func(int) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fsrv.url+answerJSONPath, nil)
			return req
		}},
		{"floor: net/http sends the streamed answer's bytes (chunked)", fsrv, streamSize, func(int) *http.Request {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fsrv.url+answerTextPath, nil)
			return req
		}},
		{"toolfs-api read (JSON), cached", ts, 51200, func(w int) *http.Request {
			return readRequest(ctx, ts.url, body, "s"+strconv.Itoa(w), false)
		}},
		{"toolfs-api read (streamed text), cached", ts, 51200, func(w int) *http.Request {
			return readRequest(ctx, ts.url, body, "s"+strconv.Itoa(w), true)
		}},
		{"toolfs-api read (JSON), --cache-bytes 0", uncached, 51200, func(w int) *http.Request {
			return readRequest(ctx, uncached.url, body, "s"+strconv.Itoa(w), false)
		}},
		{"toolfs-api read (streamed text), --cache-bytes 0", uncached, 51200, func(w int) *http.Request {
			return readRequest(ctx, uncached.url, body, "s"+strconv.Itoa(w), true)
		}},
	}
	var rows [][]string
	for _, conns := range []int{1, 32} {
		var base, baseCPU float64
		for k, kind := range kinds {
			op := func(w, _ int) error { return fetch(client, kind.req(w), kind.min) }
			if _, err := closedLoop(ctx, conns, o.readDur/5, op); err != nil { // warm-up
				return err
			}
			l, cpu, err := withCPU(kind.srv, func() (latencies, error) { return closedLoop(ctx, conns, o.readDur, op) })
			if err != nil {
				return err
			}
			perReq := 1 / l.perSecond()
			r, rc, goal := "1.00x (baseline)", "1.00x (baseline)", ""
			if k == 0 {
				base, baseCPU = perReq, cpu.Seconds()
			} else {
				r, rc = ratio(perReq, base), ratio(cpu.Seconds(), baseCPU)
				if !strings.HasPrefix(kind.name, "floor:") {
					goal = verdict(perReq <= 1.5*base)
				}
			}
			rows = append(rows, []string{strconv.Itoa(conns), kind.name, fmt.Sprintf("%.0f", l.perSecond()),
				ms(l.quantile(0.5)), ms(l.quantile(0.99)), us(cpu), r, rc, goal})
		}
	}
	rep.table("Read a 2,000-line source file (60 KiB) vs http.FileServer", []string{
		"connections", "server", "requests/s", "p50 ms", "p99 ms", "server CPU µs/request",
		"time per request vs FileServer", "server CPU per request vs FileServer", "goal <= 1.5x (time)"}, rows,
		fmt.Sprintf("File %d bytes, %d lines. The read window stops at the 51,200-byte cap; the JSON answer is %d bytes (output plus metadata.lines), the streamed one %d bytes; the FileServer sends the %d bytes of the file. The floor rows are a bare net/http handler in the file server's process writing a read's answer, kept in memory, with one Write (JSON: with Content-Length; streamed: chunked, as toolfs-api sends it): what sending those bytes costs with no work at all. Each configuration: %v warm-up, then %v closed-loop; one Go client with keep-alive.",
			len(src), 2000, jsonSize, streamSize, len(src), o.readDur/5, o.readDur))
	return nil
}

// The floor rows' paths on the file server (serveFiles), and the files in
// its answers folder they send.
const (
	answerJSONPath = "/_answer/json"
	answerTextPath = "/_answer/text"
	answerJSONFile = "read.json"
	answerTextFile = "read.txt"
)

// saveAnswers writes the JSON and the streamed answer of a read of src.go
// into dir and returns their sizes.
func saveAnswers(ctx context.Context, c *http.Client, base, dir string) (int64, int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	var sizes [2]int64
	for i, stream := range []bool{false, true} {
		resp, err := c.Do(readRequest(ctx, base, readBody("src.go"), "size", stream))
		if err != nil {
			return 0, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("read: status %d: %.300s", resp.StatusCode, b)
		}
		name := []string{answerJSONFile, answerTextFile}[i]
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return 0, 0, err
		}
		sizes[i] = int64(len(b))
	}
	return sizes[0], sizes[1], nil
}

// benchBigRead: the first window of a large file (every line must still be
// counted for totalLines) versus `wc -l`, and the server's peak memory.
func benchBigRead(ctx context.Context, o options, rep *report) error {
	root := filepath.Join(o.dir, "big")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	path := filepath.Join(root, "big.txt")
	t := time.Now()
	lines, err := bigText(path, o.bigSize)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "   wrote %s (%d lines) in %.1fs\n", mib(o.bigSize), lines, time.Since(t).Seconds())
	written := time.Now()
	if err := warmCache(path); err != nil {
		return err
	}

	// Every read a whole scan: the read caches off (the caches' figures
	// come after, from a second server).
	ts, err := startToolfs(ctx, o, root, "--cache-bytes=0")
	if err != nil {
		return err
	}
	defer ts.stop()
	client := newClient(1)
	if _, err := mustOK(ctx, client, ts.url, "write", "warm", map[string]any{"file_path": "small.txt", "content": "a\nb\n"}); err != nil {
		return err
	}
	if _, err := mustOK(ctx, client, ts.url, "read", "warm", map[string]any{"file_path": "small.txt"}); err != nil {
		return err
	}
	idle, err := readMemory(ts.pid)
	if err != nil {
		return err
	}

	readOnce := func() error {
		a, err := mustOK(ctx, client, ts.url, "read", "big", map[string]any{"file_path": "big.txt"})
		if err != nil {
			return err
		}
		var meta struct {
			TotalLines int `json:"totalLines"`
			Lines      []struct{ Number int }
		}
		if err := json.Unmarshal(a.Metadata, &meta); err != nil {
			return err
		}
		if meta.TotalLines != lines || len(meta.Lines) == 0 || meta.Lines[0].Number != 1 {
			return fmt.Errorf("read big.txt: totalLines %d (want %d), %d lines shown", meta.TotalLines, lines, len(meta.Lines))
		}
		return nil
	}
	wcOnce := func() error {
		out, err := command(o, "wc", "-l", path).Output()
		if err != nil {
			return fmt.Errorf("wc -l: %w", err)
		}
		n, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		if n != strconv.Itoa(lines) {
			return fmt.Errorf("wc -l says %s lines, want %d", n, lines)
		}
		return nil
	}
	firstLine := func() (time.Duration, error) { // streamed: time to the first window line
		start := time.Now()
		resp, err := client.Do(readRequest(ctx, ts.url, readBody("big.txt"), "big", true))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		buf := make([]byte, 64<<10)
		var seen []byte
		var first time.Duration
		for {
			n, err := resp.Body.Read(buf)
			if first == 0 && len(seen) < 1<<10 {
				seen = append(seen, buf[:n]...)
				if bytes.Contains(seen, []byte("\n1: ")) {
					first = time.Since(start)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, err
			}
		}
		if first == 0 {
			return 0, errors.New("streamed read of big.txt: no first line")
		}
		return first, nil
	}

	var wc, toolfs, stream []time.Duration
	for i := 0; i <= o.bigReps; i++ { // rep 0 is a warm-up; wc and toolfs alternate
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, run := range []struct {
			f    func() error
			into *[]time.Duration
		}{{wcOnce, &wc}, {readOnce, &toolfs}} {
			t := time.Now()
			if err := run.f(); err != nil {
				return err
			}
			if i > 0 {
				*run.into = append(*run.into, time.Since(t))
			}
		}
		d, err := firstLine()
		if err != nil {
			return err
		}
		stream = append(stream, d)
	}
	peak, err := readMemory(ts.pid)
	if err != nil {
		return err
	}
	growth := peak.hwm - idle.rss
	mw, mt, ms1 := median(wc), median(toolfs), median(stream)
	rep.table(fmt.Sprintf("Read window at offset 1 of a %s file (page cache) vs wc -l", mib(o.bigSize)), []string{
		"what", "median", "vs wc -l", "goal"}, [][]string{
		{"`wc -l` (process)", ms(mw) + " ms", "1.00x (baseline)", ""},
		{"toolfs-api read, JSON, exact totalLines", ms(mt) + " ms", ratio(float64(mt), float64(mw)), "<= 2x: " + verdict(mt <= 2*mw)},
		{"toolfs-api read, streamed: first line out", ms(ms1) + " ms", ratio(float64(ms1), float64(mw)), ""},
		{"server peak RSS growth (VmHWM - idle VmRSS)", mib(growth), fmt.Sprintf("idle %s, peak %s", mib(idle.rss), mib(peak.hwm)), "< 64 MiB: " + verdict(growth < 64<<20)},
	}, fmt.Sprintf("%d lines; %d timed repetitions each after one warm-up, wc and toolfs-api alternating; toolfs-api with --cache-bytes 0, so every read scans the file.", lines, o.bigReps))
	return deepWindows(ctx, o, root, lines, written, rep)
}

// deepWindows: with the read caches on, a first read of big.txt (it builds
// the line index), then 10 windows at random offsets deep in the file, each
// a window cache miss served through the index.
func deepWindows(ctx context.Context, o options, root string, lines int, written time.Time, rep *report) error {
	ts, err := startToolfs(ctx, o, root, racyWindow2s)
	if err != nil {
		return err
	}
	defer ts.stop()
	client := newClient(1)
	// The file's change time must leave the racy window (2s) first.
	time.Sleep(time.Until(written.Add(2100 * time.Millisecond)))
	window := func(offset int) (time.Duration, error) {
		t := time.Now()
		a, err := mustOK(ctx, client, ts.url, "read", "deep", map[string]any{"file_path": "big.txt", "offset": offset})
		if err != nil {
			return 0, err
		}
		took := time.Since(t)
		var meta struct {
			TotalLines int `json:"totalLines"`
			Lines      []struct{ Number int }
		}
		if err := json.Unmarshal(a.Metadata, &meta); err != nil {
			return 0, err
		}
		if meta.TotalLines != lines || len(meta.Lines) == 0 || meta.Lines[0].Number != offset {
			return 0, fmt.Errorf("read big.txt at %d: totalLines %d (want %d), %d lines shown", offset, meta.TotalLines, lines, len(meta.Lines))
		}
		return took, nil
	}
	first, err := window(1)
	if err != nil {
		return err
	}
	deep := min(10_000_000, lines*3/4)
	rng := rand.New(rand.NewPCG(1, 2))
	var d []time.Duration
	for range 10 {
		took, err := window(deep + rng.IntN(max(lines-deep-2000, 1)))
		if err != nil {
			return err
		}
		d = append(d, took)
	}
	mt, worst := median(d), slices.Max(d)
	rep.table(fmt.Sprintf("Windows deep in a %s file after a first read (read caches on)", mib(o.bigSize)), []string{
		"what", "time", "goal"}, [][]string{
		{"first read (offset 1: scans the file, builds the line index)", ms(first) + " ms", ""},
		{fmt.Sprintf("10 windows at random offsets from line %d: median", deep), ms(mt) + " ms", "<= 10 ms: " + verdict(mt <= 10*time.Millisecond)},
		{"… slowest of the 10", ms(worst) + " ms", "<= 10 ms: " + verdict(worst <= 10*time.Millisecond)},
	}, "Each window is the default 2,000-line limit capped at 51,200 bytes, over HTTP (JSON), a different offset each time (no window cache hit): the server reads from the index's nearest mark (at most 64 KiB before the window).")
	return nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// benchEdit: a one-line edit in the middle of a large file through HTTP
// versus the floor of publishing those bytes durably ourselves.
func benchEdit(ctx context.Context, o options, rep *report) error {
	root := filepath.Join(o.dir, "edit")
	content, markerA, markerB := editText(o.editSize)
	if _, err := writeFile(root, "big.txt", content); err != nil {
		return err
	}
	ts, err := startToolfs(ctx, o, root)
	if err != nil {
		return err
	}
	defer ts.stop()
	client := newClient(1)
	if _, err := mustOK(ctx, client, ts.url, "read", "edit", map[string]any{"file_path": "big.txt"}); err != nil {
		return err
	}
	flipped := strings.Replace(content, markerA, markerB, 1)
	edit := func(i int) (int, error) {
		old, new := markerA, markerB
		if i%2 == 1 {
			old, new = new, old
		}
		a, err := mustOK(ctx, client, ts.url, "edit", "edit", map[string]any{"file_path": "big.txt", "old_string": old, "new_string": new})
		if err != nil {
			return 0, err
		}
		var meta struct{ Diffs []json.RawMessage }
		json.Unmarshal(a.Metadata, &meta)
		return len(meta.Diffs), nil
	}
	floorPath := filepath.Join(root, "floor.txt")
	data := [2][]byte{[]byte(flipped), []byte(content)}

	var server, floor []time.Duration
	diffs := 0
	for i := 0; i <= o.editReps; i++ { // rep 0 is a warm-up
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t := time.Now()
		n, err := edit(i)
		if err != nil {
			return err
		}
		if i > 0 {
			server = append(server, time.Since(t))
		}
		diffs = n
		t = time.Now()
		if err := durableReplace(floorPath, data[i%2]); err != nil {
			return err
		}
		if i > 0 {
			floor = append(floor, time.Since(t))
		}
	}
	want := data[o.editReps%2]
	got, err := os.ReadFile(filepath.Join(root, "big.txt"))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("after %d edits big.txt is not the expected %d bytes", o.editReps+1, len(want))
	}
	mf, ms1 := median(floor), median(server)
	rep.table(fmt.Sprintf("Edit one line in the middle of a %s file", mib(o.editSize)), []string{
		"what", "median", "p90", "vs floor", "goal <= 2x"}, [][]string{
		{"floor: write the bytes to a temp file, fsync, rename, fsync folder", ms(mf) + " ms", ms(quantileOf(floor, 0.9)) + " ms", "1.00x (baseline)", ""},
		{"toolfs-api edit (HTTP, policy on)", ms(ms1) + " ms", ms(quantileOf(server, 0.9)) + " ms", ratio(float64(ms1), float64(mf)), verdict(ms1 <= 2*mf)},
	}, fmt.Sprintf("%d timed edits after one warm-up, alternating with the floor in the same folder. The floor already holds the bytes in memory; the server reads the file twice (check and count, then copy with the replacement). Hunks in the answer: %d (the diff basis is kept only below 10 MiB).", o.editReps, diffs))
	return nil
}

func quantileOf(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return latencies{d: s}.quantile(q)
}

// editText is a text of about size bytes with one marker line in the middle.
func editText(size int64) (content, markerA, markerB string) {
	markerA, markerB = "// MARKER: alpha state\n", "// MARKER: beta  state\n"
	half := sourceText(int(size / 2 / 31))
	var b strings.Builder
	b.WriteString(half)
	b.WriteString(markerA)
	b.WriteString(strings.ReplaceAll(half, "package fixture", "// second half"))
	s := b.String()
	if int64(len(s)) < size {
		s += strings.Repeat("z", int(size)-len(s)-1) + "\n"
	}
	return s, markerA, markerB
}

// durableReplace is the floor of an atomic durable replacement.
func durableReplace(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".floor-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// benchPolicy: write and edit throughput with the policy on and off, in
// alternating rounds against two servers started side by side.
func benchPolicy(ctx context.Context, o options, rep *report) error {
	const conns, files = 4, 8
	type config struct {
		name    string
		srv     *server
		counts  map[string]int
		wall    map[string]time.Duration
		samples map[string][]time.Duration
	}
	var cfgs []*config
	for _, on := range []bool{true, false} {
		root := filepath.Join(o.dir, "policy-"+strconv.FormatBool(on))
		for f := range files {
			if _, err := writeFile(root, fmt.Sprintf("f%d.go", f), sourceText(130)); err != nil {
				return err
			}
		}
		var extra []string
		if !on {
			extra = []string{"--policy=false"}
		}
		s, err := startToolfs(ctx, o, root, extra...)
		if err != nil {
			return err
		}
		defer s.stop()
		name := "policy on"
		if !on {
			name = "policy off (--policy=false)"
		}
		cfgs = append(cfgs, &config{name: name, srv: s, counts: map[string]int{}, wall: map[string]time.Duration{}, samples: map[string][]time.Duration{}})
	}
	client := newClient(conns)
	contents := [2]string{sourceText(130), strings.Replace(sourceText(130), "v0010 :=", "w0010 :=", 1)}
	for _, c := range cfgs {
		for f := range files { // every session reads its file once: the policy then allows the rest
			if _, err := mustOK(ctx, client, c.srv.url, "read", fmt.Sprintf("w%d", f), map[string]any{"file_path": fmt.Sprintf("f%d.go", f)}); err != nil {
				return err
			}
		}
	}
	ops := map[string]func(url string, w, i int) error{
		"write": func(url string, w, i int) error {
			_, err := mustOK(ctx, client, url, "write", fmt.Sprintf("w%d", w), map[string]any{"file_path": fmt.Sprintf("f%d.go", w), "content": contents[i%2]})
			return err
		},
		"edit": func(url string, w, i int) error {
			old, new := "v0020 :=", "x0020 :="
			if i%2 == 1 {
				old, new = new, old
			}
			_, err := mustOK(ctx, client, url, "edit", fmt.Sprintf("w%d", w), map[string]any{"file_path": fmt.Sprintf("f%d.go", w), "old_string": old, "new_string": new})
			return err
		},
	}
	for round := range o.policyRounds {
		order := cfgs
		if round%2 == 1 {
			order = []*config{cfgs[1], cfgs[0]}
		}
		for _, c := range order {
			for _, name := range []string{"write", "edit"} {
				op := ops[name]
				// Each worker owns one file: an even number of calls per
				// worker ends in the start state, which the next round needs
				// for its edits.
				l, err := closedLoop(ctx, conns, o.policyDur, func(w, i int) error { return op(c.srv.url, w, i) })
				if err != nil {
					return fmt.Errorf("%s, %s: %w", c.name, name, err)
				}
				if err := settle(ctx, client, c.srv.url, files, contents[0]); err != nil {
					return err
				}
				c.counts[name] += len(l.d)
				c.wall[name] += l.wall
				c.samples[name] = append(c.samples[name], l.d...)
			}
		}
	}
	var rows [][]string
	for _, name := range []string{"write", "edit"} {
		on, off := cfgs[0], cfgs[1]
		tOn := float64(on.counts[name]) / on.wall[name].Seconds()
		tOff := float64(off.counts[name]) / off.wall[name].Seconds()
		overhead := tOff/tOn - 1
		for _, c := range cfgs {
			t := float64(c.counts[name]) / c.wall[name].Seconds()
			row := []string{name, c.name, fmt.Sprintf("%.0f", t), ms(quantileOf(c.samples[name], 0.5)), ms(quantileOf(c.samples[name], 0.99)), "", ""}
			if c == on {
				row[5] = fmt.Sprintf("%+.1f%%", overhead*100)
				row[6] = verdict(overhead < 0.10)
			}
			rows = append(rows, row)
		}
	}
	rep.table("Write and edit throughput, policy on vs off", []string{
		"tool", "server", "calls/s", "p50 ms", "p99 ms", "policy overhead (off/on - 1)", "goal < 10%"}, rows,
		fmt.Sprintf("%d connections, each its own session and its own %d-byte file (a session read its file once first); %d rounds of %v per tool and server, alternating which server goes first. Every call is a durable replacement (fsync of the file and the folder).",
			conns, len(contents[0]), o.policyRounds, o.policyDur))
	return nil
}

// settle puts every file of the policy scenario back in its start state (an
// edit loop may stop after an odd number of calls on a worker) and re-reads
// it, so the next loop starts from the same bytes.
func settle(ctx context.Context, c *http.Client, url string, files int, content string) error {
	for f := range files {
		s := fmt.Sprintf("w%d", f)
		p := fmt.Sprintf("f%d.go", f)
		if _, err := mustOK(ctx, c, url, "read", s, map[string]any{"file_path": p}); err != nil {
			return err
		}
		if _, err := mustOK(ctx, c, url, "write", s, map[string]any{"file_path": p, "content": content}); err != nil {
			return err
		}
	}
	return nil
}
