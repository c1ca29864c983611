package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// mcpClients is how many clients the concurrent MCP scenario runs at once.
const mcpClients = 32

// mcpMix is the calls of one client's cycle: 16 reads, 3 edits and one
// write in 20 (the mixed load's 80/15/5), a read first.
func mcpMix(i int) string {
	switch i % 20 {
	case 19:
		return "write"
	case 4, 9, 14:
		return "edit"
	}
	return "read"
}

// mcpWorker is one client's file and what it holds now: the clients of
// every transport continue each other's sequence, so the policy sees one
// session per file read before it is changed.
type mcpWorker struct {
	path, session string
	content       string // the file's content after the last change
	i             int    // calls made, across every transport
}

// next makes worker w's next call through do, which calls a tool and
// returns its text, and checks what it can of the answer.
func (w *mcpWorker) next(do func(tool string, args map[string]any) (string, error)) error {
	tool := mcpMix(w.i)
	w.i++
	switch tool {
	case "read":
		text, err := do("read", map[string]any{"file_path": w.path})
		if err == nil && !strings.Contains(text, "\n1: package fixture\n") {
			err = fmt.Errorf("read %s: unexpected output %.200q", w.path, text)
		}
		return err
	case "edit":
		old, new := "\tv0020 :=", "\tx0020 :="
		if !strings.Contains(w.content, old) {
			old, new = new, old
		}
		if _, err := do("edit", map[string]any{"file_path": w.path, "old_string": old, "new_string": new}); err != nil {
			return err
		}
		w.content = strings.Replace(w.content, old, new, 1)
		return nil
	}
	old, new := "v0010 :=", "w0010 :="
	if !strings.Contains(w.content, old) {
		old, new = new, old
	}
	content := strings.Replace(w.content, old, new, 1)
	if _, err := do("write", map[string]any{"file_path": w.path, "content": content}); err != nil {
		return err
	}
	w.content = content
	return nil
}

// benchMCPConcurrent: mcpClients clients at once, each in its own session
// on its own 60 KiB file, making the mixed load's calls through REST and
// through /mcp on both revisions; the transports take turns in rounds so a
// change of the machine's load weighs on each alike.
func benchMCPConcurrent(ctx context.Context, o options, ts *server, root, src string, rep *report) error {
	workers := make([]*mcpWorker, mcpClients)
	for k := range workers {
		path, err := writeFile(filepath.Join(root, "clients"), fmt.Sprintf("c%02d.go", k), src)
		if err != nil {
			return err
		}
		workers[k] = &mcpWorker{path: path, session: fmt.Sprintf("mcp-client-%02d", k), content: src}
	}
	rest := newClient(mcpClients)
	// One pool of connections for each transport's clients, wide enough for
	// all of them (http.DefaultTransport keeps two idle per host).
	pool := newClient(2 * mcpClients).Transport
	type transport struct {
		name  string
		calls []func(tool string, args map[string]any) (string, error)
	}
	transports := []transport{{name: "REST"}}
	for range workers {
		transports[0].calls = append(transports[0].calls, nil)
	}
	for k, w := range workers {
		transports[0].calls[k] = func(tool string, args map[string]any) (string, error) {
			a, err := mustOK(ctx, rest, ts.url, tool, w.session, args)
			return a.Output, err
		}
	}
	for _, version := range mcpRevisions {
		t := transport{name: "/mcp " + version}
		for _, w := range workers {
			c, err := connectSDK(ctx, ts.url, version, &http.Client{Transport: withSession{id: w.session, base: pool}})
			if err != nil {
				return fmt.Errorf("toolfs-api /mcp %s: %w", version, err)
			}
			defer c.close()
			t.calls = append(t.calls, func(tool string, args map[string]any) (string, error) { return c.call(ctx, tool, args) })
		}
		transports = append(transports, t)
	}
	// Warm-up: every client reads its file (the policy's observation) and
	// runs a cycle on every transport.
	for _, t := range transports {
		errs := make(chan error, mcpClients)
		for k, w := range workers {
			go func() {
				for range 20 {
					if err := w.next(t.calls[k]); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range workers {
			if err := <-errs; err != nil {
				return fmt.Errorf("%s warm-up: %w", t.name, err)
			}
		}
	}
	rounds, dur := 3, o.readDur/2
	if o.mode == "short" {
		rounds = 1
	}
	all := make([]latencies, len(transports))
	serverCPU := make([]time.Duration, len(transports))
	clientCPU := make([]time.Duration, len(transports))
	for range rounds {
		for j, t := range transports {
			sb, _ := cpuOf(ts.pid)
			cb, _ := cpuOf(os.Getpid())
			l, err := closedLoop(ctx, mcpClients, dur, func(k, _ int) error { return workers[k].next(t.calls[k]) })
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			sa, _ := cpuOf(ts.pid)
			ca, _ := cpuOf(os.Getpid())
			serverCPU[j] += sa - sb
			clientCPU[j] += ca - cb
			all[j].d = append(all[j].d, l.d...)
			all[j].wall += l.wall
		}
	}
	for _, w := range workers {
		got, err := os.ReadFile(w.path)
		if err != nil {
			return err
		}
		if string(got) != w.content {
			return fmt.Errorf("%s is not what its client's writes and edits should have left", w.path)
		}
	}
	inProcess := ts.pid == os.Getpid()
	perCall := func(cpu time.Duration, n int) string {
		if inProcess || n == 0 {
			return ""
		}
		return us(cpu / time.Duration(n))
	}
	var rows [][]string
	for j, t := range transports {
		l := all[j]
		slices.Sort(l.d)
		r, goal := "1.00x (baseline)", ""
		if j > 0 {
			x := l.perSecond() / all[0].perSecond()
			r, goal = fmt.Sprintf("%.2fx", x), verdict(x >= 0.8)
		}
		rows = append(rows, []string{t.name, fmt.Sprintf("%.0f", l.perSecond()), ms(l.mean()), ms(l.quantile(0.5)), ms(l.quantile(0.99)),
			perCall(serverCPU[j], len(l.d)), perCall(clientCPU[j], len(l.d)), r, goal})
	}
	if inProcess {
		rows = append(rows, []string{"(in-process: the server's CPU is the client's)", "", "", "", "", "", "", "", ""})
	}
	rep.table(fmt.Sprintf("%d clients at once: REST vs /mcp (Go SDK client)", mcpClients), []string{
		"transport", "calls/s", "mean ms", "p50", "p99", "server CPU µs/call", "client CPU µs/call", "calls/s vs REST", "goal >= 0.8x"}, rows,
		fmt.Sprintf("%d clients, each in its own session on its own copy of the %d-byte file, each making 16 reads, 3 edits and 1 write in every 20 calls, one call at a time; a transport's clients run together for %v, the transports taking turns, %d rounds. REST: one keep-alive http.Client; /mcp: one Go SDK client session per client, all over one keep-alive pool. Every answer is decoded and checked; every file is checked at the end. Server CPU is toolfs-api's (/proc/<pid>/stat); client CPU is this process's, which runs every client on the other CPU.",
			mcpClients, len(src), dur, rounds))
	return nil
}
