package replicas

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/redistest"
)

// do sends one request with the token and returns the answer.
func do(t *testing.T, method, url, session string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if session != "" {
		req.Header.Set("X-Session-ID", session)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Toolfs-Upstream"), data}
}

type approvalView struct {
	ID, Session, Tool, Path, Mode, Reason, Diff string
	Truncated                                   bool
}

// metric sums a counter's samples on every live replica whose labels
// contain all of labels.
func metric(t *testing.T, rs []*replica, name string, labels ...string) float64 {
	t.Helper()
	total := 0.0
	for _, r := range rs {
		if r.exited == nil {
			continue
		}
		res := do(t, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(r.port)+"/metrics", "", nil)
	lines:
		for _, line := range strings.Split(string(res.body), "\n") {
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			for _, l := range labels {
				if !strings.Contains(line, l) {
					continue lines
				}
			}
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}

// TestApprovalsAcrossReplicas (SPEC §17, §15): escalations opened on each
// of the replicas wait there; a person's client, through nginx, long-polls
// every one of them (whatever replica answers),
// and decides each on whatever replica its POST reaches; each waiting call
// learns its decision within a second and runs exactly once (approved) or
// is refused (rejected). A replica that dies withdraws its pending
// approvals: gone from the list within seconds, and a decision is 409.
func TestApprovalsAcrossReplicas(t *testing.T) {
	nginx := nginxBin(t)
	rs := redistest.Start(t)
	root := t.TempDir()
	const agents = 6
	for i := range agents + 1 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("a%d.txt", i)), []byte("v0\n"), 0o644))
	}
	base, replicas, _ := startDeployment(t, nginx, root, rs.URL(redisDBIndex), "--sandbox-mode", "read-only", "--approval-timeout", "1m")

	type answer struct {
		r  reply
		at time.Time
	}
	// Agent i's escalation waits on replica i%3 (its holder).
	answers := make([]chan answer, agents)
	holders := make([]string, agents)
	for i := range agents {
		answers[i] = make(chan answer, 1)
		session := fmt.Sprintf("agent-%d", i)
		file := fmt.Sprintf("a%d.txt", i)
		holders[i] = "127.0.0.1:" + strconv.Itoa(replicas[i%replicasN].port)
		r := do(t, http.MethodPost, base+"/tools/read", session, map[string]any{"file_path": file})
		require.Equal(t, 200, r.status, "%s", r.body)
		go func() {
			r := do(t, http.MethodPost, "http://"+holders[i]+"/tools/edit", session, map[string]any{"file_path": file, "old_string": "v0", "new_string": "v1",
				"sandbox_permissions": "workspace-write", "justification": "The user asked for it."})
			answers[i] <- answer{r, time.Now()}
		}()
	}

	// The person's client: long polls through nginx until it has seen
	// every approval.
	seen := map[string]approvalView{}
	listedBy := map[string]bool{}
	var cursor uint64
	for deadline := time.Now().Add(20 * time.Second); len(seen) < agents; {
		require.True(t, time.Now().Before(deadline), "only %d approvals listed", len(seen))
		r := do(t, http.MethodGet, fmt.Sprintf("%s/approvals?wait=10s&after=%d", base, cursor), "", nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		listedBy[r.upstream] = true
		var l struct {
			Approvals []approvalView
			Cursor    uint64
		}
		require.NoError(t, json.Unmarshal(r.body, &l))
		cursor = l.Cursor
		for _, a := range l.Approvals {
			seen[a.Session] = a
		}
	}
	for i := range agents {
		a := seen[fmt.Sprintf("agent-%d", i)]
		assert.Equal(t, "edit", a.Tool)
		assert.Equal(t, "workspace-write", a.Mode)
		assert.Equal(t, "escalate sandbox to workspace-write: The user asked for it.", a.Reason)
		assert.Contains(t, a.Diff, "\n-v0\n+v1")
		assert.False(t, a.Truncated)
	}

	decidedBy := map[string]bool{}
	elsewhere := 0 // decisions that reached another replica than the call's
	for i := range agents {
		a := seen[fmt.Sprintf("agent-%d", i)]
		decision := "approve"
		if i%2 == 1 {
			decision = "reject"
		}
		r := do(t, http.MethodPost, base+"/approvals/"+a.ID, "", map[string]string{"decision": decision})
		require.Equal(t, 204, r.status, "%s", r.body)
		decided := time.Now()
		decidedBy[r.upstream] = true
		got := <-answers[i]
		assert.Less(t, got.at.Sub(decided), time.Second, "agent %d's call learned its decision late", i)
		if holders[i] != r.upstream {
			elsewhere++
		}
		file, _ := os.ReadFile(filepath.Join(root, fmt.Sprintf("a%d.txt", i)))
		if i%2 == 0 {
			assert.Equal(t, 200, got.r.status, "%s", got.r.body)
			assert.Equal(t, "v1\n", string(file))
		} else {
			assert.Equal(t, 403, got.r.status, "%s", got.r.body)
			assert.Equal(t, "ESCALATION_DENIED", got.r.code())
			assert.Contains(t, string(got.r.body), `the user rejected escalating this operation to \"workspace-write\"`)
			assert.Equal(t, "v0\n", string(file))
		}
		// Decided: on any replica it is now unknown.
		r = do(t, http.MethodPost, base+"/approvals/"+a.ID, "", map[string]string{"decision": decision})
		assert.Equal(t, 404, r.status, "%s", r.body)
	}
	t.Logf("approvals listed through %d replicas, decided through %d, %d of %d on another replica than the waiting call's", len(listedBy), len(decidedBy), elsewhere, agents)
	assert.Positive(t, elsewhere, "decisions reached the waiting call from another replica")
	// Each call ran once: three approved edits, three rejections, in all.
	assert.Equal(t, 3.0, metric(t, replicas, "toolfs_tool_calls_total", `tool="edit"`, `code="ok"`))
	assert.Equal(t, 3.0, metric(t, replicas, "toolfs_approvals_total", `decision="approve"`))
	assert.Equal(t, 3.0, metric(t, replicas, "toolfs_approvals_total", `decision="reject"`))

	// A replica dies holding an approval.
	holder := replicas[2]
	direct := "http://127.0.0.1:" + strconv.Itoa(holder.port)
	r := do(t, http.MethodPost, direct+"/tools/read", "orphan", map[string]any{"file_path": "a6.txt"})
	require.Equal(t, 200, r.status)
	go post(direct, "orphan", "edit", map[string]any{"file_path": "a6.txt", "old_string": "v0", "new_string": "v1",
		"sandbox_permissions": "workspace-write", "justification": "The user asked for it."}) // its replica dies: no answer
	var orphan string
	require.Eventually(t, func() bool {
		var l struct{ Approvals []approvalView }
		json.Unmarshal(do(t, http.MethodGet, base+"/approvals", "", nil).body, &l)
		if len(l.Approvals) == 1 {
			orphan = l.Approvals[0].ID
		}
		return orphan != ""
	}, 5*time.Second, 20*time.Millisecond)
	holder.kill()
	killed := time.Now()
	require.Eventually(t, func() bool {
		var l struct{ Approvals []approvalView }
		r := do(t, http.MethodGet, base+"/approvals", "", nil)
		return r.status == 200 && json.Unmarshal(r.body, &l) == nil && len(l.Approvals) == 0
	}, 15*time.Second, 100*time.Millisecond, "a dead replica's approval is withdrawn")
	t.Logf("the dead replica's approval was withdrawn %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	r = do(t, http.MethodPost, base+"/approvals/"+orphan, "", map[string]string{"decision": "approve"})
	assert.Equal(t, 409, r.status, "%s", r.body)
	assert.Equal(t, "APPROVAL_NOT_PENDING", r.code())
	file, _ := os.ReadFile(filepath.Join(root, "a6.txt"))
	assert.Equal(t, "v0\n", string(file), "nothing was granted")
}

// sseClient reads one GET /events stream: each event's id and JSON.
type sseClient struct {
	cancel context.CancelFunc
	events chan sseEvent
	ended  chan struct{}
}

type sseEvent struct{ ID, Data string }

func subscribeEvents(t *testing.T, url, lastID string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	c := &sseClient{cancel: cancel, events: make(chan sseEvent, 4096), ended: make(chan struct{})}
	t.Cleanup(cancel)
	go func() {
		defer close(c.ended)
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		var e sseEvent
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "" && e.Data != "":
				c.events <- e
				e = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				e.ID = line[4:]
			case strings.HasPrefix(line, "data: "):
				e.Data = line[6:]
			}
		}
	}()
	return c
}

// take returns the events that arrive within d, or until n have.
func (c *sseClient) take(n int, d time.Duration) []sseEvent {
	var out []sseEvent
	deadline := time.After(d)
	for len(out) < n {
		select {
		case e := <-c.events:
			out = append(out, e)
		case <-deadline:
			return out
		}
	}
	return out
}

func typeOf(e sseEvent) (typ, path string) {
	var v struct{ Type, Path string }
	json.Unmarshal([]byte(e.Data), &v)
	return v.Type, v.Path
}

// TestEventsAcrossReplicas (SPEC §17, §18): two subscribers on different
// replicas see one sequence of the edits made through nginx (every
// replica's), with sessions and diffs, and the same ids; an edit through
// any replica is never also reported as an external change (whichever
// replica watches); an external change is reported once to each; a
// subscriber whose replica is killed resumes on another with
// Last-Event-ID and misses nothing, gets nothing twice.
func TestEventsAcrossReplicas(t *testing.T) {
	nginx := nginxBin(t)
	rs := redistest.Start(t)
	root := t.TempDir()
	for i := range 2 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)), []byte("n: 0\n"), 0o644))
	}
	base, replicas, _ := startDeployment(t, nginx, root, rs.URL(redisDBIndex))
	direct := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(replicas[i].port) }
	// A subscribes to the replica that watches the root (it holds the
	// lease), B to another one.
	watcher := -1
	for i := range replicas {
		if metric(t, replicas[i:i+1], "toolfs_events_watching") == 1 {
			watcher = i
		}
	}
	require.NotEqual(t, -1, watcher, "one replica watches")
	a, b := subscribeEvents(t, direct(watcher), ""), subscribeEvents(t, direct((watcher+1)%replicasN), "")

	// Two agents edit their files through nginx, so every replica
	// publishes some of the edits.
	var mu sync.Mutex
	values := []int{0, 0}
	upstreams := map[string]bool{}
	edit := func(n int) {
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				session, file := fmt.Sprintf("agent-%d", i), fmt.Sprintf("f%d.txt", i)
				for range n {
					mu.Lock()
					v := values[i]
					mu.Unlock()
					r := do(t, http.MethodPost, base+"/tools/read", session, map[string]any{"file_path": file})
					require.Equal(t, 200, r.status, "%s", r.body)
					r = do(t, http.MethodPost, base+"/tools/edit", session, map[string]any{"file_path": file,
						"old_string": fmt.Sprintf("n: %d", v), "new_string": fmt.Sprintf("n: %d", v+1)})
					require.Equal(t, 200, r.status, "%s", r.body)
					mu.Lock()
					values[i]++
					upstreams[r.upstream] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	edit(6)
	ea, eb := a.take(12, 10*time.Second), b.take(12, 10*time.Second)
	require.Len(t, eb, 12)
	assert.Equal(t, eb, ea, "the two replicas' subscribers see one sequence")
	assert.Len(t, upstreams, replicasN, "the edits went through every replica")
	for _, e := range eb {
		var v struct {
			Type, Path, Session string
			Diffs               []struct{ OldText, NewText string }
		}
		require.NoError(t, json.Unmarshal([]byte(e.Data), &v))
		assert.Equal(t, "edit", v.Type)
		assert.Regexp(t, `^agent-[01]$`, v.Session)
		require.Len(t, v.Diffs, 1)
		assert.Regexp(t, `^n: \d+$`, v.Diffs[0].OldText)
		assert.Regexp(t, regexp.MustCompile(`^\d+-\d+$`), e.ID)
	}
	// Nothing more: no edit came back as an external change.
	assert.Empty(t, a.take(1, time.Second))

	// An external change, once to each.
	require.NoError(t, os.WriteFile(filepath.Join(root, "ext.txt"), []byte("by hand\n"), 0o644))
	seqA := ea
	for _, c := range []*sseClient{a, b} {
		got := c.take(2, 2*time.Second)
		require.Len(t, got, 1, "%v", got)
		typ, path := typeOf(got[0])
		assert.Equal(t, "created ext.txt", typ+" "+path)
		if c == a {
			seqA = append(seqA, got[0])
		} else {
			eb = append(eb, got[0])
		}
	}

	// The replica of A, the one that watches, dies. Another takes the
	// lease over (an overflow says changes in between may be missing);
	// edits go on (nginx skips the dead one); A reconnects through nginx
	// with the last id it got.
	replicas[watcher].kill()
	killed := time.Now()
	<-a.ended
	require.Eventually(t, func() bool { return metric(t, replicas, "toolfs_events_watching") == 1 }, 15*time.Second, 50*time.Millisecond, "a takeover")
	t.Logf("another replica watches %v after the watcher was killed", time.Since(killed).Round(10*time.Millisecond))
	edit(3)
	resumed := subscribeEvents(t, base, seqA[len(seqA)-1].ID)
	more := b.take(100, 3*time.Second)
	var edits, overflows int
	for _, e := range more {
		switch typ, _ := typeOf(e); typ {
		case "edit":
			edits++
		case "overflow":
			overflows++
		}
	}
	assert.Equal(t, 6, edits, "%v", more)
	assert.Equal(t, 1, overflows, "%v", more)
	got := resumed.take(len(more), 10*time.Second)
	assert.Equal(t, more, got, "the resumed subscriber misses nothing and gets nothing twice")
	seqA = append(seqA, got...)
	eb = append(eb, more...)
	assert.Equal(t, eb, seqA)

	// External changes are still reported, once each, whoever watches now.
	require.NoError(t, os.WriteFile(filepath.Join(root, "ext2.txt"), []byte("by hand\n"), 0o644))
	for _, c := range []*sseClient{b, resumed} {
		got := c.take(2, 2*time.Second)
		require.Len(t, got, 1, "%v", got)
		typ, path := typeOf(got[0])
		assert.Equal(t, "created ext2.txt", typ+" "+path)
	}
	t.Logf("%d events in the sequence", len(eb))
}

// killNginx SIGKILLs the nginx of dir (its master, by the pid file, and
// its workers, the master's children) and returns a function that starts
// it again on the same configuration.
func killNginx(t *testing.T, nginx, dir string) func() {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "nginx.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, c := range strings.Fields(string(children)) {
		if n, err := strconv.Atoi(c); err == nil {
			syscall.Kill(n, syscall.SIGKILL)
		}
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	return func() {
		os.Remove(filepath.Join(dir, "nginx.pid"))
		ng := exec.Command(nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
		ng.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		require.NoError(t, ng.Start())
		t.Cleanup(func() { ng.Process.Signal(syscall.SIGQUIT); ng.Wait() })
	}
}

// TestWhenNginxDies (docs/deployment.md, "What a client sees"): nginx is
// SIGKILLed with an event stream open through it and an escalated call
// waiting through it. The stream ends; the waiting call's connection
// breaks, so its approval is withdrawn (the replica saw its caller go);
// the replicas keep serving (an edit made on one directly is published);
// once nginx is back, the subscriber resumes with its Last-Event-ID and
// gets exactly what it missed.
func TestWhenNginxDies(t *testing.T) {
	nginx := nginxBin(t)
	rs := redistest.Start(t)
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "ws"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "ws", "a.txt"), []byte("n: 0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "out.txt"), []byte("v0\n"), 0o644))
	base, replicas, dir := startDeployment(t, nginx, root, rs.URL(redisDBIndex), "--sandbox-mode", "workspace-write", "--events-max-watches", "0")
	direct := "http://127.0.0.1:" + strconv.Itoa(replicas[1].port)
	sub := subscribeEvents(t, base, "")
	editN := func(url string, n int) {
		r := do(t, http.MethodPost, url+"/tools/read", "agent", map[string]any{"file_path": "ws/a.txt"})
		require.Equal(t, 200, r.status, "%s", r.body)
		r = do(t, http.MethodPost, url+"/tools/edit", "agent", map[string]any{"file_path": "ws/a.txt", "old_string": fmt.Sprintf("n: %d", n), "new_string": fmt.Sprintf("n: %d", n+1)})
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	editN(base, 0)
	got := sub.take(1, 5*time.Second)
	require.Len(t, got, 1)
	last := got[0].ID

	// An escalation to danger-full-access waits through nginx.
	r := do(t, http.MethodPost, base+"/tools/read", "agent", map[string]any{"file_path": "out.txt"})
	require.Equal(t, 200, r.status)
	waiting := make(chan error, 1)
	go func() {
		_, err := post(base, "agent", "edit", map[string]any{"file_path": "out.txt", "old_string": "v0", "new_string": "v1",
			"sandbox_permissions": "danger-full-access", "justification": "The user asked for it."})
		waiting <- err
	}()
	require.Eventually(t, func() bool {
		var l struct{ Approvals []approvalView }
		json.Unmarshal(do(t, http.MethodGet, direct+"/approvals", "", nil).body, &l)
		return len(l.Approvals) == 1
	}, 5*time.Second, 20*time.Millisecond)

	restart := killNginx(t, nginx, dir)
	select {
	case <-sub.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream through nginx did not end")
	}
	select {
	case err := <-waiting:
		assert.Error(t, err, "the waiting call's connection broke")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting call did not end")
	}
	start := time.Now()
	require.Eventually(t, func() bool {
		var l struct{ Approvals []approvalView }
		r := do(t, http.MethodGet, direct+"/approvals", "", nil)
		return json.Unmarshal(r.body, &l) == nil && len(l.Approvals) == 0
	}, 5*time.Second, 20*time.Millisecond, "the approval of a call whose client went away is withdrawn")
	t.Logf("approval withdrawn %v after nginx died", time.Since(start).Round(time.Millisecond))
	file, _ := os.ReadFile(filepath.Join(root, "out.txt"))
	assert.Equal(t, "v0\n", string(file))

	editN(direct, 1) // the replicas go on without nginx
	restart()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, 10*time.Second, 20*time.Millisecond, "nginx is back")
	resumed := subscribeEvents(t, base, last)
	got = resumed.take(10, 2*time.Second)
	var kinds []string
	for _, e := range got {
		typ, path := typeOf(e)
		kinds = append(kinds, typ+" "+path)
	}
	// What it missed: the approval event and the edit made meanwhile.
	assert.Equal(t, []string{"approval out.txt", "edit ws/a.txt"}, kinds)
}
