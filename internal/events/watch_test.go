package events

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// watched is a real root with a Watcher publishing into a hub, and one
// subscription reading the hub directly.
type watched struct {
	t    *testing.T
	root string
	hub  *Hub
	w    *Watcher
	sub  *Subscription
	log  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const quiet = 50 * time.Millisecond

func watch(t *testing.T, root string, cfg WatchConfig) *watched {
	t.Helper()
	if root == "" {
		root = t.TempDir()
	}
	// Room for every event of the overflow test in the test's own queue.
	hub := NewHub(Config{QueueEvents: 1 << 16, QueueBytes: 64 << 20})
	logs := &syncBuffer{}
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() }) // after the watcher's Close
	cfg.Workspace = local
	cfg.Quiet = quiet
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	w, err := NewWatcher(hub, cfg)
	require.NoError(t, err)
	sub, err := hub.Subscribe(Filter{}, "")
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close(); w.Close(); hub.Close() })
	real, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	return &watched{t: t, root: real, hub: hub, w: w, sub: sub, log: logs}
}

func (x *watched) path(rel string) string { return filepath.Join(x.root, rel) }

// settle returns the events published within d, as "type path" strings.
func (x *watched) settle(d time.Duration) []string {
	x.t.Helper()
	var out []string
	deadline := time.After(d)
	for {
		select {
		case r := <-x.sub.queue:
			x.sub.taken(r)
			out = append(out, strings.TrimSpace(string(r.typ)+" "+r.path))
		case <-deadline:
			return out
		}
	}
}

// expect waits until the events published so far are exactly want (in
// order), then checks that nothing more arrives.
func (x *watched) expect(want ...string) {
	x.t.Helper()
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		got = append(got, x.settle(quiet)...)
	}
	got = append(got, x.settle(6*quiet)...) // nothing more, not twice
	assert.Equal(x.t, want, got)
}

// expectEither is expect with two acceptable outcomes: the first is what a
// quiet machine gives, the second what one that stalled the test between
// two steps for longer than the quiet window gives.
func (x *watched) expectEither(quick, split []string) {
	x.t.Helper()
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(quick) && time.Now().Before(deadline) {
		got = append(got, x.settle(quiet)...)
	}
	got = append(got, x.settle(6*quiet)...)
	if !slices.Equal(got, quick) {
		assert.Equal(x.t, split, got)
		x.t.Logf("split outcome %v (the machine stalled the test)", got)
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func TestExternalChangesAppearOnce(t *testing.T) {
	x := watch(t, "", WatchConfig{})
	write(t, x.path("a.txt"), "one\n")
	x.expect("created a.txt")

	f, err := os.OpenFile(x.path("a.txt"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err = f.WriteString("more\n")
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	x.expect("modified a.txt")

	require.NoError(t, os.Rename(x.path("a.txt"), x.path("b.txt")))
	x.expect("renamed a.txt", "created b.txt")

	require.NoError(t, os.Remove(x.path("b.txt")))
	x.expect("removed b.txt")

	// touch and chmod change no content.
	write(t, x.path("c.txt"), "c")
	x.expect("created c.txt")
	require.NoError(t, os.Chmod(x.path("c.txt"), 0o600))
	now := time.Now()
	require.NoError(t, os.Chtimes(x.path("c.txt"), now, now))
	x.expect()

	// An editor's safe save (write a copy, rename it over the file): the
	// copy came and went, the file is created anew.
	write(t, x.path("c.txt.swp"), "new c")
	require.NoError(t, os.Rename(x.path("c.txt.swp"), x.path("c.txt")))
	x.expect("created c.txt")

	// Removed and made again at once (within one quiet window): modified.
	require.NoError(t, os.Remove(x.path("c.txt")))
	write(t, x.path("c.txt"), "again")
	x.expectEither([]string{"modified c.txt"}, []string{"removed c.txt", "created c.txt"})
}

func TestNewFoldersAreWatched(t *testing.T) {
	x := watch(t, "", WatchConfig{})
	require.NoError(t, os.MkdirAll(x.path("a/b/c"), 0o755))
	write(t, x.path("a/b/c/early.txt"), "made before the watch could be")
	x.expect("created a", "created a/b", "created a/b/c", "created a/b/c/early.txt")

	write(t, x.path("a/b/c/late.txt"), "x")
	x.expect("created a/b/c/late.txt")

	// A folder moved within the root: its old watches go, its new place is
	// watched.
	require.NoError(t, os.Rename(x.path("a/b"), x.path("moved")))
	got := x.settle(6 * quiet)
	assert.Equal(t, "renamed a/b", got[0])
	assert.ElementsMatch(t, []string{"created moved", "created moved/c", "created moved/c/early.txt", "created moved/c/late.txt"}, got[1:])
	write(t, x.path("moved/c/late.txt"), "y")
	x.expect("modified moved/c/late.txt")
	assert.NotContains(t, x.w.snapshotDirs(), "a/b/c")
}

func TestNothingOutsideTheRootIsReported(t *testing.T) {
	outside := t.TempDir()
	root := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "early-link")))
	x := watch(t, root, WatchConfig{})

	require.NoError(t, os.Symlink(outside, x.path("late-link")))
	x.expect("created late-link")

	write(t, filepath.Join(outside, "secret.txt"), "s")
	require.NoError(t, os.Mkdir(filepath.Join(outside, "sub"), 0o755))
	write(t, filepath.Join(outside, "sub", "deeper.txt"), "d")
	write(t, filepath.Join(outside, "secret.txt"), "changed")
	x.expect()

	// A folder moved out of the root takes its watches with it: changes in
	// it are no longer about the root.
	require.NoError(t, os.MkdirAll(x.path("leaving/inner"), 0o755))
	x.expect("created leaving", "created leaving/inner")
	require.NoError(t, os.Rename(x.path("leaving"), filepath.Join(outside, "left")))
	x.expect("renamed leaving")
	write(t, filepath.Join(outside, "left", "x.txt"), "x")
	write(t, filepath.Join(outside, "left", "inner", "y.txt"), "y")
	x.expect()

	// A folder swapped for a link to the outside is not followed.
	require.NoError(t, os.Mkdir(x.path("swap"), 0o755))
	x.expect("created swap")
	require.NoError(t, os.Remove(x.path("swap")))
	require.NoError(t, os.Symlink(outside, x.path("swap")))
	// Removed, then made again as a link: one "modified" when both fall in
	// one quiet window, else both (a loaded machine).
	x.expectEither([]string{"modified swap"}, []string{"removed swap", "created swap"})
	write(t, filepath.Join(outside, "after-swap.txt"), "z")
	x.expect()
	for _, d := range x.w.snapshotDirs() {
		assert.False(t, strings.Contains(d, "link") || strings.HasPrefix(d, "swap") || strings.HasPrefix(d, "leaving"), d)
	}
}

func TestPrivateFolderAndTempFilesAreIgnored(t *testing.T) {
	x := watch(t, "", WatchConfig{})
	require.NoError(t, os.MkdirAll(x.path(fs.PrivateDir+"/locks"), 0o700))
	write(t, x.path(fs.PrivateDir+"/locks/l1"), "")
	write(t, x.path(".a.txt.toolfs-123abc.tmp"), "staged")
	require.NoError(t, os.Rename(x.path(".a.txt.toolfs-123abc.tmp"), x.path("a.txt")))
	x.expect("created a.txt")
	require.NoError(t, os.MkdirAll(x.path("d"), 0o755))
	x.expect("created d")
	write(t, x.path("d/.b.toolfs-9.tmp"), "staged")
	x.expect()
}

// A write through the provider is reported once, by its mutation event; a
// change made afterwards outside the API is reported as usual.
// watchProvider is a watched real root whose versions come from a local
// provider on it, as the server wires them, and that provider.
func watchProvider(t *testing.T) (*fs.Local, *watched) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	local, err := fs.NewLocal(root, fs.LocalOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	version := func(rel string) (string, bool) {
		ctx := context.Background()
		tg, err := local.Resolve(ctx, "read", rel, "")
		if err != nil {
			return "", false
		}
		info, err := local.Stat(ctx, tg)
		return string(info.Version), err == nil && info.Type == fs.TypeFile
	}
	return local, watch(t, root, WatchConfig{Version: version})
}

func TestOwnWritesAreNotReportedTwice(t *testing.T) {
	local, x := watchProvider(t)
	ctx := context.Background()

	// As the tools do (internal/server), a mutation is announced before it
	// runs, so its inotify echo waits for its event however late the event
	// comes on a loaded machine.
	mutate := func(rel, content string) {
		x.hub.Expect(rel)
		tg, err := local.Resolve(ctx, "write", rel, "")
		require.NoError(t, err)
		out, err := local.WriteText(ctx, tg, content, nil)
		require.NoError(t, err)
		x.hub.Publish(Event{Type: TypeWrite, Path: rel, Session: "s", Version: string(out.Version)})
	}
	mutate("a.txt", "one\n")
	x.expect("write a.txt")
	mutate("a.txt", "two\n")
	x.expect("write a.txt")
	mutate("new/dir/b.txt", "b\n") // the folders it made are news, gathered when they are
	var got []string
	for deadline := time.Now().Add(5 * time.Second); len(got) < 3 && time.Now().Before(deadline); {
		got = append(got, x.settle(quiet)...)
	}
	got = append(got, x.settle(6*quiet)...) // nothing more, not twice
	assert.ElementsMatch(t, []string{"write new/dir/b.txt", "created new", "created new/dir"}, got)
	assert.Less(t, slices.Index(got, "created new"), slices.Index(got, "created new/dir"))

	// The next write replaces the file but publishes its event late (a busy
	// call): the watcher waits for it rather than report the file changed.
	x.hub.Expect("a.txt")
	tg, err := local.Resolve(ctx, "write", "a.txt", "")
	require.NoError(t, err)
	out, err := local.WriteText(ctx, tg, "late\n", nil)
	require.NoError(t, err)
	time.Sleep(quiet * 3 / 2)
	x.hub.Publish(Event{Type: TypeWrite, Path: "a.txt", Session: "s", Version: string(out.Version)})
	x.expect("write a.txt")

	write(t, x.path("a.txt"), "three\n")
	x.expect("modified a.txt")
}

// A first write of a file, announced before it runs (Hub.Expect) but whose
// event lags its rename by more than the echo retries (a loaded machine):
// the watcher holds the inotify echo back until the event comes, so the
// file is reported once, as a write, never also as created.
func TestAnnouncedWriteIsNotReportedAsExternal(t *testing.T) {
	local, x := watchProvider(t)
	ctx := context.Background()

	x.hub.Expect("b.txt")
	tg, err := local.Resolve(ctx, "write", "b.txt", "")
	require.NoError(t, err)
	out, err := local.WriteText(ctx, tg, "b\n", nil)
	require.NoError(t, err)
	time.Sleep((maxEchoRetries + 3) * quiet) // past the retries of an unannounced echo
	x.hub.Publish(Event{Type: TypeWrite, Path: "b.txt", Session: "s", Version: string(out.Version)})
	x.expect("write b.txt")

	// Without the announcement the same lag is reported as external: the
	// event is published once the change has been (however long the
	// watcher took), so the order is certain.
	tg, err = local.Resolve(ctx, "write", "c.txt", "")
	require.NoError(t, err)
	out, err = local.WriteText(ctx, tg, "c\n", nil)
	require.NoError(t, err)
	x.expect("created c.txt")
	x.hub.Publish(Event{Type: TypeWrite, Path: "c.txt", Session: "s", Version: string(out.Version)})
	x.expect("write c.txt")
}

func TestOverflowIsReportedAndMissedFoldersWatched(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	x := watch(t, "", WatchConfig{Metrics: m})
	release := make(chan struct{})
	x.w.pauseForTest <- release
	// The kernel queues 16384 events by default (fs.inotify.max_queued_events)
	// and the watcher's reader holds one 64 KiB buffer more (about 2000);
	// 15000 created files make 30000 while nobody reads.
	for i := 0; i < 15000; i++ {
		write(t, x.path(fmt.Sprintf("f%d", i)), "x")
	}
	// Its creation is lost with the overflow: only the rescan finds it.
	require.NoError(t, os.Mkdir(x.path("made-during-overflow"), 0o755))
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	overflowed := false
	for !overflowed && time.Now().Before(deadline) {
		for _, e := range x.settle(100 * time.Millisecond) {
			overflowed = overflowed || e == "overflow"
		}
	}
	require.True(t, overflowed, "an overflow event")
	assert.Equal(t, 1.0, value(m.overflows))
	x.settle(300 * time.Millisecond)
	write(t, x.path("made-during-overflow/after.txt"), "a")
	x.expect("created made-during-overflow/after.txt")
}

func TestWatchBound(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "b", "c", "d"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, d), 0o755))
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	x := watch(t, root, WatchConfig{MaxWatches: 3, Metrics: m}) // the root and two folders
	assert.Len(t, x.w.snapshotDirs(), 3)
	assert.Equal(t, 3.0, value(m.watches))
	assert.Equal(t, 2.0, value(m.watchLimit))
	assert.Equal(t, 1, strings.Count(x.log.String(), "events: watch limit reached"), x.log.String())
	assert.Contains(t, x.log.String(), "limit=3")

	for _, d := range []string{"a", "b", "c", "d"} {
		write(t, x.path(d+"/f.txt"), "x")
	}
	got := x.settle(6 * quiet)
	assert.Len(t, got, 2, "only the watched folders report: %v", got)
}

// snapshotDirs lists the watched folders; only safe while the watcher is
// idle.
func (w *Watcher) snapshotDirs() []string {
	release := make(chan struct{})
	w.pauseForTest <- release
	defer close(release)
	var out []string
	for d := range w.dirs {
		out = append(out, d)
	}
	return out
}

// merge is what two changes of one path within a quiet window amount to.
func TestMerge(t *testing.T) {
	for _, c := range []struct{ prev, next, want Type }{
		{TypeCreated, TypeModified, TypeCreated},
		{TypeCreated, TypeRemoved, ""},
		{TypeCreated, TypeRenamed, ""},
		{TypeModified, TypeModified, TypeModified},
		{TypeModified, TypeRemoved, TypeRemoved},
		{TypeModified, TypeRenamed, TypeRenamed},
		{TypeModified, TypeCreated, TypeModified},
		{TypeRemoved, TypeCreated, TypeModified},
		{TypeRenamed, TypeCreated, TypeModified},
		{TypeRemoved, TypeModified, TypeModified},
		{"", TypeCreated, TypeCreated},
		{"", TypeRemoved, TypeRemoved},
	} {
		assert.Equal(t, c.want, merge(c.prev, c.next), "%q then %q", c.prev, c.next)
	}
}

// pause holds the watcher between two events until the returned release is
// called; the kernel queues what happens meanwhile.
func (x *watched) pause() (release func()) {
	r := make(chan struct{})
	x.w.pauseForTest <- r
	return func() { close(r) }
}

// A parent folder swapped for a link to the outside while events about it
// are queued reports nothing from outside the root (docs/events.md): a/b0
// is made while the watcher is held, then a is renamed (within the root, or
// out of it) and a symlink a -> outside takes its place. b0 was in the root
// all along: it is reported at a's new place when that is in the root.
func TestParentSwappedForALinkReportsNothingOutside(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "b0", "deeper"), 0o755))
	write(t, filepath.Join(outside, "b0", "SECRET.txt"), "s")
	x := watch(t, "", WatchConfig{})

	for _, c := range []struct {
		name string
		to   string
		want []string // besides a's own event
	}{
		{"within", x.path("away"), []string{"created away", "created away/b0", "created away/b0/f.txt"}},
		{"out", filepath.Join(base, "gone"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.Mkdir(x.path("a"), 0o755))
			x.expect("created a")
			release := x.pause()
			require.NoError(t, os.Mkdir(x.path("a/b0"), 0o755))
			write(t, x.path("a/b0/f.txt"), "in the root")
			require.NoError(t, os.Rename(x.path("a"), c.to))
			require.NoError(t, os.Symlink(outside, x.path("a")))
			release()
			var got []string
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
				got = append(got, x.settle(quiet)...)
				if slices.ContainsFunc(got, func(e string) bool { return strings.HasSuffix(e, " a") }) && !slices.ContainsFunc(c.want, func(w string) bool { return !slices.Contains(got, w) }) {
					break
				}
			}
			got = append(got, x.settle(6*quiet)...)
			for _, e := range got {
				assert.NotContains(t, e, "SECRET", "a name from outside the root")
				assert.NotContains(t, e, "deeper", "a name from outside the root")
			}
			// a renamed, then made again (the link): one "modified" when
			// both fall in one quiet window, else both (a loaded machine).
			mine := slices.DeleteFunc(slices.Clone(got), func(e string) bool { return !strings.HasSuffix(e, " a") })
			if !slices.Equal(mine, []string{"modified a"}) {
				assert.Equal(t, []string{"renamed a", "created a"}, mine)
			}
			assert.Subset(t, got, c.want)
			assert.Len(t, got, len(mine)+len(c.want), "%v", got)
			for _, d := range x.w.snapshotDirs() {
				assert.False(t, d == "a" || strings.HasPrefix(d, "a/"), "watching %s", d)
			}
			require.NoError(t, os.Remove(x.path("a")))
			require.NoError(t, os.RemoveAll(c.to))
			x.settle(4 * quiet)
		})
	}
}

// A watched folder deeper down whose parent is swapped: its queued events
// are about a folder no longer at its path, and are dropped, not reported
// under the link.
func TestQueuedEventsOfAMovedFolderAreDropped(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "b"), 0o755))
	x := watch(t, "", WatchConfig{})
	require.NoError(t, os.MkdirAll(x.path("a/b"), 0o755))
	x.expect("created a", "created a/b")

	release := x.pause()
	require.NoError(t, os.Rename(x.path("a"), filepath.Join(base, "gone")))
	require.NoError(t, os.Symlink(outside, x.path("a")))
	write(t, filepath.Join(base, "gone", "b", "SECRET-moved-out.txt"), "s")
	write(t, filepath.Join(outside, "b", "SECRET-outside.txt"), "s")
	release()
	x.expectEither([]string{"modified a"}, []string{"renamed a", "created a"})
	for _, d := range x.w.snapshotDirs() {
		assert.False(t, d == "a" || strings.HasPrefix(d, "a/"), "watching %s", d)
	}
}

// A folder removed with its content before the watcher handled the
// removals inside it: its own removal is reported, the queued ones inside
// it are not (docs/events.md, "Folders moved, removed or swapped for a
// link"); nothing stays watched.
func TestRemovedTreeIsReportedByItsFolder(t *testing.T) {
	x := watch(t, "", WatchConfig{})
	require.NoError(t, os.MkdirAll(x.path("d/sub"), 0o755))
	write(t, x.path("d/sub/f.txt"), "f")
	write(t, x.path("d/g.txt"), "g")
	var got []string
	for deadline := time.Now().Add(5 * time.Second); len(got) < 4 && time.Now().Before(deadline); {
		got = append(got, x.settle(quiet)...)
	}
	assert.ElementsMatch(t, []string{"created d", "created d/sub", "created d/sub/f.txt", "created d/g.txt"}, got)

	release := x.pause()
	require.NoError(t, os.RemoveAll(x.path("d")))
	release()
	x.expect("removed d")
	assert.Equal(t, []string{""}, x.w.snapshotDirs())
}
