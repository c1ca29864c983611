package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stdioClient starts the built binary with --stdio and args, connects the
// Go SDK's client to it over its stdin and stdout (CommandTransport, as a
// desktop client runs a command), and returns the session, the command and
// its stderr.
func stdioClient(t *testing.T, args ...string) (*sdk.ClientSession, *exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"--stdio"}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr: %s", stderr)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cs, cmd, stderr
}

func callText(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	return res.Content[0].(*sdk.TextContent).Text, res.IsError
}

// TestStdio: the binary with --stdio serves the tools over its standard
// input and output to the Go SDK's client run as a command: the same tool
// list and instructions as /mcp of the same binary, the exact texts, the
// policy (an edit of a file the session never read is refused, with the
// exact text), logs on stderr only (the client reads stdout as JSON-RPC and
// would break on anything else); closing stdin ends the process at once
// with exit 0.
func TestStdio(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\nworld\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "b.txt"), []byte("never read\n"), 0o644))
	abs := func(name string) string { return filepath.Join(root, name) }

	cs, cmd, stderr := stdioClient(t, "--root", root)
	init := cs.InitializeResult()
	assert.Equal(t, &sdk.Implementation{Name: "toolfs-api", Version: testVersion}, init.ServerInfo)

	list, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	httpInit, httpList := httpTools(t, root)
	assert.Equal(t, httpInit.Instructions, init.Instructions, "the same instructions as /mcp")
	assert.Equal(t, httpList.Tools, list.Tools, "the same tools, descriptions, schemas and hints as /mcp, in the same order")
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	assert.Subset(t, names, []string{"read", "write", "edit"})

	text, isErr := callText(t, cs, "read", map[string]any{"file_path": "a.txt"})
	assert.False(t, isErr)
	assert.Equal(t, "<path>"+abs("a.txt")+"</path>\n<type>file</type>\n<content>\n1: hello\n2: world\n\n(End of file - total 2 lines)\n</content>", text)

	text, isErr = callText(t, cs, "edit", map[string]any{"file_path": "a.txt", "old_string": "world", "new_string": "there"})
	assert.False(t, isErr)
	assert.Equal(t, "The file "+abs("a.txt")+" has been updated successfully.", text)
	b, err := os.ReadFile(abs("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello\nthere\n", string(b))

	text, isErr = callText(t, cs, "edit", map[string]any{"file_path": "b.txt", "old_string": "never", "new_string": "now"})
	assert.True(t, isErr)
	assert.Equal(t, `Error: edit requires reading "`+abs("b.txt")+`" first — read the file, then retry`, text)
	b, err = os.ReadFile(abs("b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "never read\n", string(b))

	start := time.Now()
	require.NoError(t, cs.Close(), "closing stdin ends the process with exit 0; stderr: %s", stderr)
	assert.Less(t, time.Since(start), 4*time.Second, "the process exits when stdin closes, before the client's SIGTERM")
	assert.Equal(t, 0, cmd.ProcessState.ExitCode())
	logs := stderr.String()
	assert.Contains(t, logs, `msg="serving MCP on stdin and stdout" root=`+root)
	assert.Contains(t, logs, `msg="the MCP client closed stdin"`)
}

// httpTools is the initialize answer and tool list of /mcp of the same
// binary serving root over HTTP.
func httpTools(t *testing.T, root string) (*sdk.InitializeResult, *sdk.ListToolsResult) {
	t.Helper()
	cmd := exec.Command(binary(t), "--root", root, "--addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: m[1] + "/mcp"}, nil)
	require.NoError(t, err)
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	return cs.InitializeResult(), list
}

// TestStdioNoHTTP: --stdio serves nothing on --addr, so a container's
// TOOLFS_ADDR=0.0.0.0:8080 without a token does not stop it; with no
// /approvals to reach, an escalation is denied at once, saying why.
func TestStdioNoHTTP(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("a\n"), 0o644))
	cmd := exec.Command(binary(t), "--stdio", "--root", root, "--sandbox-mode", "read-only")
	cmd.Env = append(cmd.Environ(), "TOOLFS_ADDR=0.0.0.0:8080")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr: %s", stderr)
	defer cs.Close()

	_, isErr := callText(t, cs, "write", map[string]any{"file_path": "c.txt", "content": "c\n"})
	require.True(t, isErr, "the fence refuses the write")
	start := time.Now()
	text, isErr := callText(t, cs, "write", map[string]any{"file_path": "c.txt", "content": "c\n",
		"sandbox_permissions": "workspace-write", "justification": "The user asked for c.txt."})
	assert.True(t, isErr)
	assert.Equal(t, `Error: sandbox escalation to "workspace-write" requires approval, but no approval channel is available`, text)
	assert.Less(t, time.Since(start), 5*time.Second, "denied at once, not after --approval-timeout")
	_, err = os.Stat(filepath.Join(root, "c.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.NotContains(t, stderr.String(), "listening")
}

// TestStdioSIGTERM: SIGTERM ends a --stdio server with exit 0 while its
// client still holds the session.
func TestStdioSIGTERM(t *testing.T) {
	cs, cmd, stderr := stdioClient(t, "--root", t.TempDir())
	_, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cs.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the session did not end; stderr: %s", stderr)
	}
	cs.Close()
	require.NotNil(t, cmd.ProcessState)
	assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "stderr: %s", stderr)
	assert.Contains(t, stderr.String(), `msg="shutting down: draining in-flight requests"`)
}

// TestStdioLargeWrite: one message may be as large as --max-body-bytes
// (32 MiB), as over HTTP; the SDK's own default line limit, 16 MiB, would
// end the session on a 17 MiB write.
func TestStdioLargeWrite(t *testing.T) {
	root := t.TempDir()
	cs, _, stderr := stdioClient(t, "--root", root)
	content := strings.Repeat("0123456789abcde\n", 17<<16) // 17 MiB
	text, isErr := callText(t, cs, "write", map[string]any{"file_path": "big.txt", "content": content})
	require.False(t, isErr, "%s; stderr: %s", text, stderr)
	assert.Equal(t, "<path>"+filepath.Join(root, "big.txt")+"</path>\n<type>file</type>\n<content>\nCreated file\n</content>", text)
	info, err := os.Stat(filepath.Join(root, "big.txt"))
	require.NoError(t, err)
	assert.Equal(t, int64(len(content)), info.Size())
	require.NoError(t, cs.Close())
}

// TestStdioEditDialect: a client that starts the server as a command has
// no URL to put ?dialect= on, so --edit-dialect in its args chooses the
// edit tool (docs/mcp.md, "Over stdio"): apply_patch for a GPT model's
// client, anchors for a local model's, read answering with anchors there.
func TestStdioEditDialect(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644))
	for _, tc := range []struct{ dialect, tool string }{{"apply_patch", "apply_patch"}, {"anchors", "edit_lines"}} {
		cs, _, stderr := stdioClient(t, "--root", root, "--edit-dialect", tc.dialect)
		list, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err, "stderr: %s", stderr)
		var names []string
		for _, tl := range list.Tools {
			names = append(names, tl.Name)
		}
		assert.Equal(t, []string{"read", "write", tc.tool, "glob", "grep", "move", "delete", "mkdir", "changes", "revert"}, names, tc.dialect)
		text, isErr := callText(t, cs, "read", map[string]any{"file_path": "a.txt"})
		assert.False(t, isErr)
		if tc.dialect == "anchors" {
			assert.Regexp(t, `\n1#[A-Z]{2}: hello\n`, text)
		} else {
			assert.Contains(t, text, "\n1: hello\n")
		}
		require.NoError(t, cs.Close())
	}
}

// TestStdioElicitation: over --stdio, where no /approvals can be reached,
// a client that declared elicitation is asked in the client (docs/mcp.md,
// "Over stdio"): its user's approve runs the escalated write, reject
// answers the original's text and writes nothing. A client without the
// capability is denied at once (TestStdioNoHTTP).
func TestStdioElicitation(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} { // the client's default (2026-07-28), and one with sessions
		t.Run("version="+version, func(t *testing.T) {
			root := t.TempDir()
			cmd := exec.Command(binary(t), "--stdio", "--root", root, "--sandbox-mode", "read-only")
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			var decision string
			var asked []string
			c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "v0"}, &sdk.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					asked = append(asked, req.Params.Message)
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}, nil
				},
			})
			cs, err := c.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			require.NoError(t, err, "stderr: %s", stderr)
			defer cs.Close()
			for _, decision = range []string{"reject", "approve"} {
				text, isErr := callText(t, cs, "write", map[string]any{"file_path": decision + ".txt", "content": "c\n",
					"sandbox_permissions": "workspace-write", "justification": "The user asked for it."})
				_, serr := os.Stat(filepath.Join(root, decision+".txt"))
				if decision == "reject" {
					assert.True(t, isErr)
					assert.Equal(t, `Error: the user rejected escalating this operation to "workspace-write"`, text)
					assert.ErrorIs(t, serr, os.ErrNotExist)
					continue
				}
				assert.False(t, isErr, text)
				assert.NoError(t, serr)
			}
			require.Len(t, asked, 2)
			assert.Contains(t, asked[1], "Reason: escalate sandbox to workspace-write: The user asked for it.")
		})
	}
}
