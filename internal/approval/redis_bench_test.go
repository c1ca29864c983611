package approval

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkApprovalRoundTrip is a decision's way, in memory and across two
// replicas on Redis, in one run (docs/deployment.md, "What Redis costs"):
// open an approval, a person's client lists it and decides it (on the
// other replica), and the waiting call has its outcome.
//
//	go test -run '^$' -bench ApprovalRoundTrip -benchtime 1000x ./internal/approval/
func BenchmarkApprovalRoundTrip(b *testing.B) {
	run := func(b *testing.B, holder, decider *Store) {
		for range b.N {
			p, err := holder.Open(Request{Session: "s", Tool: "edit", Path: "/r/a.txt", Mode: "workspace-write", Reason: "escalate sandbox to workspace-write: why", Diff: "--- a\n+++ a\n@@ -1,1 +1,1 @@\n-x\n+y"})
			if err != nil {
				b.Fatal(err)
			}
			l, _, err := decider.List()
			if err != nil || len(l) != 1 {
				b.Fatalf("list %d %v", len(l), err)
			}
			if err := decider.Decide(l[0].ID, Approve); err != nil {
				b.Fatal(err)
			}
			if o := p.Wait(context.Background()); o != Approved {
				b.Fatal(o)
			}
		}
	}
	b.Run("memory", func(b *testing.B) {
		s := New(Config{Timeout: time.Minute})
		defer s.Close()
		run(b, s, s)
	})
	b.Run("redis", func(b *testing.B) {
		replica := cluster(b, nil)
		run(b, replica(Config{}), replica(Config{}))
	})
}

// TestRedisMemoryPerApproval measures what a pending approval costs Redis
// (MEMORY USAGE of its record, plus its entry in the pending set, and of an
// ended one's memory), with a diff of a few lines and with the 64 KiB most.
//
//	go test -count=1 -v -run TestRedisMemoryPerApproval ./internal/approval/
func TestRedisMemoryPerApproval(t *testing.T) {
	for _, diff := range []int{100, MaxDiffBytes} {
		t.Run(fmt.Sprint(diff), func(t *testing.T) {
			replica := cluster(t, nil)
			s := replica(Config{Max: 32})
			ctx := context.Background()
			c, prefix := s.cfg.Redis, s.shared.prefix
			before, _ := c.MemoryUsage(ctx, prefix+"approvals:pending", 0).Result()
			var ps []*Pending
			for range 32 {
				p, err := s.Open(Request{Session: "chat-42", Tool: "edit", Path: "/srv/workspace/src/app/main.go", Mode: "workspace-write",
					Reason: "escalate sandbox to workspace-write: The user asked to turn debugging on.", Diff: strings.Repeat("+", diff)})
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			rec, _ := c.MemoryUsage(ctx, prefix+"approval:"+ps[0].Approval().ID, 0).Result()
			set, _ := c.MemoryUsage(ctx, prefix+"approvals:pending", 0).Result()
			for _, p := range ps {
				p.Cancel()
			}
			ended, _ := c.MemoryUsage(ctx, prefix+"approvals:ended", 0).Result()
			queue, _ := c.MemoryUsage(ctx, prefix+"approvals:endedq", 0).Result()
			t.Logf("diff of %d bytes: %d bytes per pending approval (its record %d + its share of the pending set %d); %d bytes per ended one remembered",
				diff, rec+(set-before)/32, rec, (set-before)/32, (ended+queue)/32)
		})
	}
}
