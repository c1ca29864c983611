package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/redistest"
)

// TestRedisFullHeals runs the real server on a Redis session store whose
// maxmemory is small, with noeviction (docs/deployment.md, "When Redis is
// full"). Reads of missing files at 3,800-byte paths fill it: then a read
// still answers, and a write or an edit answers 503
// SESSION_STORE_UNAVAILABLE and writes nothing. Once every session has
// passed its TTL, the edit is refused only for want of a read, and after
// one it works; or DELETE /sessions/{id} of the sessions that filled it
// answers 204, and the edit works again.
func TestRedisFullHeals(t *testing.T) {
	t.Run("expiry", func(t *testing.T) {
		f := fillRedis(t)
		f.fill("ttl-")
		f.refuses()
		f.elapsed.Add(int64(f.ttl + time.Microsecond)) // every session expires
		r := f.edit("two", "three")
		assert.Equal(t, 409, r.Status, "the edit's own call frees the expired sessions: %s", r.Raw)
		assert.Equal(t, "FS_NOT_OBSERVED", r.Code, "the read before expired")
		require.Equal(t, 200, f.tool("read", "editor", obj{"file_path": "a.txt"}).Status)
		r = f.edit("two", "three")
		assert.Equal(t, 200, r.Status, r.Raw)
		r = f.tool("write", "editor", obj{"file_path": "new.txt", "content": "new\n"})
		assert.Equal(t, 200, r.Status, r.Raw)
		assert.Equal(t, "three\n", f.contents("a.txt"))
		assert.Equal(t, "new\n", f.contents("new.txt"))
	})
	t.Run("delete", func(t *testing.T) {
		f := fillRedis(t)
		ids := f.fill("del-")
		f.refuses()
		for _, id := range ids {
			r := f.do(http.MethodDelete, "/sessions/"+id, "")
			assert.Equal(t, 204, r.Status, "a forget frees, even in a full Redis: %s", r.Raw)
		}
		r := f.edit("two", "three")
		assert.Equal(t, 200, r.Status, r.Raw)
		r = f.tool("write", "editor", obj{"file_path": "new.txt", "content": "new\n"})
		assert.Equal(t, 200, r.Status, r.Raw)
		assert.Equal(t, "three\n", f.contents("a.txt"))
		assert.Equal(t, "new\n", f.contents("new.txt"))
	})
}

// redisFill is a server on a Redis session store with 128 KiB of room
// left, whose session "editor" read a.txt ("two\n").
type redisFill struct {
	*harness
	client  *redis.Client
	elapsed *atomic.Int64 // the store's clock, moved by the test
	ttl     time.Duration
	deep    string // 3,765 bytes of folders, under the root
}

func fillRedis(t *testing.T) *redisFill {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	f := &redisFill{client: client, elapsed: new(atomic.Int64), ttl: time.Minute,
		deep: strings.Repeat(strings.Repeat("d", 250)+"/", 15)}
	epoch := time.Unix(1_700_000_000, 0)
	store := policy.NewRedisStore(client, policy.Config{
		TTL: f.ttl, Now: func() time.Time { return epoch.Add(time.Duration(f.elapsed.Load())) },
	}, policy.RedisOptions{})
	f.harness = start(t, options{store: store})
	f.file("a.txt", "one\n")
	require.NoError(t, os.MkdirAll(f.path(f.deep), 0o755))

	// Every command the store's script runs, once: Redis allocates a latency
	// histogram for each command on its first call, which would otherwise
	// come out of the little room left.
	require.Equal(t, 200, f.tool("read", "editor", obj{"file_path": "a.txt"}).Status)
	require.Equal(t, 200, f.edit("one", "two").Status)
	require.Equal(t, 404, f.tool("read", "warm-up", obj{"file_path": f.deep + "missing.txt"}).Status)
	require.Equal(t, 204, f.do(http.MethodDelete, "/sessions/warm-up", "").Status)
	f.get("/metrics")
	require.NoError(t, client.ConfigSet(context.Background(), "maxmemory", "0").Err())
	require.NoError(t, client.Info(context.Background(), "memory").Err())
	f.setMaxMemory(128 << 10)
	return f
}

// setMaxMemory sets Redis's maxmemory to what it uses now plus room.
func (f *redisFill) setMaxMemory(room int64) {
	t := f.t
	t.Helper()
	ctx := context.Background()
	info, err := f.client.Info(ctx, "memory").Result()
	require.NoError(t, err)
	used, err := strconv.ParseInt(regexp.MustCompile(`used_memory:(\d+)`).FindStringSubmatch(info)[1], 10, 64)
	require.NoError(t, err)
	require.NoError(t, f.client.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+room, 10)).Err())
}

func (f *redisFill) edit(old, new string) reply {
	return f.tool("edit", "editor", obj{"file_path": "a.txt", "old_string": old, "new_string": new})
}

// lost is how many observations the store refused.
func (f *redisFill) lost() int {
	m := regexp.MustCompile(`toolfs_session_store_errors_total\{op="observe"\} (\d+)`).FindStringSubmatch(f.get("/metrics").Raw)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// fill reads missing files in sessions named by prefix until Redis refuses
// even a new session's edit (which, refused by the policy, would write
// nothing), and returns those sessions.
func (f *redisFill) fill(prefix string) []string {
	t := f.t
	t.Helper()
	ids := []string{prefix + "0", prefix + "1", prefix + "2", prefix + "3"}
	before := f.lost()
	for i := 0; i < 20000; i++ {
		r := f.tool("read", ids[i%len(ids)], obj{"file_path": fmt.Sprintf("%smissing-%06d.txt", f.deep, i)})
		require.Equal(t, 404, r.Status, "a read answers, recorded or not")
		if i%100 != 99 {
			continue
		}
		r = f.tool("edit", prefix+"probe", obj{"file_path": "a.txt", "old_string": "x", "new_string": "y"})
		if r.Status == 503 {
			t.Logf("Redis full after %d reads of missing files, %d observations lost", i+1, f.lost()-before)
			assert.Greater(t, f.lost(), before, "reads lost their observations before")
			// Full by 32 KiB more, so the buffers Redis 7 shrinks on its own
			// (a client's reply buffer: 16 KiB) cannot make room again.
			f.setMaxMemory(-32 << 10)
			return ids
		}
		require.Equal(t, "FS_NOT_OBSERVED", r.Code, r.Raw)
	}
	t.Fatal("Redis never filled")
	return nil
}

// refuses checks that a full Redis fails closed: a write and an edit
// answer 503 and write nothing, a read answers.
func (f *redisFill) refuses() {
	t := f.t
	t.Helper()
	r := f.tool("write", "editor", obj{"file_path": "new.txt", "content": "new\n"})
	assert.Equal(t, 503, r.Status)
	assert.Equal(t, "SESSION_STORE_UNAVAILABLE", r.Code)
	assert.Equal(t, `Error: cannot write "`+f.path("new.txt")+`": the session store is unavailable, nothing was written; retry shortly`, r.Output)
	r = f.edit("two", "lost")
	assert.Equal(t, 503, r.Status)
	assert.Equal(t, `Error: cannot edit "`+f.path("a.txt")+`": the session store is unavailable, nothing was written; retry shortly`, r.Output)
	r = f.tool("read", "editor", obj{"file_path": "a.txt"})
	assert.Equal(t, 200, r.Status, "a read answers")
	assert.Contains(t, r.Output, "1: two")
	assert.Equal(t, "two\n", f.contents("a.txt"), "nothing was written")
	assert.NoFileExists(t, f.path("new.txt"))
}
