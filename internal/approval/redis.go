package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// shared keeps a Store's approvals in Redis (docs/deployment.md, "Approvals
// and the change feed"). Every replica of a workspace lists and decides the
// same approvals; the call waits in the replica that opened it (its
// holder), which learns of a decision through one pub/sub channel and, as
// a fallback for a lost message, from its heartbeat. Keys, under the
// prefix:
//
//	approvals:seq      counter: the cursor of the newest approval opened
//	approvals:pending  sorted set: pending ids by their cursor
//	approval:<id>      the approval's JSON, expiring Lease after its
//	                   holder's last heartbeat
//	approvals:ended    hash: how the last endedMemory ended approvals ended
//	approvals:endedq   list: their ids, oldest first
//	approvals          the channel: "open <id>", "end <id> <outcome>"
//
// An id in approvals:pending whose approval:<id> expired is an approval
// whose holder died: every script withdraws it first (ended as cancelled).
type shared struct {
	s      *Store
	client redis.UniversalClient
	prefix string
	lease  time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
	once   sync.Once
}

// redisTimeout bounds one script call.
const redisTimeout = 3 * time.Second

func newShared(s *Store, cfg Config) *shared {
	sh := &shared{s: s, client: cfg.Redis, prefix: cfg.Prefix, lease: cfg.Lease}
	if sh.prefix == "" {
		sh.prefix = "toolfs:"
	}
	if sh.lease <= 0 {
		sh.lease = 5 * time.Second
	}
	sh.ctx, sh.cancel = context.WithCancel(context.Background())
	sub := sh.client.Subscribe(sh.ctx, sh.prefix+"approvals")
	sh.done.Add(2)
	go sh.listen(sub)
	go sh.heartbeat()
	return sh
}

// stop ends the subscription and the heartbeat; the Store has ended its
// approvals already.
func (sh *shared) stop() {
	sh.once.Do(func() {
		sh.cancel()
		sh.done.Wait()
	})
}

// script is every operation, one atomic call each. KEYS[1] is the prefix;
// ARGV[1] the operation.
var script = redis.NewScript(`
local p = KEYS[1]
local pend, ended, endq = p .. 'approvals:pending', p .. 'approvals:ended', p .. 'approvals:endedq'
local function rec(id) return p .. 'approval:' .. id end
local function remember(id, o)
  redis.call('HSET', ended, id, o)
  redis.call('RPUSH', endq, id)
  if redis.call('LLEN', endq) > ` + strconv.Itoa(endedMemory) + ` then
    redis.call('HDEL', ended, redis.call('LPOP', endq))
  end
end
local function withdraw()
  for _, id in ipairs(redis.call('ZRANGE', pend, 0, -1)) do
    if redis.call('EXISTS', rec(id)) == 0 then
      redis.call('ZREM', pend, id)
      remember(id, 'cancelled')
    end
  end
end
local op = ARGV[1]
if op == 'open' then -- id, json, lease ms, max
  withdraw()
  if redis.call('ZCARD', pend) >= tonumber(ARGV[5]) then return {'full', 0} end
  local seq = redis.call('INCR', p .. 'approvals:seq')
  redis.call('SET', rec(ARGV[2]), ARGV[3], 'PX', ARGV[4])
  redis.call('ZADD', pend, seq, ARGV[2])
  redis.call('PUBLISH', p .. 'approvals', 'open ' .. ARGV[2])
  return {'ok', seq}
elseif op == 'list' then
  withdraw()
  local out = {redis.call('GET', p .. 'approvals:seq') or '0'}
  local ids = redis.call('ZRANGE', pend, 0, -1, 'WITHSCORES')
  for i = 1, #ids, 2 do
    out[#out + 1] = ids[i + 1]
    out[#out + 1] = redis.call('GET', rec(ids[i]))
  end
  return out
elseif op == 'decide' then -- id, outcome
  local id = ARGV[2]
  if not redis.call('ZSCORE', pend, id) then
    local o = redis.call('HGET', ended, id)
    if o == 'timeout' or o == 'cancelled' then return 'not_pending' end
    return 'unknown'
  end
  redis.call('ZREM', pend, id)
  if redis.call('DEL', rec(id)) == 0 then
    remember(id, 'cancelled')
    return 'not_pending'
  end
  remember(id, ARGV[3])
  redis.call('PUBLISH', p .. 'approvals', 'end ' .. id .. ' ' .. ARGV[3])
  return 'ok'
elseif op == 'end' then -- id, outcome
  local id = ARGV[2]
  if redis.call('ZREM', pend, id) == 1 then
    redis.call('DEL', rec(id))
    remember(id, ARGV[3])
    return ARGV[3]
  end
  return redis.call('HGET', ended, id) or ARGV[3]
elseif op == 'beat' then -- lease ms, ids...
  local gone = {}
  for i = 3, #ARGV do
    local id = ARGV[i]
    if redis.call('PEXPIRE', rec(id), ARGV[2]) == 0 then
      if redis.call('ZREM', pend, id) == 1 then remember(id, 'cancelled') end
      gone[#gone + 1] = id
      gone[#gone + 1] = redis.call('HGET', ended, id) or 'cancelled'
    end
  end
  return gone
end
return redis.error_reply('unknown operation')
`)

func (sh *shared) run(args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	return script.Run(ctx, sh.client, []string{sh.prefix}, args...).Result()
}

// open records a in Redis and returns its cursor: ErrFull past Max for the
// whole cluster, ErrUnavailable without Redis.
func (sh *shared) open(a Approval) (uint64, error) {
	// Not HTML-escaped: a diff full of < and > would take six bytes for
	// each in Redis.
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return 0, err
	}
	res, err := sh.run("open", a.ID, data.Bytes(), sh.lease.Milliseconds(), sh.s.cfg.Max)
	if err != nil {
		return 0, unavailable(err)
	}
	r, _ := res.([]any)
	if len(r) != 2 {
		return 0, ErrUnavailable
	}
	if r[0] == "full" {
		return 0, ErrFull
	}
	seq, _ := r[1].(int64)
	return uint64(seq), nil
}

// end ends id as o (a timeout, a cancel) unless a decision came first, and
// returns the outcome that stands. Without Redis it is o: the approval
// then expires there, Lease after the last heartbeat.
func (sh *shared) end(id string, o Outcome) Outcome {
	res, err := sh.run("end", id, string(o))
	if err != nil {
		return o
	}
	if got, ok := outcomeOf(res); ok {
		return got
	}
	return o
}

// decide records o (Approved or Rejected) for id.
func (sh *shared) decide(id string, o Outcome) error {
	res, err := sh.run("decide", id, string(o))
	if err != nil {
		return unavailable(err)
	}
	switch res {
	case "ok":
		return nil
	case "not_pending":
		return ErrNotPending
	}
	return ErrUnknown
}

// list is every replica's pending approvals, oldest first, the cursor, and
// each approval's own cursor.
func (sh *shared) list() ([]Approval, uint64, []uint64, error) {
	res, err := sh.run("list")
	if err != nil {
		return nil, 0, nil, unavailable(err)
	}
	r, _ := res.([]any)
	if len(r) == 0 {
		return nil, 0, nil, ErrUnavailable
	}
	cursor, _ := strconv.ParseUint(str(r[0]), 10, 64)
	out := make([]Approval, 0, (len(r)-1)/2)
	seqs := make([]uint64, 0, (len(r)-1)/2)
	for i := 1; i+1 < len(r); i += 2 {
		seq, _ := strconv.ParseUint(str(r[i]), 10, 64)
		var a Approval
		if json.Unmarshal([]byte(str(r[i+1])), &a) != nil {
			continue
		}
		out = append(out, a)
		seqs = append(seqs, seq)
	}
	return out, cursor, seqs, nil
}

// next is Store.Next over Redis: the list when one opened after cursor is
// pending; else it waits to be woken (an "open" message from any
// replica) or for expired.
func (sh *shared) next(ctx context.Context, cursor uint64, expired <-chan time.Time) ([]Approval, uint64, error) {
	for {
		sh.s.mu.Lock()
		wake, closed := sh.s.wake, sh.s.closed
		sh.s.mu.Unlock()
		l, cur, seqs, err := sh.list()
		if err != nil || closed || slices.ContainsFunc(seqs, func(q uint64) bool { return q > cursor }) {
			return l, cur, err
		}
		select {
		case <-wake:
		case <-expired:
			return sh.s.List()
		case <-ctx.Done():
			return sh.s.List()
		}
	}
}

// listen follows the channel: an "open" wakes this replica's long polls,
// an "end" finishes the approval if its call waits here. Each
// (re)subscription checks the approvals held here at once, in case a
// decision's message was lost while the connection was down.
func (sh *shared) listen(sub *redis.PubSub) {
	defer sh.done.Done()
	defer sub.Close()
	ch := sub.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		var m any
		select {
		case m = <-ch:
		case <-sh.ctx.Done():
			return
		}
		switch m := m.(type) {
		case *redis.Subscription:
			sh.wakeNext()
			sh.beat()
		case *redis.Message:
			verb, rest, _ := strings.Cut(m.Payload, " ")
			switch verb {
			case "open":
				sh.wakeNext()
			case "end":
				id, o, _ := strings.Cut(rest, " ")
				if got, ok := outcomeOf(o); ok {
					sh.deliver(id, got)
				}
			}
		}
	}
}

func (sh *shared) wakeNext() {
	sh.s.mu.Lock()
	defer sh.s.mu.Unlock()
	if !sh.s.closed {
		sh.s.wakeLocked()
	}
}

// deliver finishes id with o if its call waits here.
func (sh *shared) deliver(id string, o Outcome) {
	sh.s.mu.Lock()
	p := sh.s.pending[id]
	sh.s.mu.Unlock()
	if p != nil {
		p.finish(o)
	}
}

// heartbeat keeps the approvals held here alive in Redis, every Lease/5
// while there are some, and finishes those that ended there meanwhile (a
// decision whose message was lost, or a withdrawal after an outage longer
// than Lease).
func (sh *shared) heartbeat() {
	defer sh.done.Done()
	t := time.NewTicker(sh.lease / 5)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			sh.beat()
		case <-sh.ctx.Done():
			return
		}
	}
}

func (sh *shared) beat() {
	sh.s.mu.Lock()
	ids := make([]any, 0, len(sh.s.pending)+2)
	ids = append(ids, "beat", sh.lease.Milliseconds())
	for id := range sh.s.pending {
		ids = append(ids, id)
	}
	sh.s.mu.Unlock()
	if len(ids) == 2 {
		return
	}
	res, err := sh.run(ids...)
	if err != nil {
		slog.Debug("approvals: heartbeat failed", "err", err)
		return
	}
	gone, _ := res.([]any)
	for i := 0; i+1 < len(gone); i += 2 {
		o, ok := outcomeOf(gone[i+1])
		if !ok {
			o = Cancelled
		}
		sh.deliver(str(gone[i]), o)
	}
}

func outcomeOf(v any) (Outcome, bool) {
	switch o := Outcome(str(v)); o {
	case Approved, Rejected, TimedOut, Cancelled:
		return o, true
	}
	return "", false
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func unavailable(err error) error {
	return errors.Join(ErrUnavailable, err)
}
