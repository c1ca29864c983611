package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
)

// An edit through MCP appears in the change feed like one through REST:
// with its session and the hunks of its change (docs/events.md).
func TestEditThroughMCPAppearsInTheFeed(t *testing.T) {
	h := &harness{t: t, srv: servertest.Start(t, server.Config{
		Policy:       policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		MaxBodyBytes: 1 << 20, StreamWriteWindow: 10 * time.Second,
		Events: events.Settings{Enabled: true, MaxWatches: server.DefaultConfig().Events.MaxWatches}, EventsQuiet: 30 * time.Millisecond,
	})}
	h.file("a.txt", "one\ntwo\nthree\n")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/events?session=m1", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	data := make(chan string, 16)
	go func() {
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(data)
				return
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data <- strings.TrimSuffix(v, "\n")
			}
		}
	}()

	c := h.connect("", "X-Session-ID", "m1")
	_, isErr := c.call(t, "read", map[string]any{"file_path": "a.txt"})
	require.False(t, isErr)
	text, isErr := c.call(t, "edit", map[string]any{"file_path": "a.txt", "old_string": "two", "new_string": "2"})
	require.False(t, isErr, text)

	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(h.srv.Root, "a.txt"), &st))
	version := fmt.Sprintf("%d:%d:%d:%d:%d", st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
	select {
	case got := <-data:
		assert.Equal(t, `{"type":"edit","path":"a.txt","session":"m1","version":"`+version+`","diffs":[{"path":"a.txt","oldText":"one\ntwo\nthree","newText":"one\n2\nthree"}]}`, got)
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	select {
	case got := <-data:
		t.Fatalf("unexpected event %s", got)
	case <-time.After(300 * time.Millisecond):
	}
}
