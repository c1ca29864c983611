package events

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolfs/toolfs-api/internal/render"
)

// BenchmarkFeed is one mutation's cost to the feed, in memory and on the
// shared Redis stream, in one run (docs/deployment.md, "What Redis
// costs"): announce (Expect), publish, and the time until a subscriber
// of another replica's hub (the same hub in memory) has it.
//
//	go test -run '^$' -bench Feed -benchtime 2000x ./internal/events/
func BenchmarkFeed(b *testing.B) {
	old := strings.Repeat("old line of text\n", 4)
	e := Event{Type: TypeEdit, Path: "src/app/main.go", Session: "chat-42", Version: "2049:1835:120:1733040000000000000:1733040000000000000",
		Diffs: []render.Diff{{Path: "src/app/main.go", OldText: &old, NewText: strings.Repeat("new line of text\n", 4)}}}
	run := func(b *testing.B, pub, sub *Hub) {
		s, err := sub.Subscribe(Filter{}, "")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ResetTimer()
		for range b.N {
			pub.Expect(e.Path)
			pub.Publish(e)
			select {
			case r := <-s.queue:
				s.taken(r)
			case <-time.After(5 * time.Second):
				b.Fatal("no event")
			}
		}
	}
	b.Run("memory", func(b *testing.B) {
		h := NewHub(Config{})
		defer h.Close()
		run(b, h, h)
	})
	b.Run("redis", func(b *testing.B) {
		replica := replicas(b, nil)
		run(b, replica(Config{}), replica(Config{}))
	})
}

// TestRedisMemoryPerEvent measures what the shared stream costs Redis per
// buffered event (MEMORY USAGE of the stream, divided by its entries), for
// an edit event of a few lines and one of about 8 KiB of diff (4 and 128 lines each side), and events of 16 KiB (236 lines), the size at which the 1,024 entries hold the 16 MiB bound, the costliest shape, at the
// default bound of 1,024 entries.
//
//	go test -count=1 -v -run TestRedisMemoryPerEvent ./internal/events/
func TestRedisMemoryPerEvent(t *testing.T) {
	for _, lines := range []int{4, 128, 236} {
		t.Run(fmt.Sprint(lines), func(t *testing.T) {
			replica := replicas(t, nil)
			h := replica(Config{})
			old := strings.Repeat("old line of text, about 32 bytes\n", lines)
			e := Event{Type: TypeEdit, Path: "src/app/main.go", Session: "chat-42", Version: "2049:1835:120:1733040000000000000:1733040000000000000",
				Diffs: []render.Diff{{Path: "src/app/main.go", OldText: &old, NewText: strings.Repeat("new line of text, about 32 bytes\n", lines)}}}
			for range 1024 {
				h.Publish(e)
			}
			ctx := context.Background()
			n, err := h.cfg.Redis.XLen(ctx, h.shared.key).Result()
			if err != nil || n != 1024 {
				t.Fatalf("%d entries, %v", n, err)
			}
			usage, err := h.cfg.Redis.MemoryUsage(ctx, h.shared.key, 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			json := len(e.encode(1 << 20))
			own, _ := h.cfg.Redis.MemoryUsage(ctx, h.shared.ownKey(e.Path)).Result()
			t.Logf("edit event of %d JSON bytes: %d bytes of Redis per buffered event (MEMORY USAGE of the stream %d / %d entries); an own-write key %d bytes for 10 s",
				json, usage/n, usage, n, own)
		})
	}
}
