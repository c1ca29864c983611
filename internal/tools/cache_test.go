package tools_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// observations is a Gate that records every observation it is given.
type observations struct {
	policy.Gate
	mu  sync.Mutex
	log []string
}

func (o *observations) ObservePresent(s string, k fs.TargetKey, v fs.Version, h fs.Hash) error {
	o.mu.Lock()
	o.log = append(o.log, "present "+s+" "+string(k)+" "+string(v)+" hash "+string(h))
	o.mu.Unlock()
	return o.Gate.ObservePresent(s, k, v, h)
}

func (o *observations) ObserveAbsent(s string, k fs.TargetKey) error {
	o.mu.Lock()
	o.log = append(o.log, "absent "+s+" "+string(k))
	o.mu.Unlock()
	return o.Gate.ObserveAbsent(s, k)
}

// cachedExecutor is an executor over root with the given read caches.
func cachedExecutor(t testing.TB, root string, cache tools.CacheConfig) (*tools.Executor, *record, *observations) {
	t.Helper()
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	rec, obs := &record{}, &observations{Gate: policy.NewStore(policy.Config{})}
	return tools.New(tools.Options{FS: local, Gate: obs, Caps: render.DefaultCaps(), Observer: rec, Cache: cache}), rec, obs
}

func tempRoot(t testing.TB) string {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return root
}

// read returns a read's output, or its error's output.
func read(t *testing.T, x *tools.Executor, session, args string, stream bool) string {
	t.Helper()
	ctx := context.Background()
	rd, err := x.Read(ctx, tools.Call{Session: session, Transport: "rest"}, []byte(args))
	if err != nil {
		return tools.Output(err)
	}
	if stream {
		var s sink
		if _, err := rd.Stream(ctx, &s); err != nil {
			return tools.Output(err)
		}
		return s.b.String()
	}
	res, err := rd.Window(ctx)
	if err != nil {
		return tools.Output(err)
	}
	return res.Output()
}

// settle waits until files written now are outside a racy window of d.
func settle(d time.Duration) { time.Sleep(d + 20*time.Millisecond) }

const racy = 50 * time.Millisecond

// TestCacheNeverStale: every way a file changes is seen by the next read,
// though the version before it was cached (outside the racy window).
func TestCacheNeverStale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, p string)
		want   string
	}{
		{"same-size rewrite with the mtime restored", func(t *testing.T, p string) {
			st, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, []byte("ONE\nTWO\n"), 0o644))
			require.NoError(t, os.Chtimes(p, st.ModTime(), st.ModTime()))
		}, "1: ONE\n2: TWO"},
		{"rename over the file", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p+".new", []byte("uno\ndos\n"), 0o644))
			require.NoError(t, os.Rename(p+".new", p))
		}, "1: uno\n2: dos"},
		{"append", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("three\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "1: one\n2: two\n3: three"},
		{"in-place overwrite of one byte", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("O"), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "1: One\n2: two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tempRoot(t)
			x, rec, _ := cachedExecutor(t, root, tools.CacheConfig{Bytes: 1 << 20, RacyWindow: racy})
			p := filepath.Join(root, "a.txt")
			require.NoError(t, os.WriteFile(p, []byte("one\ntwo\n"), 0o644))
			settle(racy)
			for range 2 {
				assert.Contains(t, read(t, x, "s", `{"file_path":"a.txt"}`, false), "1: one\n2: two\n\n(End of file - total 2 lines)")
			}
			require.Equal(t, map[string]int{"window miss": 1, "window hit": 1}, rec.cache, "the second read was a hit")
			tc.change(t, p)
			for _, stream := range []bool{false, true} {
				assert.Contains(t, read(t, x, "s", `{"file_path":"a.txt"}`, stream), tc.want+"\n\n(End of file")
			}
		})
	}
}

// TestCacheRacyWindow: a file changed within the racy window is never
// cached, so a same-size rewrite within one timestamp tick, its mtime
// restored, is read as it is; once the window has passed, it is cached.
func TestCacheRacyWindow(t *testing.T) {
	root := tempRoot(t)
	x, rec, _ := cachedExecutor(t, root, tools.CacheConfig{Bytes: 1 << 20, RacyWindow: time.Hour})
	p := filepath.Join(root, "a.txt")
	require.NoError(t, os.WriteFile(p, []byte("aaaa\n"), 0o644))
	st, err := os.Stat(p)
	require.NoError(t, err)
	for i, content := range []string{"bbbb\n", "cccc\n", "dddd\n"} {
		got := read(t, x, "s", `{"file_path":"a.txt"}`, i%2 == 1)
		assert.Contains(t, got, "1: "+[]string{"aaaa", "bbbb", "cccc"}[i]+"\n")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		require.NoError(t, os.Chtimes(p, st.ModTime(), st.ModTime()))
	}
	assert.Contains(t, read(t, x, "s", `{"file_path":"a.txt"}`, false), "1: dddd\n")
	assert.Zero(t, x.CacheBytes(), "nothing cached inside the racy window")
	assert.Equal(t, map[string]int{"window miss": 4}, rec.cache)

	// The same file, once its change time is outside the window.
	y, rec2, _ := cachedExecutor(t, root, tools.CacheConfig{Bytes: 1 << 20, RacyWindow: racy})
	settle(racy)
	read(t, y, "s", `{"file_path":"a.txt"}`, false)
	assert.Positive(t, y.CacheBytes())
	assert.Contains(t, read(t, y, "s", `{"file_path":"a.txt"}`, false), "1: dddd\n")
	assert.Equal(t, map[string]int{"window miss": 1, "window hit": 1}, rec2.cache)
}

// TestCacheByteCap: the caches never hold more than their cap; the least
// recently used entry goes first.
func TestCacheByteCap(t *testing.T) {
	root := tempRoot(t)
	const limit = 8 << 10
	x, rec, _ := cachedExecutor(t, root, tools.CacheConfig{Bytes: limit, RacyWindow: racy})
	line := strings.Repeat("x", 99) + "\n" // each window below costs ~2.3 KiB
	for i := range 10 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)), []byte(strings.Repeat(line, 20)), 0o644))
	}
	settle(racy)
	for i := range 10 {
		read(t, x, "s", fmt.Sprintf(`{"file_path":"f%d.txt"}`, i), false)
		assert.LessOrEqual(t, x.CacheBytes(), int64(limit))
	}
	assert.Greater(t, x.CacheBytes(), int64(limit/2))
	read(t, x, "s", `{"file_path":"f9.txt"}`, false) // most recent: kept
	read(t, x, "s", `{"file_path":"f0.txt"}`, false) // first: evicted
	assert.Equal(t, map[string]int{"window miss": 11, "window hit": 1}, rec.cache)
}

// TestCacheOff: Bytes 0 turns the caches off: no lookup at all.
func TestCacheOff(t *testing.T) {
	root := tempRoot(t)
	x, rec, _ := cachedExecutor(t, root, tools.CacheConfig{Bytes: 0, RacyWindow: racy})
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644))
	settle(racy)
	for range 3 {
		assert.Contains(t, read(t, x, "s", `{"file_path":"a.txt"}`, false), "1: one\n")
	}
	assert.Nil(t, rec.cache)
	assert.Zero(t, x.CacheBytes())
}

// TestCacheMetricsAndObservationsUnchanged runs the same reads on an
// executor with caches and on one without: outputs, tool calls, footers,
// stat calls and the policy's observations are identical, and the cached
// one did hit.
func TestCacheMetricsAndObservationsUnchanged(t *testing.T) {
	root := tempRoot(t)
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "line %d %s\n", i+1, strings.Repeat("é", i%50))
	}
	big := strings.Repeat(b.String(), 12) // ~1.3 MiB: indexed
	files := map[string]string{"small.txt": "one\ntwo\nthree\n", "big.txt": big, "bin.dat": "a\x00b", "bad.txt": "a\xffb\n", "empty.txt": ""}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(root, "dir"), 0o755))
	settle(racy)
	reads := []string{
		`{"file_path":"small.txt"}`, `{"file_path":"small.txt","offset":2,"limit":1}`, `{"file_path":"small.txt","offset":9}`,
		`{"file_path":"big.txt"}`, `{"file_path":"big.txt","offset":30000,"limit":5}`, `{"file_path":"big.txt","offset":35999}`,
		`{"file_path":"big.txt","offset":36001}`, `{"file_path":"big.txt","offset":17000,"limit":2000}`,
		`{"file_path":"bin.dat"}`, `{"file_path":"bad.txt"}`, `{"file_path":"empty.txt"}`, `{"file_path":"missing.txt"}`, `{"file_path":"dir"}`,
	}
	on, recOn, obsOn := cachedExecutor(t, root, tools.CacheConfig{Bytes: 1 << 20, RacyWindow: racy})
	off, recOff, obsOff := cachedExecutor(t, root, tools.CacheConfig{})
	for round := range 3 {
		for i, args := range reads {
			stream := (i+round)%2 == 0
			want := read(t, off, "s", args, stream)
			assert.Equal(t, want, read(t, on, "s", args, stream), "round %d: %s", round, args)
		}
	}
	assert.Equal(t, recOff.calls, recOn.calls)
	assert.Equal(t, recOff.footers, recOn.footers)
	assert.Equal(t, recOff.stats, recOn.stats)
	assert.Equal(t, obsOff.log, obsOn.log)
	for _, o := range obsOn.log {
		if strings.HasPrefix(o, "present") {
			assert.NotRegexp(t, ` hash $`, o, "a read served from a cache records the hash of the version's bytes")
		}
	}
	assert.Nil(t, recOff.cache)
	assert.Equal(t, map[string]int{"window miss": 11 + 2*4, "window hit": 2 * 7, "index miss": 1, "index hit": 4 + 2}, recOn.cache,
		"11 reads find a file, 7 succeed and are hits in rounds 2 and 3; big.txt's first read builds its index, its 4 other reads use it, and so does its out-of-range read in rounds 2 and 3")
}

// TestCacheDeepWindow: in a large generated file, a window deep in the
// file read after a first read comes from the line index and equals the
// window read from the top.
func TestCacheDeepWindow(t *testing.T) {
	root := tempRoot(t)
	p := filepath.Join(root, "big.log")
	f, err := os.Create(p)
	require.NoError(t, err)
	w := make([]byte, 0, 1<<20)
	const lines = 1_000_000 // ~32 MB
	for i := range lines {
		w = fmt.Appendf(w, "%07d some log text, line %d\n", i+1, i+1)
		if len(w) > 1<<20-64 {
			_, err = f.Write(w)
			require.NoError(t, err)
			w = w[:0]
		}
	}
	_, err = f.Write(w)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	settle(racy)
	on, rec, _ := cachedExecutor(t, root, tools.CacheConfig{Bytes: 8 << 20, RacyWindow: racy})
	off, _, _ := cachedExecutor(t, root, tools.CacheConfig{})
	assert.Contains(t, read(t, on, "s", `{"file_path":"big.log","limit":1}`, false), "1: 0000001 some log text, line 1\n\n(Showing lines 1-1 of 1000000. Use offset=2 to continue.)")
	for _, offset := range []int{999_999, 1_000_000, 1, 500_000, 777_777} {
		args := fmt.Sprintf(`{"file_path":"big.log","offset":%d,"limit":3}`, offset)
		want := read(t, off, "s", args, false)
		require.Contains(t, want, fmt.Sprintf("%d: %07d some", offset, offset))
		assert.Equal(t, want, read(t, on, "s", args, offset%2 == 0))
	}
	assert.Equal(t, map[string]int{"window miss": 6, "index miss": 1, "index hit": 5}, rec.cache)
}

// TestCacheConcurrentWriters: readers racing writers never see an answer
// of another version: every window is one generation's, whole.
func TestCacheConcurrentWriters(t *testing.T) {
	root := tempRoot(t)
	x, rec, _ := cachedExecutor(t, root, tools.CacheConfig{Bytes: 1 << 20, RacyWindow: 5 * time.Millisecond})
	content := func(g int) string {
		return strings.Repeat(fmt.Sprintf("generation %04d\n", g), 10+g%3) // same size for most rewrites
	}
	p := filepath.Join(root, "a.txt")
	require.NoError(t, os.WriteFile(p, []byte(content(0)), 0o644))
	var gen atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	mtime := time.Now().Add(-time.Hour)
	go func() { // replaces it by rename (inode numbers get reused), the mtime always the same
		defer wg.Done()
		for g := 1; ctx.Err() == nil; g++ {
			os.WriteFile(p+".tmp", []byte(content(g)), 0o644)
			os.Chtimes(p+".tmp", mtime, mtime)
			os.Rename(p+".tmp", p)
			gen.Store(int64(g))
			time.Sleep(time.Duration(g%7) * time.Millisecond)
		}
	}()
	var reads atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				before := int(gen.Load())
				out := read(t, x, "s", `{"file_path":"a.txt"}`, reads.Load()%2 == 0)
				reads.Add(1)
				var g int
				_, err := fmt.Sscanf(out[strings.Index(out, "1: ")+3:], "generation %d", &g)
				if !assert.NoError(t, err, out) {
					return
				}
				assert.GreaterOrEqual(t, g, before-1, "an answer older than the file's version when the read began")
				n := 10 + g%3
				want := fmt.Sprintf("%d: generation %04d\n\n(End of file - total %d lines)", n, g, n)
				if !assert.Contains(t, out, want) || !assert.Equal(t, n, strings.Count(out, fmt.Sprintf("generation %04d", g))) {
					return
				}
			}
		}()
	}
	wg.Wait()
	assert.Greater(t, reads.Load(), int64(50))
	assert.Positive(t, rec.cache["window hit"], "some reads were served from the cache")
}
