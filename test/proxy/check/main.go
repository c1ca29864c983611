// Command check drives a toolfs-api server through an nginx reverse proxy
// and checks what a deployment behind nginx depends on: streamed reads pass
// unbuffered, change-feed events arrive as they happen, error statuses and
// bodies pass unchanged, and a bounded mixed load runs without failures. test/proxy/run.sh starts both processes and
// runs this; it prints one line per check and "N passed, M failed".
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	direct := flag.String("direct", "", "the server's own URL")
	proxy := flag.String("proxy", "", "nginx's URL, proxying to the server")
	buffered := flag.String("buffered-prefix", "/buffered", "proxy path prefix where nginx ignores X-Accel-Buffering (the control)")
	root := flag.String("root", "", "the server's workspace root")
	bigMiB := flag.Int("big-mib", 512, "size of the generated file for the streaming check (counting its lines must take far longer than sending the first ones)")
	load := flag.Duration("load", 30*time.Second, "duration of the mixed load")
	workers := flag.Int("workers", 8, "concurrent clients of the mixed load")
	flag.Parse()
	if *direct == "" || *proxy == "" || *root == "" {
		fmt.Fprintln(os.Stderr, "usage: check -direct URL -proxy URL -root DIR [-load 30s]")
		os.Exit(2)
	}
	directURL = *direct
	c := &checker{direct: *direct, proxy: *proxy, root: *root}
	c.run("stream unbuffered through nginx", func() (string, error) { return c.streaming(*bigMiB, *buffered) })
	c.run("errors pass through", c.errors)
	c.run("late stream failure stays a broken transfer", c.lateFailure)
	c.run("events unbuffered through nginx", func() (string, error) { return c.events(*buffered) })
	c.run("mixed load through nginx", func() (string, error) { return c.load(*load, *workers) })
	fmt.Printf("%d passed, %d failed\n", c.passed, c.failed)
	if c.failed > 0 {
		os.Exit(1)
	}
}

type checker struct {
	direct, proxy, root string
	passed, failed      int
}

func (c *checker) run(name string, check func() (string, error)) {
	start := time.Now()
	detail, err := check()
	if err != nil {
		c.failed++
		fmt.Printf("FAIL %s: %v\n", name, err)
		return
	}
	c.passed++
	fmt.Printf("ok   %s (%s; %.1fs)\n", name, detail, time.Since(start).Seconds())
}

var client = &http.Client{Timeout: 2 * time.Minute}

// directURL is the server's own address (not through nginx).
var directURL string

// call posts a JSON body and returns the status, content type and body.
func call(base, tool string, body any, headers ...string) (int, string, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, "", nil, err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/tools/"+tool, bytes.NewReader(b))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), raw, err
}

// timedStream is one streamed read: when its first line arrived and when it
// ended.
type timedStream struct {
	first, total time.Duration
	bytes        int64
	tail         string
}

func stream(base string, body any, identity bool) (timedStream, error) {
	var ts timedStream
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, base+"/tools/read", bytes.NewReader(b))
	if err != nil {
		return ts, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/plain")
	if identity {
		// Else the client asks for gzip and inflates as blocks arrive.
		req.Header.Set("Accept-Encoding", "identity")
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return ts, err
	}
	defer resp.Body.Close()
	// nginx consumes X-Accel-Buffering (proxy_hide_header), so only the
	// server's own answer carries it.
	if resp.StatusCode != 200 || (base == directURL && resp.Header.Get("X-Accel-Buffering") != "no") {
		return ts, fmt.Errorf("status %d, X-Accel-Buffering %q", resp.StatusCode, resp.Header.Get("X-Accel-Buffering"))
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		ts.bytes += int64(len(line))
		if ts.first == 0 && strings.HasPrefix(line, "1: ") {
			ts.first = time.Since(start)
		}
		if line != "" {
			ts.tail = line
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return ts, err
		}
	}
	ts.total = time.Since(start)
	if ts.first == 0 {
		return ts, errors.New("no first line")
	}
	return ts, nil
}

// streaming generates a big file and reads a small window of it, streamed:
// the server sends the window at once, then counts every line to the end
// for the footer. Through nginx (gzip on, see run.sh) the first line must
// arrive within the first half of the transfer; through a location that
// ignores X-Accel-Buffering (the control) it must not, which shows that the
// check can fail and that the header is what makes nginx pass chunks on.
func (c *checker) streaming(mib int, bufferedPrefix string) (string, error) {
	path := filepath.Join(c.root, "big.txt")
	want := int64(mib) << 20
	lines, err := generate(path, want)
	if err != nil {
		return "", err
	}
	body := map[string]any{"file_path": "big.txt", "limit": 20}
	wantTail := fmt.Sprintf("(Showing lines 1-20 of %d. Use offset=21 to continue.)\n", lines)
	if _, err := stream(c.direct, body, false); err != nil { // warm the page cache
		return "", err
	}
	var report []string
	for _, tc := range []struct {
		name     string
		base     string
		identity bool
		buffered bool
	}{
		{"direct", c.direct, false, false},
		{"nginx", c.proxy, false, false},
		{"nginx uncompressed", c.proxy, true, false},
		{"control: nginx ignoring X-Accel-Buffering", c.proxy + bufferedPrefix, false, true},
	} {
		// A new change time each time, so no read is served from the line
		// index a previous one cached (docs/performance.md, "Caches"): the
		// server must count every line while the first ones are on the way.
		if err := os.Chmod(path, 0o644); err != nil {
			return "", err
		}
		ts, err := stream(tc.base, body, tc.identity)
		if err != nil {
			return "", fmt.Errorf("%s: %w", tc.name, err)
		}
		if ts.tail != "</content>" {
			return "", fmt.Errorf("%s: body ends %q", tc.name, ts.tail)
		}
		report = append(report, fmt.Sprintf("%s: first line at %v of %v", tc.name, ts.first.Round(time.Millisecond), ts.total.Round(time.Millisecond)))
		// Counting a page-cached file runs at memory speed (about 4 GB/s
		// here: 512 MiB in ~0.12 s), so the margin is a half, not a quarter;
		// the control sends its first line with the last.
		early := ts.first < ts.total/2
		if early == tc.buffered {
			return "", fmt.Errorf("%s: first line at %v, transfer %v (buffered=%v)", tc.name, ts.first, ts.total, tc.buffered)
		}
	}
	// The footer is exact: every line was counted.
	_, _, raw, err := call(c.proxy, "read", body)
	if err != nil {
		return "", err
	}
	if !bytes.Contains(raw, []byte(strings.TrimSuffix(wantTail, "\n"))) {
		return "", fmt.Errorf("footer: want %q in %.200s", wantTail, raw)
	}
	return fmt.Sprintf("%d MiB, %d lines; %s", mib, lines, strings.Join(report, "; ")), nil
}

// generate writes numbered lines until the file has at least size bytes,
// unless it is already there; it returns the line count.
func generate(path string, size int64) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	n := 0
	var written int64
	for written < size {
		n++
		k, _ := fmt.Fprintf(w, "line %09d of the generated file for the proxy streaming check\n", n)
		written += int64(k)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return n, f.Close()
}

// errors checks that problem bodies and statuses pass nginx unchanged,
// compared byte for byte with the server's own answer.
func (c *checker) errors() (string, error) {
	if err := os.WriteFile(filepath.Join(c.root, "exists.txt"), []byte("present\n"), 0o644); err != nil {
		return "", err
	}
	type req struct {
		tool    string
		body    any
		headers []string
		status  int
		code    string
		output  string
	}
	p := func(rel string) string { return filepath.Join(c.root, rel) }
	reqs := []req{
		{"read", map[string]any{"file_path": "missing.txt"}, nil, 404, "FS_NOT_FOUND", `Error: cannot read "` + p("missing.txt") + `": not found`},
		{"read", map[string]any{"file_path": "missing.txt"}, []string{"Accept", "text/plain"}, 404, "FS_NOT_FOUND", `Error: cannot read "` + p("missing.txt") + `": not found`},
		{"write", map[string]any{"file_path": "exists.txt", "content": "x"}, []string{"X-Session-ID", "proxy-409"}, 409, "FS_NOT_OBSERVED",
			`Error: cannot overwrite existing "` + p("exists.txt") + `" without reading it first — read the file, then retry`},
		{"edit", map[string]any{"file_path": "exists.txt", "old_string": "present", "new_string": "gone"}, []string{"X-Session-ID", "proxy-409"}, 409, "FS_NOT_OBSERVED",
			`Error: edit requires reading "` + p("exists.txt") + `" first — read the file, then retry`},
		{"read", map[string]any{"file_path": "../etc/passwd"}, nil, 403, "FS_SANDBOX_DENIED", `Error: cannot read "` + filepath.Join(filepath.Dir(c.root), "etc/passwd") + `": outside the workspace root`},
		{"read", map[string]any{"file_path": "exists.txt", "offset": 0}, nil, 400, "INVALID_ARGUMENT", "Error: offset must be a positive integer"},
		{"write", map[string]any{"file_path": "new.txt", "content": "x"}, []string{"X-Session-ID", "not an id"}, 400, "INVALID_SESSION", "Error: malformed X-Session-ID: it must be 1-128 characters of A-Za-z0-9._:-"},
	}
	for _, r := range reqs {
		ds, dct, draw, err := call(c.direct, r.tool, r.body, r.headers...)
		if err != nil {
			return "", err
		}
		ps, pct, praw, err := call(c.proxy, r.tool, r.body, r.headers...)
		if err != nil {
			return "", err
		}
		var prob struct{ Code, Output string }
		if err := json.Unmarshal(praw, &prob); err != nil {
			return "", fmt.Errorf("%s %v: not JSON through nginx: %.200q", r.tool, r.body, praw)
		}
		switch {
		case ps != r.status || ds != r.status:
			return "", fmt.Errorf("%s %v: status %d through nginx, %d direct, want %d", r.tool, r.body, ps, ds, r.status)
		case pct != "application/problem+json" || dct != pct:
			return "", fmt.Errorf("%s: content type %q through nginx, %q direct", r.tool, pct, dct)
		case !bytes.Equal(praw, draw):
			return "", fmt.Errorf("%s: body through nginx %q differs from direct %q", r.tool, praw, draw)
		case prob.Code != r.code || (r.output != "" && prob.Output != r.output):
			return "", fmt.Errorf("%s: got %s %q, want %s %q", r.tool, prob.Code, prob.Output, r.code, r.output)
		}
	}
	return fmt.Sprintf("%d problems identical through nginx (404, 404 streamed, 409 x2, 403, 400 x2)", len(reqs)), nil
}

// lateFailure streams a file whose tail is invalid UTF-8: the server has
// sent the first lines when it finds out, and breaks the transfer. Through
// nginx the client must still see a broken transfer, never a clean end.
func (c *checker) lateFailure() (string, error) {
	var b bytes.Buffer
	for b.Len() < 16<<20 {
		b.WriteString("an ordinary line of text before a bad byte at the end\n")
	}
	b.WriteString("\xff\n")
	if err := os.WriteFile(filepath.Join(c.root, "late.txt"), b.Bytes(), 0o644); err != nil {
		return "", err
	}
	ts, err := stream(c.proxy, map[string]any{"file_path": "late.txt", "limit": 5}, false)
	if err == nil {
		return "", fmt.Errorf("the transfer ended cleanly after %d bytes (last line %q)", ts.bytes, ts.tail)
	}
	if ts.first == 0 {
		return "", fmt.Errorf("no line arrived before the failure: %v", err)
	}
	return fmt.Sprintf("first line after %v, then %v", ts.first.Round(time.Millisecond), err), nil
}

// load runs workers that each read, edit and rewrite their own file and
// race the others on a shared one, for d. Every answer must be 2xx, or 409
// on the shared file; each worker's file must end as its last write left it.
func (c *checker) load(d time.Duration, workers int) (string, error) {
	if err := os.WriteFile(filepath.Join(c.root, "shared.txt"), []byte("counter 0\n"), 0o644); err != nil {
		return "", err
	}
	var requests, conflicts, failures atomic.Int64
	var firstFailure atomic.Value
	fail := func(format string, args ...any) {
		if failures.Add(1) == 1 {
			firstFailure.Store(fmt.Sprintf(format, args...))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	lastContent := make([]string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			session := "load-" + strconv.Itoa(w)
			file := "load/worker-" + strconv.Itoa(w) + ".txt"
			hdr := []string{"X-Session-ID", session}
			do := func(tool string, body any, allow409 bool) (int, []byte) {
				status, _, raw, err := call(c.proxy, tool, body, hdr...)
				requests.Add(1)
				switch {
				case err != nil:
					fail("%s %s: %v", tool, session, err)
				case status == 409 && allow409:
					conflicts.Add(1)
				case status < 200 || status > 299:
					fail("%s %s: %d %.200s", tool, session, status, raw)
				}
				return status, raw
			}
			content := fmt.Sprintf("worker %d\ncounter 0\n", w)
			do("write", map[string]any{"file_path": file, "content": content}, false)
			for i := 1; ctx.Err() == nil; i++ {
				do("read", map[string]any{"file_path": file}, false)
				do("edit", map[string]any{"file_path": file, "old_string": fmt.Sprintf("counter %d\n", i-1), "new_string": fmt.Sprintf("counter %d\n", i)}, false)
				content = fmt.Sprintf("worker %d\ncounter %d\n%s", w, i, strings.Repeat("payload line\n", i%64))
				do("write", map[string]any{"file_path": file, "content": content}, false)
				// The shared file: another session may change it between
				// this read and this edit, which is a 409, not a failure.
				if status, raw := do("read", map[string]any{"file_path": "shared.txt"}, false); status == 200 {
					var out struct{ Output string }
					json.Unmarshal(raw, &out)
					if n, ok := sharedCounter(out.Output); ok {
						do("edit", map[string]any{"file_path": "shared.txt", "old_string": fmt.Sprintf("counter %d\n", n), "new_string": fmt.Sprintf("counter %d\n", n+1)}, true)
					}
				}
			}
			lastContent[w] = content
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	for w, want := range lastContent {
		got, err := os.ReadFile(filepath.Join(c.root, "load", "worker-"+strconv.Itoa(w)+".txt"))
		if err != nil || string(got) != want {
			fail("worker %d's file does not hold its last write (%v)", w, err)
		}
	}
	n := requests.Load()
	detail := fmt.Sprintf("%d requests in %v by %d clients, %.0f requests/s, %d conflicts (409), %d failures",
		n, elapsed.Round(time.Millisecond), workers, float64(n)/elapsed.Seconds(), conflicts.Load(), failures.Load())
	if failures.Load() > 0 {
		return "", fmt.Errorf("%s; first: %v", detail, firstFailure.Load())
	}
	if n == 0 {
		return "", errors.New("no requests were made")
	}
	return detail, nil
}

// sharedCounter finds "counter N" in a read output's numbered line 1.
func sharedCounter(output string) (int, bool) {
	_, rest, ok := strings.Cut(output, "\n1: counter ")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, "\n")
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// events subscribes to GET /events directly, through nginx, and through the
// control location that ignores X-Accel-Buffering, then makes a change under
// the root and times its event. Directly and through nginx it must arrive
// within 2 s (the feed gathers external changes for 100 ms); through the
// control it must not arrive within 3 s: nginx holds a buffered SSE body
// until a buffer fills, which shows the header is what lets events through.
func (c *checker) events(bufferedPrefix string) (string, error) {
	var report []string
	for i, tc := range []struct {
		name     string
		base     string
		buffered bool
	}{
		{"direct", c.direct, false},
		{"nginx", c.proxy, false},
		{"control: nginx ignoring X-Accel-Buffering", c.proxy + bufferedPrefix, true},
	} {
		name := fmt.Sprintf("events-check-%d.txt", i)
		took, err := timeEvent(tc.base, func() error {
			return os.WriteFile(filepath.Join(c.root, name), []byte("x"), 0o644)
		}, `"path":"`+name+`"`)
		switch {
		case tc.buffered && err == nil:
			return "", fmt.Errorf("%s: the event arrived after %v although nginx buffered it", tc.name, took)
		case tc.buffered && errors.Is(err, errNoEvent):
			report = append(report, tc.name+": held back")
		case err != nil:
			return "", fmt.Errorf("%s: %w", tc.name, err)
		case took > 2*time.Second:
			return "", fmt.Errorf("%s: the event took %v", tc.name, took)
		default:
			report = append(report, fmt.Sprintf("%s: %v", tc.name, took.Round(time.Millisecond)))
		}
	}
	return strings.Join(report, ", "), nil
}

var errNoEvent = errors.New("no event within 3s")

// timeEvent opens GET base/events, makes a change, and returns how long its
// event (the data line containing want) took to arrive.
func timeEvent(base string, change func() error, want string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
	if err != nil {
		return 0, err
	}
	got := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			got <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			got <- fmt.Errorf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			return
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				got <- err
				return
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, want) {
				got <- nil
				return
			}
		}
	}()
	// nginx may hold the response headers too; the server has the
	// subscription as soon as nginx has connected.
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := change(); err != nil {
		return 0, err
	}
	select {
	case err := <-got:
		if err != nil {
			return 0, err
		}
		return time.Since(start), nil
	case <-time.After(3 * time.Second):
		return 0, errNoEvent
	}
}
