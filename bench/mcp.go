package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpEntry is the reference server's entry point under -mcp-dir.
const mcpEntry = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

// mcpClient drives an MCP server over stdio: newline-delimited JSON-RPC 2.0.
type mcpClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startMCP(o options, root string) (*mcpClient, time.Duration, error) {
	entry, err := filepath.Abs(filepath.Join(o.mcpDir, mcpEntry))
	if err != nil {
		return nil, 0, err
	}
	cmd := command(o, "node", entry, root)
	cmd.Stderr = io.Discard // it logs its allowed folders there
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, 0, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	c := &mcpClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	if _, err := c.request("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "toolfs-bench", "version": "0"},
	}); err != nil {
		c.close()
		return nil, 0, fmt.Errorf("initialize: %w", err)
	}
	if err := c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized", "params": map[string]any{}}); err != nil {
		c.close()
		return nil, 0, err
	}
	return c, time.Since(start), nil
}

func (c *mcpClient) send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

// request sends one request and returns its result, skipping anything else
// the server sends in between (notifications).
func (c *mcpClient) request(method string, params any) (json.RawMessage, error) {
	c.id++
	if err := c.send(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params}); err != nil {
		return nil, err
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var msg struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return nil, fmt.Errorf("%s: undecodable line %.200q", method, line)
		}
		if msg.ID == nil || *msg.ID != c.id {
			continue
		}
		if msg.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		return msg.Result, nil
	}
}

// tool calls a tool and returns its text content; isError is an error.
func (c *mcpClient) tool(name string, args map[string]any) (string, error) {
	raw, err := c.request("tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return "", err
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", err
	}
	var text strings.Builder
	for _, c := range res.Content {
		text.WriteString(c.Text)
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %.300s", name, text.String())
	}
	return text.String(), nil
}

func (c *mcpClient) close() error {
	c.in.Close() // the server exits at the end of its input
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-done
		return errors.New("MCP server did not exit at the end of its input; killed")
	}
}

// benchMCP: read, write and edit of the same 2,000-line file, one call at a
// time, through toolfs-api (HTTP, keep-alive) and through the reference MCP
// filesystem server (stdio).
func benchMCP(ctx context.Context, o options, rep *report) error {
	if _, err := os.Stat(filepath.Join(o.mcpDir, mcpEntry)); err != nil {
		if o.mcp == "on" {
			return fmt.Errorf("the MCP reference server is not installed: run `npm ci` in %s", o.mcpDir)
		}
		rep.table("toolfs-api vs @modelcontextprotocol/server-filesystem", []string{"skipped"}, [][]string{{"not installed: run `npm ci` in " + o.mcpDir}})
		return nil
	}
	root := filepath.Join(o.dir, "mcp")
	src := sourceText(2000)
	path, err := writeFile(root, "src.go", src)
	if err != nil {
		return err
	}
	// The reference server works on its own copy: the sides run in turns,
	// and toolfs-api's session must not find its file changed by the peer.
	peerPath, err := writeFile(filepath.Join(root, "peer"), "src.go", src)
	if err != nil {
		return err
	}
	alt := strings.Replace(src, "v0010 :=", "w0010 :=", 1)

	ts, err := startToolfs(ctx, o, root)
	if err != nil {
		return err
	}
	defer ts.stop()
	mc, initTime, err := startMCP(o, root)
	if err != nil {
		return err
	}
	defer mc.close()
	client := newClient(1)
	const session = "mcp"
	// toolfs-api's own /mcp, with the official Go SDK client on the
	// sessionless revision (its default) and on the newest with sessions;
	// the header puts both in the REST calls' session.
	over := map[string]sdkCaller{}
	for _, version := range mcpRevisions {
		c, err := connectSDK(ctx, ts.url, version, &http.Client{Transport: withSession{id: session}})
		if err != nil {
			return fmt.Errorf("toolfs-api /mcp %s: %w", version, err)
		}
		defer c.close()
		over[version] = c
	}

	editArgs := func(i int) (string, string) {
		if i%2 == 0 {
			return "\tv0020 := compute(a, b)", "\tx0020 := compute(a, b)"
		}
		return "\tx0020 := compute(a, b)", "\tv0020 := compute(a, b)"
	}
	type side struct {
		read, write, edit func(i int) error
	}
	toolfs := side{
		read: func(int) error {
			a, err := mustOK(ctx, client, ts.url, "read", session, map[string]any{"file_path": path})
			if err == nil && !strings.Contains(a.Output, "\n1: package fixture\n") {
				err = fmt.Errorf("toolfs read: unexpected output %.200q", a.Output)
			}
			return err
		},
		write: func(i int) error {
			c := src
			if i%2 == 0 {
				c = alt
			}
			_, err := mustOK(ctx, client, ts.url, "write", session, map[string]any{"file_path": path, "content": c})
			return err
		},
		edit: func(i int) error {
			old, new := editArgs(i)
			_, err := mustOK(ctx, client, ts.url, "edit", session, map[string]any{"file_path": path, "old_string": old, "new_string": new})
			return err
		},
	}
	peer := side{
		read: func(int) error {
			text, err := mc.tool("read_text_file", map[string]any{"path": peerPath})
			if err == nil && !strings.HasPrefix(text, "package fixture\n") {
				err = fmt.Errorf("MCP read_text_file: unexpected text %.200q", text)
			}
			return err
		},
		write: func(i int) error {
			c := src
			if i%2 == 0 {
				c = alt
			}
			_, err := mc.tool("write_file", map[string]any{"path": peerPath, "content": c})
			return err
		},
		edit: func(i int) error {
			old, new := editArgs(i)
			_, err := mc.tool("edit_file", map[string]any{"path": peerPath, "edits": []map[string]any{{"oldText": old, "newText": new}}})
			return err
		},
	}
	overMCP := func(c sdkCaller) side {
		return side{
			read: func(int) error {
				text, err := c.call(ctx, "read", map[string]any{"file_path": path})
				if err == nil && !strings.Contains(text, "\n1: package fixture\n") {
					err = fmt.Errorf("toolfs /mcp read: unexpected output %.200q", text)
				}
				return err
			},
			write: func(i int) error {
				c2 := src
				if i%2 == 0 {
					c2 = alt
				}
				_, err := c.call(ctx, "write", map[string]any{"file_path": path, "content": c2})
				return err
			},
			edit: func(i int) error {
				old, new := editArgs(i)
				_, err := c.call(ctx, "edit", map[string]any{"file_path": path, "old_string": old, "new_string": new})
				return err
			},
		}
	}
	over26, over25 := overMCP(over[mcpRevisions[0]]), overMCP(over[mcpRevisions[1]])
	warm := max(o.mcpCalls/10, 20)
	warm += warm % 2 // even: see interleaved
	floorPath := filepath.Join(root, "floor.go")
	contents := [2][]byte{[]byte(alt), []byte(src)}
	floor := func(i int) error { return durableReplace(floorPath, contents[i%2]) } // durability alone
	var rows, overRows [][]string
	for _, op := range []string{"read", "write", "edit"} {
		// Every side starts from the start state, toolfs-api's file read
		// by the session (the policy requires it before write and edit).
		for _, p := range []string{path, peerPath, floorPath} {
			if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
				return err
			}
		}
		if err := toolfs.read(0); err != nil {
			return err
		}
		fs := []func(int) error{toolfs.read, peer.read, over26.read, over25.read}
		if op == "write" {
			fs = []func(int) error{toolfs.write, peer.write, over26.write, over25.write, floor}
		} else if op == "edit" {
			fs = []func(int) error{toolfs.edit, peer.edit, over26.edit, over25.edit, floor}
		}
		pids := []int{ts.pid, mc.cmd.Process.Pid, ts.pid, ts.pid, 0}
		if ts.pid == os.Getpid() {
			pids[0], pids[2], pids[3] = 0, 0, 0 // in-process (-cpuprofile): the client's CPU too
		}
		ls, cpu, err := interleaved(warm, o.mcpCalls, fs, pids)
		if err != nil {
			return err
		}
		if op != "read" {
			if err := checkFinal(path, src, alt, op, 3*(warm+o.mcpCalls)); err != nil { // REST and two /mcp revisions
				return fmt.Errorf("toolfs-api: %w", err)
			}
			if err := checkFinal(peerPath, src, alt, op, warm+o.mcpCalls); err != nil {
				return fmt.Errorf("MCP: %w", err)
			}
		}
		floorMean := ""
		if op != "read" {
			floorMean = ms(ls[4].mean())
		}
		r := float64(ls[0].mean()) / float64(ls[1].mean())
		perCall := func(k int) string {
			if pids[k] == 0 {
				return ""
			}
			return strconv.FormatInt(cpu[k].Microseconds()/int64(o.mcpCalls), 10)
		}
		rows = append(rows, []string{op,
			ms(ls[0].mean()), ms(ls[0].quantile(0.5)), ms(ls[0].quantile(0.99)),
			ms(ls[1].mean()), ms(ls[1].quantile(0.5)), ms(ls[1].quantile(0.99)),
			floorMean, perCall(0) + " / " + perCall(1), fmt.Sprintf("%.2fx", r), verdict(r < 1)})
		for k, version := range mcpRevisions {
			l := ls[2+k]
			toREST, toPeer := float64(l.mean())/float64(ls[0].mean()), float64(l.mean())/float64(ls[1].mean())
			overRows = append(overRows, []string{op, version,
				ms(l.mean()), ms(l.quantile(0.5)), ms(l.quantile(0.99)), perCall(2+k) + " / " + perCall(0),
				fmt.Sprintf("%.2fx", toREST), verdict(toREST <= 1.25), fmt.Sprintf("%.2fx", toPeer), verdict(toPeer <= 0.5)})
		}
	}
	rep.table("toolfs-api vs @modelcontextprotocol/server-filesystem (sequential, one call at a time)", []string{
		"tool", "toolfs mean ms", "toolfs p50", "toolfs p99", "MCP mean ms", "MCP p50", "MCP p99", "durable floor mean ms", "server CPU µs/call, toolfs / MCP", "toolfs / MCP (mean)", "goal < 1x"}, rows,
		fmt.Sprintf("Same %d-byte, 2,000-line file; %d warm-up then %d timed calls per tool and server, the servers (and the floor) taking turns in blocks of %d calls. MCP tools: read_text_file, write_file, edit_file; its start-up and initialize took %v (not counted). toolfs-api answers with a capped window (51,200 bytes) plus its lines as metadata; the MCP server returns the whole file. toolfs-api fsyncs every mutation (file and folder); the MCP server does not (temp file and rename). The durable floor is this process writing the same bytes durably itself (temp file, fsync, rename, folder fsync), no HTTP, no checks. Server CPU is each server process's user and system time over its timed blocks (/proc/<pid>/stat, 10 ms ticks).",
			len(src), warm, o.mcpCalls, mcpBlock, initTime.Round(time.Millisecond)))
	rep.table("toolfs-api over its own /mcp (Go SDK client, sequential)", []string{
		"tool", "revision", "/mcp mean ms", "/mcp p50", "/mcp p99", "server CPU µs/call, /mcp / REST", "/mcp / REST (mean)", "goal <= 1.25x REST", "/mcp / reference MCP (mean)", "goal <= 0.5x reference"}, overRows,
		"The same calls, in the same turns, through toolfs-api's /mcp with the official Go SDK client on the sessionless revision (2026-07-28: one POST per call) and on the newest with MCP sessions (2025-11-25), JSON answers, in the REST calls' session (X-Session-ID). The REST and reference means are the table above's.")
	return benchMCPConcurrent(ctx, o, ts, root, src, rep)
}

// mcpRevisions are the protocol revisions /mcp is measured on: the
// sessionless one, and the newest with MCP sessions.
var mcpRevisions = []string{"2026-07-28", "2025-11-25"}

// sdkCaller is one MCP client session of the official Go SDK.
type sdkCaller struct{ cs *mcpsdk.ClientSession }

// connectSDK connects the Go SDK client to toolfs-api's /mcp on version
// through hc. No standalone stream: nothing is sent on it, and 32 clients
// would hold 32 more connections open.
func connectSDK(ctx context.Context, base, version string, hc *http.Client) (sdkCaller, error) {
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "toolfs-bench", Version: "0"}, nil).Connect(ctx,
		&mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true},
		&mcpsdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return sdkCaller{}, err
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		cs.Close()
		return sdkCaller{}, fmt.Errorf("asked for protocol revision %s, negotiated %s", version, got)
	}
	return sdkCaller{cs}, nil
}

// call calls a tool and returns its text; isError is an error.
func (c sdkCaller) call(ctx context.Context, name string, args map[string]any) (string, error) {
	res, err := c.cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	text := res.Content[0].(*mcpsdk.TextContent).Text
	if res.IsError {
		return "", fmt.Errorf("toolfs-api /mcp %s: %.300s", name, text)
	}
	return text, nil
}

func (c sdkCaller) close() error { return c.cs.Close() }

// mcpBlock is how many calls a side makes before the next side's turn.
const mcpBlock = 50

// interleaved warms every side up (warm calls each, in turn), then times n
// calls of each, the sides taking turns in blocks of mcpBlock, so a change
// of the machine's load (other work on the two CPUs) weighs on every side
// alike. It also sums the CPU time of each side's process (pids[k]; 0:
// none) over the side's blocks. Call i of a side alternates its two states
// by i's parity, and toolfs-api's REST and /mcp sides share a file, so
// warm, n and mcpBlock must be even: each turn leaves the file as it found
// it.
func interleaved(warm, n int, sides []func(i int) error, pids []int) ([]latencies, []time.Duration, error) {
	if warm%2 != 0 || n%2 != 0 {
		return nil, nil, fmt.Errorf("interleaved: warm-up %d and calls %d must be even", warm, n)
	}
	for _, f := range sides {
		if _, err := sequential(warm, f); err != nil {
			return nil, nil, err
		}
	}
	ls, cpu := make([]latencies, len(sides)), make([]time.Duration, len(sides))
	for done := 0; done < n; done += mcpBlock {
		for k, f := range sides {
			var before time.Duration
			if pids[k] != 0 {
				before, _ = cpuOf(pids[k])
			}
			l, err := sequential(min(mcpBlock, n-done), func(i int) error { return f(done + i) })
			if err != nil {
				return nil, nil, err
			}
			if pids[k] != 0 {
				after, _ := cpuOf(pids[k])
				cpu[k] += after - before
			}
			ls[k].d = append(ls[k].d, l.d...)
			ls[k].wall += l.wall
		}
	}
	for k := range ls {
		slices.Sort(ls[k].d)
	}
	return ls, cpu, nil
}

// withSession adds X-Session-ID to every request of an /mcp client, sent
// through base (nil: http.DefaultTransport).
type withSession struct {
	id   string
	base http.RoundTripper
}

func (s withSession) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Session-ID", s.id)
	if s.base == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return s.base.RoundTrip(r)
}

// checkFinal checks the file after n alternating writes or edits.
func checkFinal(path, src, alt, op string, n int) error {
	got, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want := src
	switch {
	case op == "write" && n%2 == 1:
		want = alt
	case op == "edit" && n%2 == 1:
		want = strings.Replace(src, "\tv0020 :=", "\tx0020 :=", 1)
	}
	if string(got) != want {
		return fmt.Errorf("after %d %ss the file is not what they should have left", n, op)
	}
	return nil
}
