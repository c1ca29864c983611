package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/redistest"
)

// The redis-server of this package's tests (nil when the binary is
// missing: the Redis cases skip). Each cluster of stores gets its own key
// prefix, so tests share the server safely.
var (
	sharedRedis *redistest.Server
	prefixes    atomic.Int64
)

func TestMain(m *testing.M) { redistest.Main(m, &sharedRedis) }

// cluster returns a function that makes replicas: stores on one Redis
// under one fresh prefix, each with its own client (as separate processes
// have), closed at cleanup.
func cluster(t testing.TB, srv *redistest.Server) func(cfg Config) *Store {
	t.Helper()
	if srv == nil {
		if sharedRedis == nil {
			t.Skip(redistest.MissingReason)
		}
		srv = sharedRedis
	}
	prefix := fmt.Sprintf("t%d:", prefixes.Add(1))
	return func(cfg Config) *Store {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: 1})
		cfg.Redis, cfg.Prefix = c, prefix
		if cfg.Timeout == 0 {
			cfg.Timeout = time.Minute
		}
		s := New(cfg)
		t.Cleanup(func() { s.Close(); c.Close() })
		return s
	}
}

func list(t *testing.T, s *Store) []Approval {
	t.Helper()
	l, _, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSharedDecidedOnAnotherReplica: an approval opened on A is listed on B
// with everything A recorded (the diff, truncated), decided on B, and A's
// waiting call learns the decision within a second; a second decision is
// ErrUnknown on either replica; OnEnd is told once, on A.
func TestSharedDecidedOnAnotherReplica(t *testing.T) {
	for _, tc := range []struct {
		decision Decision
		want     Outcome
	}{{Approve, Approved}, {Reject, Rejected}} {
		t.Run(string(tc.decision), func(t *testing.T) {
			replica := cluster(t, nil)
			var endsA, endsB ends
			a, b := replica(Config{OnEnd: endsA.add}), replica(Config{OnEnd: endsB.add})
			diff := strings.Repeat("+x\n", MaxDiffBytes/3) + "+end"
			p, err := a.Open(Request{Session: "s1", Tool: "edit", Path: "/r/a.txt", Mode: "workspace-write", Reason: "escalate sandbox to workspace-write: why", Diff: diff})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Cancel()
			l := list(t, b)
			if len(l) != 1 {
				t.Fatalf("B lists %d approvals", len(l))
			}
			want := p.Approval()
			if got := l[0]; got.ID != want.ID || got.Session != "s1" || got.Tool != "edit" || got.Path != "/r/a.txt" || got.Mode != "workspace-write" ||
				got.Reason != want.Reason || got.Diff != want.Diff || !got.Truncated || !got.Created.Equal(want.Created) || !got.Expires.Equal(want.Expires) {
				t.Fatalf("B lists %+v\nwant %+v", got, want)
			}
			got := make(chan Outcome, 1)
			go func() { got <- p.Wait(context.Background()) }()
			start := time.Now()
			if err := b.Decide(want.ID, tc.decision); err != nil {
				t.Fatal(err)
			}
			select {
			case o := <-got:
				if o != tc.want {
					t.Fatalf("outcome %q, want %q", o, tc.want)
				}
			case <-time.After(time.Second):
				t.Fatal("A's call did not learn of B's decision within a second")
			}
			t.Logf("decided on B, learned on A after %v", time.Since(start))
			for _, s := range []*Store{a, b} {
				if err := s.Decide(want.ID, tc.decision); !errors.Is(err, ErrUnknown) {
					t.Fatalf("second decision: %v, want ErrUnknown", err)
				}
				if l := list(t, s); len(l) != 0 {
					t.Fatalf("still listed: %+v", l)
				}
			}
			if g := endsA.list(); len(g) != 1 || g[0] != tc.want {
				t.Fatalf("OnEnd on A = %v", g)
			}
			if g := endsB.list(); len(g) != 0 {
				t.Fatalf("OnEnd on B = %v", g)
			}
		})
	}
}

// TestSharedTimeoutAndCancel: an approval that timed out, or whose call
// went away, on A leaves every list and is ErrNotPending on B.
func TestSharedTimeoutAndCancel(t *testing.T) {
	replica := cluster(t, nil)
	var e ends
	a, b := replica(Config{Timeout: 100 * time.Millisecond, OnEnd: e.add}), replica(Config{})
	p := open(t, a)
	if o := p.Wait(context.Background()); o != TimedOut {
		t.Fatalf("outcome %q", o)
	}
	if err := b.Decide(p.Approval().ID, Approve); !errors.Is(err, ErrNotPending) {
		t.Fatalf("late decision: %v, want ErrNotPending", err)
	}

	a = replica(Config{OnEnd: e.add})
	ctx, cancel := context.WithCancel(context.Background())
	p = open(t, a)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if o := p.Wait(ctx); o != Cancelled {
		t.Fatalf("outcome %q", o)
	}
	if l := list(t, b); len(l) != 0 {
		t.Fatalf("cancelled approval still listed on B: %+v", l)
	}
	if err := b.Decide(p.Approval().ID, Reject); !errors.Is(err, ErrNotPending) {
		t.Fatalf("decision after cancel: %v", err)
	}
	if err := b.Decide("no-such-id", Approve); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown id: %v", err)
	}
	if g := e.list(); len(g) != 2 || g[0] != TimedOut || g[1] != Cancelled {
		t.Fatalf("OnEnd = %v", g)
	}
}

// TestSharedDecisionWinsTheRace: a decision recorded in Redis before the
// holder's timeout fires keeps its outcome, as in memory.
func TestSharedDecisionWinsTheRace(t *testing.T) {
	replica := cluster(t, nil)
	a, b := replica(Config{}), replica(Config{})
	p := open(t, a)
	// Recorded in Redis without A hearing of it yet: A's own end (its
	// timeout) must find the decision.
	if err := b.shared.decide(p.Approval().ID, Approved); err != nil {
		t.Fatal(err)
	}
	p.end(TimedOut)
	if o := p.Wait(context.Background()); o != Approved {
		t.Fatalf("outcome %q, want the decision", o)
	}
}

// TestSharedBoundAcrossReplicas: Max holds for the cluster, not per
// replica.
func TestSharedBoundAcrossReplicas(t *testing.T) {
	replica := cluster(t, nil)
	a, b := replica(Config{Max: 2}), replica(Config{Max: 2})
	pa := open(t, a)
	pb := open(t, b)
	for _, s := range []*Store{a, b} {
		if _, err := s.Open(Request{}); !errors.Is(err, ErrFull) {
			t.Fatalf("third open: %v, want ErrFull", err)
		}
	}
	pa.Cancel()
	pc := open(t, b) // room again
	pb.Cancel()
	pc.Cancel()
	if a.Len() != 0 || b.Len() != 0 {
		t.Fatalf("held: %d, %d", a.Len(), b.Len())
	}
}

// TestSharedNextWakesOnAnotherReplica: a long poll on B answers when A
// opens an approval, with B's cursor moving as it would on one server.
func TestSharedNextWakesOnAnotherReplica(t *testing.T) {
	replica := cluster(t, nil)
	a, b := replica(Config{}), replica(Config{})
	got := make(chan []Approval, 1)
	go func() {
		l, _, _ := b.Next(context.Background(), 0, 10*time.Second)
		got <- l
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	p := open(t, a)
	defer p.Cancel()
	select {
	case l := <-got:
		if len(l) != 1 || l[0].ID != p.Approval().ID {
			t.Fatalf("Next = %+v", l)
		}
		t.Logf("opened on A, B's long poll answered after %v", time.Since(start))
	case <-time.After(time.Second):
		t.Fatal("B's long poll was not woken within a second")
	}
	_, cur, _ := b.List()
	_, curA, _ := a.List()
	if cur != curA || cur == 0 {
		t.Fatalf("cursors differ: A %d, B %d", curA, cur)
	}
	start = time.Now()
	l, cur2, err := a.Next(context.Background(), cur, 200*time.Millisecond)
	if d := time.Since(start); err != nil || d < 200*time.Millisecond || len(l) != 1 || cur2 != cur {
		t.Fatalf("Next with the cursor: %v %v %+v %d", err, d, l, cur2)
	}
}

// TestSharedHolderDies: a replica that dies (no Close: its heartbeat just
// stops) has its approvals withdrawn within Lease: gone from the
// survivors' lists, a decision is ErrNotPending, and they no longer count
// against Max.
func TestSharedHolderDies(t *testing.T) {
	replica := cluster(t, nil)
	const lease = 500 * time.Millisecond
	a, b := replica(Config{Max: 1, Lease: lease}), replica(Config{Max: 1, Lease: lease})
	p := open(t, a)
	a.shared.stop() // dead: no heartbeat, no subscription
	if l := list(t, b); len(l) != 1 {
		t.Fatalf("before the lease ran out B lists %d", len(l))
	}
	deadline := time.Now().Add(lease + time.Second)
	for len(list(t, b)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a dead holder's approval is still listed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := b.Decide(p.Approval().ID, Approve); !errors.Is(err, ErrNotPending) {
		t.Fatalf("decision for a withdrawn approval: %v, want ErrNotPending", err)
	}
	q := open(t, b) // Max 1: the withdrawn one no longer counts
	q.Cancel()
}

// TestSharedHeartbeatKeepsAlive: a holder's heartbeat keeps its approval
// pending well past Lease.
func TestSharedHeartbeatKeepsAlive(t *testing.T) {
	replica := cluster(t, nil)
	const lease = 300 * time.Millisecond
	a, b := replica(Config{Lease: lease}), replica(Config{Lease: lease})
	p := open(t, a)
	defer p.Cancel()
	time.Sleep(4 * lease)
	if l := list(t, b); len(l) != 1 {
		t.Fatalf("B lists %d after 4 leases", len(l))
	}
	got := make(chan Outcome, 1)
	go func() { got <- p.Wait(context.Background()) }()
	if err := b.Decide(p.Approval().ID, Approve); err != nil {
		t.Fatal(err)
	}
	if o := <-got; o != Approved {
		t.Fatalf("outcome %q", o)
	}
}

// TestSharedLostMessage: the holder's subscription is killed by Redis
// (CLIENT KILL TYPE pubsub) as the decision is published; the decision
// still reaches the waiting call, through the resubscription's check or
// the heartbeat, within a second or two.
func TestSharedLostMessage(t *testing.T) {
	replica := cluster(t, nil)
	a, b := replica(Config{Lease: time.Second}), replica(Config{Lease: time.Second})
	p := open(t, a)
	got := make(chan Outcome, 1)
	go func() { got <- p.Wait(context.Background()) }()
	admin := redis.NewClient(&redis.Options{Addr: sharedRedis.Addr})
	defer admin.Close()
	if err := admin.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	// Recorded without a message A can hear.
	if err := b.shared.decide(p.Approval().ID, Approved); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-got:
		if o != Approved {
			t.Fatalf("outcome %q", o)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the decision never reached the holder")
	}
}

// TestSharedRedisDown: without Redis nothing opens (ErrUnavailable, so
// nothing is granted), listing and deciding say so, and once Redis is back
// everything works again without a restart; a call whose approval Redis
// lost in a restart is cancelled.
func TestSharedRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	replica := cluster(t, srv)
	a, b := replica(Config{}), replica(Config{})
	srv.Stop()
	if _, err := a.Open(Request{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open: %v", err)
	}
	if _, _, err := b.List(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("list: %v", err)
	}
	if err := b.Decide("x", Approve); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("decide: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	p := open(t, a)
	got := make(chan Outcome, 1)
	go func() { got <- p.Wait(context.Background()) }()
	if err := b.Decide(p.Approval().ID, Reject); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-got:
		if o != Rejected {
			t.Fatalf("outcome %q", o)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no decision after Redis came back")
	}

	// A call waiting while Redis restarts empty: its approval is gone, and
	// the heartbeat refuses the call as cancelled, never granted.
	p = open(t, a)
	go func() { got <- p.Wait(context.Background()) }()
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-got:
		if o != Cancelled {
			t.Fatalf("outcome %q", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call still waits for an approval Redis lost")
	}
}

// TestSharedCloseWithdraws: Close on A (a shutdown) cancels its waiting
// calls and withdraws them from B's list at once.
func TestSharedCloseWithdraws(t *testing.T) {
	replica := cluster(t, nil)
	a, b := replica(Config{}), replica(Config{})
	p := open(t, a)
	got := make(chan Outcome, 1)
	go func() { got <- p.Wait(context.Background()) }()
	a.Close()
	if o := <-got; o != Cancelled {
		t.Fatalf("outcome %q", o)
	}
	if l := list(t, b); len(l) != 0 {
		t.Fatalf("B still lists %+v", l)
	}
	if _, err := a.Open(Request{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("open after close: %v", err)
	}
}

// TestSharedEndedMemoryIsBounded: Redis remembers how the last endedMemory
// approvals ended, no more.
func TestSharedEndedMemoryIsBounded(t *testing.T) {
	replica := cluster(t, nil)
	a := replica(Config{})
	first := open(t, a)
	first.Cancel()
	for range endedMemory {
		open(t, a).Cancel()
	}
	ctx := context.Background()
	n, err := a.cfg.Redis.HLen(ctx, a.shared.prefix+"approvals:ended").Result()
	if err != nil || n != endedMemory {
		t.Fatalf("remembered %d (%v)", n, err)
	}
	if q, _ := a.cfg.Redis.LLen(ctx, a.shared.prefix+"approvals:endedq").Result(); q != endedMemory {
		t.Fatalf("queue %d", q)
	}
	if err := a.Decide(first.Approval().ID, Approve); !errors.Is(err, ErrUnknown) {
		t.Fatalf("forgotten id: %v", err)
	}
}
