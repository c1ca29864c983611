package fs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// recordingKeeper is a Keeper that remembers what it was told.
type recordingKeeper struct {
	mu        sync.Mutex
	calls     []string
	replaced  Replaced
	content   string
	sum       [32]byte
	removed   bool // Prepare heard of no new content
	published *Published
	keepErr   error
}

func (k *recordingKeeper) Keep(ctx context.Context, r Replaced) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "keep")
	k.replaced = r
	if r.Content != nil {
		b, err := io.ReadAll(io.NewSectionReader(r.Content, 0, r.Size))
		if err != nil {
			return err
		}
		k.content = string(b)
	}
	return k.keepErr
}

func (k *recordingKeeper) Prepare(ctx context.Context, sum *[32]byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "prepare")
	k.removed = sum == nil
	if sum != nil {
		k.sum = *sum
	}
	return nil
}

func (k *recordingKeeper) Done(p *Published) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, fmt.Sprintf("done(%v)", p != nil))
	k.published = p
}

// A write and an edit hand their Keeper the file they replace, the new
// content's SHA-256 before publishing, and what they published.
func TestKeeperSeesWhatIsReplaced(t *testing.T) {
	f := newFixture(t, "a.txt = one\ntwo\n", "sub/l => ../a.txt")
	ctx := context.Background()

	k := &recordingKeeper{}
	out, err := f.l.WriteText(ctx, f.resolve(t, "write", "sub/l"), "three\n", &WriteIntent{Keeper: k})
	require.NoError(t, err)
	assert.Equal(t, []string{"keep", "prepare", "done(true)"}, k.calls)
	assert.Equal(t, "a.txt", k.replaced.Path, "the real path, through the link")
	assert.True(t, k.replaced.Exists)
	assert.Equal(t, "one\ntwo\n", k.content)
	assert.Equal(t, sha256.Sum256([]byte("three\n")), k.sum)
	assert.Equal(t, out.Version, k.published.Version)
	assert.Equal(t, "one\ntwo\n", *k.published.Before)
	assert.Equal(t, "three\n", *k.published.After)

	k = &recordingKeeper{}
	_, err = f.l.WriteText(ctx, f.resolve(t, "write", "new/b.txt"), "b\r\n", &WriteIntent{Kind: CreateIfAbsent, Keeper: k})
	require.NoError(t, err)
	assert.Equal(t, []string{"keep", "prepare", "done(true)"}, k.calls)
	assert.Equal(t, Replaced{Path: "new/b.txt"}, k.replaced, "a create replaces nothing")
	assert.Equal(t, "", *k.published.Before)
	assert.Equal(t, "b\n", *k.published.After)

	for _, tc := range []struct {
		name string
		req  EditRequest
	}{ // in order: the batch edits what the single edit left
		{"single", EditRequest{OldString: "three", NewString: "four"}},
		{"batch", EditRequest{Batch: []Edit{{OldString: "four", NewString: "five"}, {OldString: "five", NewString: "six"}}}},
	} {
		name, req := tc.name, tc.req
		k = &recordingKeeper{}
		before := f.read(t, "a.txt")
		req.Keeper = k
		out, err := f.l.EditText(ctx, f.resolve(t, "edit", "a.txt"), req, nil)
		require.NoError(t, err, name)
		assert.Equal(t, []string{"keep", "prepare", "done(true)"}, k.calls, name)
		assert.Equal(t, before, k.content, name)
		assert.Equal(t, sha256.Sum256([]byte(f.read(t, "a.txt"))), k.sum, name)
		assert.Equal(t, out.Version, k.published.Version, name)
	}

	k = &recordingKeeper{}
	_, err = f.l.EditText(ctx, f.resolve(t, "edit", "a.txt"), EditRequest{OldString: "six", NewString: "7", DryRun: true, Keeper: k}, nil)
	require.NoError(t, err)
	_, err = f.l.WriteText(ctx, f.resolve(t, "write", "a.txt"), "x", &WriteIntent{DryRun: true, Keeper: k})
	require.NoError(t, err)
	assert.Empty(t, k.calls, "a dry run keeps nothing")
	f.assertClean(t)
}

// An upload and a delete hand their Keeper what they replace too, under
// the target's lock: the file with its mode, the new content's SHA-256
// (none for a delete), and what they published; a Keeper's refusal
// changes nothing.
func TestFilesKeeper(t *testing.T) {
	f := newFixture(t, "a.txt = one\n")
	require.NoError(t, os.Chmod(f.path("a.txt"), 0o640))
	ctx := context.Background()
	a := f.resolve(t, "upload", "a.txt")

	k := &recordingKeeper{}
	out, err := f.l.PutFile(ctx, a, strings.NewReader("two\n"), PutOptions{IfMatch: f.version(t, a), MaxBytes: 100, Keeper: k})
	require.NoError(t, err)
	assert.Equal(t, []string{"keep", "prepare", "done(true)"}, k.calls)
	assert.Equal(t, "a.txt", k.replaced.Path)
	assert.True(t, k.replaced.Exists)
	assert.Equal(t, uint32(0o640), k.replaced.Mode)
	assert.Equal(t, "one\n", k.content)
	assert.Equal(t, sha256.Sum256([]byte("two\n")), k.sum)
	assert.Equal(t, out.Version, k.published.Version)

	k = &recordingKeeper{}
	_, err = f.l.PutFile(ctx, f.resolve(t, "upload", "new/b.txt"), strings.NewReader("b"), PutOptions{MaxBytes: 100, Keeper: k})
	require.NoError(t, err)
	assert.Equal(t, []string{"keep", "prepare", "done(true)"}, k.calls)
	assert.Equal(t, Replaced{Path: "new/b.txt"}, k.replaced, "a create replaces nothing")

	k = &recordingKeeper{keepErr: errors.New("disk full")}
	err = f.l.DeleteFile(ctx, a, f.version(t, a), k)
	requireCode(t, err, fault.CodeIO, `cannot delete "`+a.Display+`": the server cannot keep a checkpoint of the file`)
	assert.Equal(t, []string{"keep", "done(false)"}, k.calls)
	assert.Equal(t, "two\n", f.read(t, "a.txt"), "nothing removed")

	k = &recordingKeeper{}
	require.NoError(t, f.l.DeleteFile(ctx, a, f.version(t, a), k))
	assert.Equal(t, []string{"keep", "prepare", "done(true)"}, k.calls)
	assert.True(t, k.removed, "a delete has no new content")
	assert.Equal(t, "two\n", k.content)
	assert.Equal(t, uint32(0o640), k.replaced.Mode)
	assert.Equal(t, Version(""), k.published.Version)
	assert.NoFileExists(t, f.path("a.txt"))
	f.assertClean(t)
}

// A Keeper's refusal fails the mutation with nothing published; a
// mutation refused after Keep tells its Keeper Done(nil); an edit that
// fails its match never calls Keep.
func TestKeeperFailures(t *testing.T) {
	f := newFixture(t, "a.txt = one\n")
	ctx := context.Background()
	tg := f.resolve(t, "write", "a.txt")

	k := &recordingKeeper{keepErr: errors.New("disk full")}
	_, err := f.l.WriteText(ctx, tg, "two\n", &WriteIntent{Keeper: k})
	requireCode(t, err, fault.CodeIO, `cannot write "`+tg.Display+`": the server cannot keep a checkpoint of the file`)
	assert.Equal(t, []string{"keep", "done(false)"}, k.calls)
	assert.Equal(t, "one\n", f.read(t, "a.txt"))

	// A writer outside our locks replaces the file after the Keeper kept it.
	k = &recordingKeeper{}
	f.l.hooks.beforePublish = func() { require.NoError(t, os.WriteFile(f.path("a.txt"), []byte("person\n"), 0o644)) }
	_, err = f.l.WriteText(ctx, tg, "two\n", &WriteIntent{Keeper: k})
	f.l.hooks.beforePublish = nil
	requireCode(t, err, fault.CodeStaleVersion, "")
	assert.Equal(t, []string{"keep", "prepare", "done(false)"}, k.calls, "even an unconditional write publishes only over what was kept")
	assert.Equal(t, "person\n", f.read(t, "a.txt"))

	k = &recordingKeeper{}
	_, err = f.l.EditText(ctx, tg, EditRequest{OldString: "absent", NewString: "x", Keeper: k}, nil)
	requireCode(t, err, fault.CodeEditNotFound, "")
	assert.Empty(t, k.calls)
	f.assertClean(t)
}

// LockTargets holds every target's lock: single writes wait for it, two
// overlapping sets and single writes in any order never deadlock, and the
// verbs publish only over the version checked.
func TestLockTargets(t *testing.T) {
	f := newFixture(t, "a.txt = a", "b.txt = b", "c.txt = c")
	ctx := context.Background()
	a, b, c := f.resolve(t, "write", "a.txt"), f.resolve(t, "write", "b.txt"), f.resolve(t, "write", "c.txt")

	lk, err := f.l.LockTargets(ctx, []Target{b, a, b})
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = f.l.WriteText(short, a, "x", nil)
	cancel()
	requireCode(t, err, fault.CodeAborted, "")
	_, _, err = lk.Open(ctx, c)
	require.Error(t, err, "c is not locked")

	r, info, err := lk.Open(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, "a", readAll(t, r))
	pf, err := lk.Stage(ctx, a, 0, func(w io.Writer) error { _, err := io.WriteString(w, "restored"); return err })
	require.NoError(t, err)
	v, h, err := pf.Publish(info.Version)
	require.NoError(t, err)
	assert.Equal(t, "restored", f.read(t, "a.txt"))
	assert.Equal(t, HashString("restored"), h)
	assert.Equal(t, v, f.version(t, a))

	// Stale: a person's write between the check and the publication.
	pf, err = lk.Stage(ctx, a, 0, func(w io.Writer) error { _, err := io.WriteString(w, "again"); return err })
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f.path("a.txt"), []byte("person"), 0o644))
	_, _, err = pf.Publish(v)
	requireCode(t, err, fault.CodeStaleVersion, `cannot revert "`+a.Display+`": file changed since it was checked`)
	assert.Equal(t, "person", f.read(t, "a.txt"))

	require.NoError(t, lk.Remove(ctx, b, f.version(t, b)))
	assert.NoFileExists(t, f.path("b.txt"))
	require.NoError(t, lk.Remove(ctx, b, ""), "absent as expected")
	pf, err = lk.Stage(ctx, b, 0, func(w io.Writer) error { _, err := io.WriteString(w, "b again"); return err })
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f.path("b.txt"), []byte("appeared"), 0o644))
	_, _, err = pf.Publish("")
	requireCode(t, err, fault.CodeStaleVersion, "")
	assert.Equal(t, "appeared", f.read(t, "b.txt"), "a create never replaces")
	requireCode(t, lk.Remove(ctx, b, "1:2:3:4:5"), fault.CodeStaleVersion, "")
	lk.Unlock()
	lk.Unlock()

	// Overlapping sets and single writes, all at once.
	var wg sync.WaitGroup
	sets := [][]Target{{a, b}, {b, c}, {c, a}, {a, b, c}}
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 20 {
				lk, err := f.l.LockTargets(ctx, sets[i%len(sets)])
				if assert.NoError(t, err) {
					lk.Unlock()
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				_, err := f.l.WriteText(ctx, []Target{a, b, c}[i%3], "w", nil)
				assert.NoError(t, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock")
	}
	f.assertClean(t)
}

// A private sub-folder is checked like the private folder's own parts and
// never made without create.
func TestPrivateFolderParts(t *testing.T) {
	f := newFixture(t)
	d, err := f.l.PrivateFolder("checkpoints", false)
	require.NoError(t, err)
	assert.Nil(t, d, "nothing made without create")
	assert.NoDirExists(t, f.path(PrivateDir))
	for _, bad := range []string{"locks", "tmp", "..", "a/b", ""} {
		_, err := f.l.PrivateFolder(bad, true)
		assert.Error(t, err, bad)
	}
	d, err = f.l.PrivateFolder("checkpoints", true)
	require.NoError(t, err)
	defer d.Close()
	fi, err := os.Lstat(f.path(PrivateDir + "/checkpoints"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	require.NoError(t, os.Symlink(f.out, f.path(PrivateDir+"/checkpoints/blobs")))
	_, err = d.Folder("blobs", true)
	require.ErrorContains(t, err, "is refused: .toolfs-api/checkpoints/blobs is not a folder (a symlink or a file)")
	require.NoError(t, os.Mkdir(f.path(PrivateDir+"/checkpoints/open"), 0o777))
	require.NoError(t, os.Chmod(f.path(PrivateDir+"/checkpoints/open"), 0o777))
	_, err = d.Folder("open", false)
	require.ErrorContains(t, err, "is writable by others")

	unlock, err := d.Lock(context.Background(), "x.lock", true)
	require.NoError(t, err)
	unlock2, err := d.Lock(context.Background(), "x.lock", true)
	require.NoError(t, err, "two shared holders")
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	_, err = d.Lock(short, "x.lock", false)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	unlock()
	unlock2()
	unlock, err = d.Lock(context.Background(), "x.lock", false)
	require.NoError(t, err)
	unlock()
	entries, err := os.ReadDir(f.out)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

// preparedKeeper tells of its Prepare on a channel, and fails it with
// err when set.
type preparedKeeper struct {
	recordingKeeper
	prepared chan struct{}
	err      error
}

func (k *preparedKeeper) Prepare(ctx context.Context, sum *[32]byte) error {
	_ = k.recordingKeeper.Prepare(ctx, sum)
	close(k.prepared)
	return k.err
}

// A write's and an edit's Keeper prepares while the staged content is
// still syncing (its journal entry's sync starts beside it,
// docs/journal.md), and the content is published only after that sync; a
// Prepare that fails leaves nothing published and nothing staged.
func TestKeeperPreparesBesideTheStagedSync(t *testing.T) {
	calls := map[string]func(f *fixture, k Keeper) error{
		"write": func(f *fixture, k Keeper) error {
			_, err := f.l.WriteText(context.Background(), f.resolve(t, "write", "a.txt"), "new\n", &WriteIntent{Keeper: k})
			return err
		},
		"edit": func(f *fixture, k Keeper) error {
			_, err := f.l.EditText(context.Background(), f.resolve(t, "edit", "a.txt"), EditRequest{OldString: "old", NewString: "new", Keeper: k}, nil)
			return err
		},
		"batch": func(f *fixture, k Keeper) error {
			_, err := f.l.EditText(context.Background(), f.resolve(t, "edit", "a.txt"), EditRequest{Batch: []Edit{{OldString: "old", NewString: "new"}}, Keeper: k}, nil)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "a.txt = old\n")
			k := &preparedKeeper{prepared: make(chan struct{})}
			var beside atomic.Bool
			f.l.hooks.stagedSync = func() {
				select {
				case <-k.prepared:
					beside.Store(true)
				case <-time.After(5 * time.Second):
				}
			}
			f.l.hooks.beforeRename = func() { assert.True(t, beside.Load(), "published before the staged sync returned") }
			require.NoError(t, call(f, k))
			assert.True(t, beside.Load(), "Prepare was not called while the staged content synced")
			assert.Equal(t, "new\n", f.read(t, "a.txt"))
			f.assertClean(t)

			f = newFixture(t, "a.txt = old\n")
			k = &preparedKeeper{prepared: make(chan struct{}), err: errors.New("no room")}
			f.l.hooks.stagedSync = func() {
				select {
				case <-k.prepared:
				case <-time.After(5 * time.Second):
				}
			}
			require.Error(t, call(f, k))
			assert.Equal(t, "old\n", f.read(t, "a.txt"))
			assert.Equal(t, "done(false)", k.calls[len(k.calls)-1])
			f.assertClean(t)
		})
	}
}
