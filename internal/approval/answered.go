package approval

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The answers of the call's own client (MCP elicitation on the sessionless
// revision, docs/sandbox.md) come back sealed in the call's retry; a store
// remembers which it has taken, so that each is taken once.

// ErrAnswered: Redeem was given an answer it took already (a replay).
var ErrAnswered = errors.New("the answer was used already")

// maxRedeemed bounds the answers a store in memory remembers at once (each
// until it expires); past it Redeem refuses with ErrFull.
const maxRedeemed = 1 << 16

// Redeem takes the answer id once: ErrAnswered when it was taken before
// (with Redis, on any replica), ErrFull when this process remembers
// maxRedeemed answers that have not expired, ErrUnavailable when Redis
// cannot be reached. The id is remembered until expires, after which its
// sealed state is refused as expired anyway.
func (s *Store) Redeem(id string, expires time.Time) error {
	ttl := time.Until(expires)
	if ttl <= 0 {
		return ErrAnswered
	}
	if s.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		defer cancel()
		ok, err := s.shared.client.SetNX(ctx, s.shared.prefix+"answered:"+id, 1, ttl+time.Second).Result()
		switch {
		case err != nil && !errors.Is(err, redis.Nil):
			return unavailable(err)
		case !ok:
			return ErrAnswered
		}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.redeemed == nil {
		s.redeemed = map[string]time.Time{}
	}
	if until, ok := s.redeemed[id]; ok && time.Now().Before(until) {
		return ErrAnswered
	}
	if len(s.redeemed) >= maxRedeemed {
		now := time.Now()
		for k, until := range s.redeemed {
			if !now.Before(until) {
				delete(s.redeemed, k)
			}
		}
		if len(s.redeemed) >= maxRedeemed {
			return ErrFull
		}
	}
	s.redeemed[id] = expires
	return nil
}

// Key is the key that seals the answers of the call's own client: key
// when given (--elicitation-key), else with Redis one shared by every
// replica (the first to start makes it), else a new random one.
func (s *Store) Key(key []byte) ([]byte, error) {
	if len(key) > 0 {
		return key, nil
	}
	fresh := make([]byte, 32)
	rand.Read(fresh)
	if s.shared == nil {
		return fresh, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	k := s.shared.prefix + "elicitation:key"
	if err := s.shared.client.SetNX(ctx, k, fresh, 0).Err(); err != nil {
		return nil, unavailable(err)
	}
	b, err := s.shared.client.Get(ctx, k).Bytes()
	if err != nil || len(b) != 32 {
		return nil, unavailable(errors.Join(err, errors.New("the shared elicitation key is not 32 bytes")))
	}
	return b, nil
}
