package policy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/redistest"
)

// usedMemory is Redis's used_memory: the bytes its allocator holds for
// data, keys, buffers and the script cache (not the Lua VM's own heap).
func usedMemory(t testing.TB, c redis.UniversalClient) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	_, rest, _ := strings.Cut(info, "used_memory:")
	n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]), 10, 64)
	require.NoError(t, err)
	return n
}

// A realistic observation of a present file: the local provider's version
// (dev:ino:size:mtime_ns:ctime_ns) and XXH3-128 hash in hex.
const (
	memVersion = fs.Version("2049:12345678:4096:1767323045123456789:1767323045123456789")
	memHash    = fs.Hash("0123456789abcdef0123456789abcdef")
)

// pathOf is the i-th real path of n bytes (n >= 32).
func pathOf(i, n int) fs.TargetKey {
	name := fmt.Sprintf("/f%09d.txt", i)
	return fs.TargetKey("/" + strings.Repeat("d", n-len(name)-1) + name)
}

// measureObservations is used_memory's growth per observation when
// sessions sessions (ids of idLen characters) each record paths
// observations of paths of pathLen bytes, present or absent, on a fresh
// redis-server: everything the store keeps included.
func measureObservations(t *testing.T, sessions, paths, pathLen, idLen int, present bool) float64 {
	t.Helper()
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr, Config{})
	require.NoError(t, s.Touch("warm-up")) // loads the script
	_, err := s.Forget("warm-up")
	require.NoError(t, err)
	before := usedMemory(t, s.client)
	for i := range sessions {
		id := fmt.Sprintf("%0*d", idLen, i)
		for k := range paths {
			key := pathOf(i*paths+k, pathLen)
			if present {
				require.NoError(t, s.ObservePresent(id, key, memVersion, memHash))
			} else {
				require.NoError(t, s.ObserveAbsent(id, key))
			}
		}
	}
	got, observations := s.Stats()
	require.Equal(t, sessions, got)
	require.Equal(t, sessions*paths, observations)
	return float64(usedMemory(t, s.client)-before) / float64(sessions*paths)
}

// TestRedisBytesPerObservation: an observation costs Redis the same few
// hundred bytes whatever the length of its path, since it is keyed by a
// fixed-size digest of the target (docs/deployment.md, "How much memory").
// Sessions of 1,000 paths keep their hash and sorted set in Redis's
// general encodings (past 128 entries), the costliest per entry.
func TestRedisBytesPerObservation(t *testing.T) {
	if !redistest.Available() {
		t.Skip(redistest.MissingReason)
	}
	const sessions, paths, idLen = 4, 1000, 36
	for _, present := range []bool{false, true} {
		kind := map[bool]string{false: "absent", true: "present"}[present]
		short := measureObservations(t, sessions, paths, 32, idLen, present)
		long := measureObservations(t, sessions, paths, 3800, idLen, present)
		t.Logf("%s: %.1f bytes per observation with 32-byte paths, %.1f with 3,800-byte paths", kind, short, long)
		assert.InDelta(t, short, long, 2, "%s: the path's length must not matter", kind)
		assert.Less(t, long, 320.0, kind)
	}
}
