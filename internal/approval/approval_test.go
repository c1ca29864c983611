package approval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// ends records OnEnd calls.
type ends struct {
	mu  sync.Mutex
	got []Outcome
}

func (e *ends) add(_ Approval, o Outcome) { e.mu.Lock(); e.got = append(e.got, o); e.mu.Unlock() }
func (e *ends) list() []Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Outcome(nil), e.got...)
}

func open(t *testing.T, s *Store) *Pending {
	t.Helper()
	p, err := s.Open(Request{Session: "s", Tool: "write", Path: "/r/a.txt", Mode: "workspace-write", Reason: "escalate sandbox to workspace-write: why"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision Decision
		want     Outcome
	}{
		{"approve", Approve, Approved},
		{"reject", Reject, Rejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e ends
			s := New(Config{Timeout: time.Minute, OnEnd: e.add})
			p := open(t, s)
			defer p.Cancel()
			if l, _, _ := s.List(); len(l) != 1 || l[0].ID != p.Approval().ID || l[0].Reason != "escalate sandbox to workspace-write: why" {
				t.Fatalf("list = %+v", l)
			}
			got := make(chan Outcome)
			go func() { got <- p.Wait(context.Background()) }()
			if err := s.Decide(p.Approval().ID, tc.decision); err != nil {
				t.Fatal(err)
			}
			if o := <-got; o != tc.want {
				t.Fatalf("outcome = %q, want %q", o, tc.want)
			}
			if err := s.Decide(p.Approval().ID, tc.decision); !errors.Is(err, ErrUnknown) {
				t.Fatalf("second decision: %v, want ErrUnknown", err)
			}
			p.Cancel() // a no-op after the decision
			if l, _, _ := s.List(); len(l) != 0 {
				t.Fatalf("still listed: %+v", l)
			}
			if g := e.list(); len(g) != 1 || g[0] != tc.want {
				t.Fatalf("OnEnd = %v", g)
			}
		})
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	var e ends
	s := New(Config{Timeout: 50 * time.Millisecond, OnEnd: e.add})
	p := open(t, s)
	if o := p.Wait(context.Background()); o != TimedOut {
		t.Fatalf("outcome = %q", o)
	}
	if err := s.Decide(p.Approval().ID, Approve); !errors.Is(err, ErrNotPending) {
		t.Fatalf("late decision: %v, want ErrNotPending", err)
	}

	s = New(Config{Timeout: time.Minute, OnEnd: e.add})
	ctx, cancel := context.WithCancel(context.Background())
	p = open(t, s)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if o := p.Wait(ctx); o != Cancelled {
		t.Fatalf("outcome = %q", o)
	}
	if l, _, _ := s.List(); len(l) != 0 {
		t.Fatalf("cancelled approval still listed: %+v", l)
	}
	if err := s.Decide("no-such-id", Approve); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown id: %v", err)
	}
	if g := e.list(); len(g) != 2 || g[0] != TimedOut || g[1] != Cancelled {
		t.Fatalf("OnEnd = %v", g)
	}
}

func TestBound(t *testing.T) {
	s := New(Config{Max: 2, Timeout: time.Minute})
	a, b := open(t, s), open(t, s)
	if _, err := s.Open(Request{}); !errors.Is(err, ErrFull) {
		t.Fatalf("third open: %v, want ErrFull", err)
	}
	a.Cancel()
	c := open(t, s) // room again
	b.Cancel()
	c.Cancel()
}

func TestNextWakesOnOpen(t *testing.T) {
	s := New(Config{Timeout: time.Minute})
	start := time.Now()
	got := make(chan []Approval)
	go func() {
		l, _, _ := s.Next(context.Background(), 0, 10*time.Second)
		got <- l
	}()
	time.Sleep(50 * time.Millisecond)
	p := open(t, s)
	defer p.Cancel()
	if l := <-got; len(l) != 1 || l[0].ID != p.Approval().ID {
		t.Fatalf("Next = %+v", l)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Next took %v", d)
	}
	// Nothing newer than the cursor: it waits the whole wait.
	_, cur, _ := s.List()
	start = time.Now()
	l, cur2, _ := s.Next(context.Background(), cur, 100*time.Millisecond)
	if d := time.Since(start); d < 100*time.Millisecond || len(l) != 1 || cur2 != cur {
		t.Fatalf("Next with the cursor: %v %+v %d", d, l, cur2)
	}
}

func TestCloseCancelsEverything(t *testing.T) {
	s := New(Config{Timeout: time.Minute})
	p := open(t, s)
	got := make(chan Outcome)
	go func() { got <- p.Wait(context.Background()) }()
	polled := make(chan struct{})
	go func() { s.Next(context.Background(), 1, time.Minute); close(polled) }()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	if o := <-got; o != Cancelled {
		t.Fatalf("outcome = %q", o)
	}
	<-polled
	if _, err := s.Open(Request{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("open after close: %v", err)
	}
}

func TestEndedMemoryIsBounded(t *testing.T) {
	s := New(Config{Timeout: time.Minute})
	first := open(t, s)
	first.Cancel()
	for range endedMemory {
		open(t, s).Cancel()
	}
	if len(s.ended) != endedMemory || len(s.ring) != endedMemory {
		t.Fatalf("remembered %d/%d", len(s.ended), len(s.ring))
	}
	if err := s.Decide(first.Approval().ID, Approve); !errors.Is(err, ErrUnknown) {
		t.Fatalf("forgotten id: %v", err)
	}
}

// TestPathsBound: a revert's approval keeps its files' names whole up to
// MaxPathsBytes together, then the first ones that fit, marked
// paths_truncated; a write's has none (docs/sandbox.md).
func TestPathsBound(t *testing.T) {
	name := strings.Repeat("p", 1000)
	many := make([]string, MaxPathsBytes/1000+5)
	for i := range many {
		many[i] = name
	}
	cases := []struct {
		name      string
		paths     []string
		want      int
		truncated bool
	}{
		{"none", nil, 0, false},
		{"a few", []string{"/r/a", "/r/b"}, 2, false},
		{"exactly the bound", []string{strings.Repeat("p", MaxPathsBytes)}, 1, false},
		{"past the bound", many, MaxPathsBytes / 1000, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Timeout: time.Minute})
			p, err := s.Open(Request{Tool: "revert", Path: "/r/a", Paths: tc.paths, Mode: "workspace-write", Reason: "r"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Cancel()
			if a := p.Approval(); len(a.Paths) != tc.want || a.PathsTruncated != tc.truncated {
				t.Fatalf("%d paths, truncated %v; want %d, truncated %v", len(a.Paths), a.PathsTruncated, tc.want, tc.truncated)
			}
			b, err := json.Marshal(p.Approval())
			if err != nil {
				t.Fatal(err)
			}
			if tc.paths == nil && strings.Contains(string(b), "paths") {
				t.Fatalf("a call of one file has no paths: %s", b)
			}
		})
	}
}

// TestDiffBound: an approval's diff is kept whole up to MaxDiffBytes, then
// cut after the last whole line that fits (a first line longer than the
// bound at a character boundary), and marked truncated.
func TestDiffBound(t *testing.T) {
	line := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name, diff, want string
		truncated        bool
	}{
		{"small", "--- p\n+++ p", "--- p\n+++ p", false},
		{"exactly the bound", line(MaxDiffBytes), line(MaxDiffBytes), false},
		{"a newline just past the bound", line(MaxDiffBytes) + "\nb", line(MaxDiffBytes), true},
		{"a line across the bound", line(10) + "\n" + line(MaxDiffBytes), line(10), true},
		{"lines across the bound", line(MaxDiffBytes-5) + "\n" + line(3) + "\n" + line(3), line(MaxDiffBytes-5) + "\n" + line(3), true},
		{"one long line", line(MaxDiffBytes + 7), line(MaxDiffBytes), true},
		{"one long line of wide characters", line(MaxDiffBytes-1) + "éé", line(MaxDiffBytes - 1), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Timeout: time.Minute})
			p, err := s.Open(Request{Tool: "write", Path: "/r/a.txt", Mode: "workspace-write", Reason: "r", Diff: tc.diff})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Cancel()
			a := p.Approval()
			if a.Diff != tc.want || a.Truncated != tc.truncated {
				t.Fatalf("diff of %d bytes, truncated %v; want %d bytes, truncated %v", len(a.Diff), a.Truncated, len(tc.want), tc.truncated)
			}
			if l, _, _ := s.List(); l[0].Diff != tc.want {
				t.Fatal("List shows another diff")
			}
		})
	}
}
