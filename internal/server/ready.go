package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The readiness checks' timing (docs/deployment.md, "Readiness"): a check
// of every configured dependency each readyInterval, each dependency given
// readyTimeout, and /readyz judges from a check at most readyMaxAge old.
const (
	readyInterval = time.Second
	readyTimeout  = 2 * time.Second
	readyMaxAge   = 5 * time.Second
)

// Reasons /readyz gives (the NOT_READY problem's detail after "not
// ready: "); the causes go to the log only.
const (
	reasonNoCheckYet       = "no readiness check has completed yet"
	reasonStale            = "no readiness check has completed in the last 5s"
	reasonRedisCredentials = "the session store (Redis) refused the server's credentials"
	reasonRedisDatabase    = "the session store (Redis) refused the server's database"
	reasonRedisError       = "the session store (Redis) answered with an error"
	reasonRedisUnreachable = "the session store (Redis) is unreachable"
	reasonNoIssuerKeys     = "the OAuth issuer's keys are not fetched"
)

// dependency is one thing the server needs to serve: check returns the
// reason it cannot ("" when it can) and the cause for the log.
type dependency struct {
	name  string
	attrs []any // for the log
	check func(context.Context) (reason string, cause error)
}

// readiness checks the dependencies every readyInterval and keeps the
// last result; Ready judges from it. It logs each change of a
// dependency's state once, with the cause.
type readiness struct {
	deps []dependency
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	checked time.Time // when the last check completed; zero: none yet
	reasons []string  // the last check's, in deps' order; none: ready
	last    map[string]string

	stop context.CancelFunc
	done chan struct{}
}

// newReadiness starts checking deps (nothing to check: ready at once).
func newReadiness(deps []dependency, log *slog.Logger) *readiness {
	r := &readiness{deps: deps, log: log, now: time.Now, last: map[string]string{}, done: make(chan struct{})}
	if len(deps) == 0 {
		close(r.done)
		r.stop = func() {}
		return r
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go r.run(ctx)
	return r
}

func (r *readiness) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(readyInterval)
	defer t.Stop()
	for {
		r.checkOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkOnce checks every dependency, each within readyTimeout.
func (r *readiness) checkOnce(ctx context.Context) {
	var reasons []string
	for _, d := range r.deps {
		cctx, cancel := context.WithTimeout(ctx, readyTimeout)
		reason, cause := d.check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		r.logChange(d, reason, cause)
	}
	r.mu.Lock()
	r.checked, r.reasons = r.now(), reasons
	r.mu.Unlock()
}

// logChange logs a dependency's state when it differs from its last.
func (r *readiness) logChange(d dependency, reason string, cause error) {
	prev, seen := r.last[d.name]
	r.last[d.name] = reason
	switch {
	case reason != "" && reason != prev:
		r.log.Warn("not ready: "+reason, append([]any{"dependency", d.name, "err", cause}, d.attrs...)...)
	case reason == "" && seen && prev != "":
		r.log.Info("ready again: the "+d.name+" can serve", append([]any{"dependency", d.name}, d.attrs...)...)
	}
}

// Ready reports whether the server can serve, and if not why (the reasons
// joined by "; ").
func (r *readiness) Ready() (bool, string) {
	if len(r.deps) == 0 {
		return true, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.checked.IsZero():
		return false, reasonNoCheckYet
	case r.now().Sub(r.checked) > readyMaxAge:
		return false, reasonStale
	case len(r.reasons) > 0:
		return false, strings.Join(r.reasons, "; ")
	}
	return true, ""
}

// Close stops the checks and waits for the one running.
func (r *readiness) Close() {
	r.stop()
	<-r.done
}

// redisDependency is the Redis of --session-store (url, for the log): it
// answers PING with the server's credentials and database. While it
// cannot, writes and edits answer 503 SESSION_STORE_UNAVAILABLE.
func redisDependency(client *redis.Client, url string) dependency {
	return dependency{name: "session store", attrs: []any{"session-store", redactURL(url)}, check: func(ctx context.Context) (string, error) {
		err := client.Ping(ctx).Err()
		if err == nil {
			return "", nil
		}
		return redisReason(err), err
	}}
}

// issuerDependency is the issuer of --oauth-issuer: its keys are held.
func issuerDependency(v interface{ HasKeys() bool }, issuer string) dependency {
	return dependency{name: "oauth issuer", attrs: []any{"issuer", issuer}, check: func(context.Context) (string, error) {
		if v.HasKeys() {
			return "", nil
		}
		return reasonNoIssuerKeys, nil
	}}
}

// redisReason tells a Redis that refused the server (its credentials, its
// database, another error reply) from one that cannot be reached.
func redisReason(err error) string {
	var reply redis.Error
	switch {
	case redis.IsAuthError(err) || redis.IsPermissionError(err):
		return reasonRedisCredentials
	case errors.As(err, &reply) && strings.Contains(reply.Error(), "DB index"):
		return reasonRedisDatabase
	case errors.As(err, &reply):
		return reasonRedisError
	}
	return reasonRedisUnreachable
}
