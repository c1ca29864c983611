package server

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestReadinessJudgesFromARecentCheck: not ready until a first check
// passed, and not ready when the last completed check is more than 5 s old
// (a dependency whose check hangs), on a clock the test moves.
func TestReadinessJudgesFromARecentCheck(t *testing.T) {
	var failing atomic.Bool
	dep := dependency{name: "thing", check: func(context.Context) (string, error) {
		if failing.Load() {
			return "the thing cannot serve", errors.New("cause")
		}
		return "", nil
	}}
	now := time.Unix(1000, 0)
	r := &readiness{deps: []dependency{dep}, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now }, last: map[string]string{}}

	ok, reason := r.Ready()
	assert.False(t, ok)
	assert.Equal(t, "no readiness check has completed yet", reason)

	r.checkOnce(context.Background())
	ok, _ = r.Ready()
	assert.True(t, ok)
	now = now.Add(5 * time.Second)
	ok, _ = r.Ready()
	assert.True(t, ok, "a check 5 s old still counts")
	now = now.Add(time.Millisecond)
	ok, reason = r.Ready()
	assert.False(t, ok)
	assert.Equal(t, "no readiness check has completed in the last 5s", reason)

	failing.Store(true)
	r.checkOnce(context.Background())
	ok, reason = r.Ready()
	assert.False(t, ok)
	assert.Equal(t, "the thing cannot serve", reason)
}

func TestRedisReasons(t *testing.T) {
	assert.Equal(t, reasonRedisUnreachable, redisReason(errors.New("dial tcp 127.0.0.1:1: connect: connection refused")))
	assert.Equal(t, reasonRedisUnreachable, redisReason(context.DeadlineExceeded))
}
