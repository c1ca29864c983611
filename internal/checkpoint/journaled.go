package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"iter"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/toolfs/toolfs-api/internal/journal"
	"golang.org/x/sys/unix"
)

// With the workspace's journal (SPEC §28, docs/journal.md), a Recording
// writes its kept content and its log lines without a sync and puts the
// same bytes in the change's journal entry, which the executor commits,
// one fdatasync shared by concurrent changes, before the answer. The
// files are synced when the journal seals its segment; after a crash
// Options.Replay puts back what the files lost.

// JournalTo makes r write its records into e instead of syncing them; e
// must be committed before the change is answered. prepared, when not
// nil, is called once the change line is in e, before the content is
// published: a change with no later record may start the entry's commit
// there, so its sync runs beside the publication's (docs/journal.md).
func (r *Recording) JournalTo(e *journal.Entry, prepared func()) {
	r.entry, r.prepared = e, prepared
}

// dirtyFiles are the blobs and logs this process wrote without a sync
// since the journal's last seal.
type dirtyFiles struct {
	mu          sync.Mutex
	blobs, logs map[string]struct{}
}

func (d *dirtyFiles) add(blob, log string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if blob != "" {
		if d.blobs == nil {
			d.blobs = map[string]struct{}{}
		}
		d.blobs[blob] = struct{}{}
	}
	if log != "" {
		if d.logs == nil {
			d.logs = map[string]struct{}{}
		}
		d.logs[log] = struct{}{}
	}
}

// Sealer is the store's journal.Sealer: it takes the files written since
// the last seal and the contents held until it, and returns what writes
// the held ones to blobs/ and syncs them all (each file, then the blobs'
// folder). A file removed meanwhile needs nothing. A held content stays
// held until it is written, so a seal that fails leaves it to the next.
func (s *Store) Sealer() journal.Sealer {
	return func() func() error {
		s.dirty.mu.Lock()
		blobs, logs := s.dirty.blobs, s.dirty.logs
		s.dirty.blobs, s.dirty.logs = nil, nil
		s.dirty.mu.Unlock()
		held := s.held.snapshot()
		return func() error {
			if len(blobs) == 0 && len(logs) == 0 && len(held) == 0 {
				return nil
			}
			d, err := s.folders(false)
			if err != nil || d == nil {
				return err
			}
			if len(held) > 0 {
				if err := s.writeHeld(d, held); err != nil {
					return err
				}
			}
			if err := syncEach(d.blobs.Fd(), maps.Keys(blobs), sealSyncs); err != nil {
				return err
			}
			if len(blobs) > 0 {
				if err := d.blobs.Sync(); err != nil {
					return err
				}
			}
			return syncEach(d.sessions.Fd(), maps.Keys(logs), sealSyncs)
		}
	}
}

// sealSyncs is how many of a seal's files are synced at once.
const sealSyncs = 16

// syncEach fdatasyncs the files names in dir, n at a time (a seal:
// sealSyncs): concurrent syncs share the file system's commits and the
// disk's cache flushes, where one after another each pays its own, and a
// seal's disk time slows the changes beside it (docs/performance.md, "The
// seal's syncs side by side (issue 45)").
func syncEach(dir int, names iter.Seq[string], n int) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	slots := make(chan struct{}, n)
	for name := range names {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := syncAt(dir, name); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// syncAt fdatasyncs the file name in dir; a missing one is fine.
func syncAt(dir int, name string) error {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fdatasync(fd)
}

// keepInline puts content (at most journal.InlineBytes) in the change's
// entry and holds it in memory until the journal's seal writes it to
// blobs/ (one file written per change saved, docs/journal.md); past
// HeldBytes it is written to blobs/ at once, without a sync.
func (r *Recording) keepInline(ctx context.Context, d *folders, src io.Reader, size int64) error {
	c := chunks.Get().(*[blobChunk]byte)
	defer chunks.Put(c)
	n, err := io.ReadFull(src, c[:size])
	if err != nil {
		return err
	}
	content := c[:n]
	sum := sha256.Sum256(content)
	name := hex.EncodeToString(sum[:])
	stored := r.entry.Add(journal.KindBlob, content)
	if !r.s.held.hold(name, stored) {
		if err := writeBlob(d, name, content, false); err != nil {
			return err
		}
		r.s.dirty.add(name, "")
	}
	r.before.SHA256, r.before.Bytes, r.kept = name, int64(n), true
	r.s.bytes.Add(int64(n))
	return nil
}

// HeldBytes bounds the kept contents a store holds in memory until the
// journal's seal writes them to blobs/; the server seals a segment at
// half of it, so a seal in progress leaves room for the next.
const HeldBytes = 16 << 20

// heldBlobs are the kept contents that are only in this process's journal
// entries (and memory) until a seal writes them: by name, the entry's own
// bytes (journal.Entry.Add), no copy.
type heldBlobs struct {
	mu    sync.Mutex
	m     map[string][]byte
	bytes int64
}

// hold holds content as name; false when that would pass HeldBytes.
func (h *heldBlobs) hold(name string, content []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[name]; ok {
		return true
	}
	if h.bytes+int64(len(content)) > HeldBytes {
		return false
	}
	if h.m == nil {
		h.m = map[string][]byte{}
	}
	h.m[name] = content
	h.bytes += int64(len(content))
	return true
}

func (h *heldBlobs) get(name string) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.m[name]
	return c, ok
}

// snapshot is what is held now, for a seal to write.
func (h *heldBlobs) snapshot() map[string][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(h.m))
	for k, v := range h.m {
		out[k] = v
	}
	return out
}

// drop lets go of name, in blobs/ now (or referenced by nothing).
func (h *heldBlobs) drop(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.m[name]; ok {
		h.bytes -= int64(len(c))
		delete(h.m, name)
	}
}

// addSizes adds the held contents blobs/ lacks to sizes, for a collection.
func (h *heldBlobs) addSizes(sizes map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, v := range h.m {
		if _, ok := sizes[k]; !ok {
			sizes[k] = int64(len(v))
		}
	}
}

// writeHeld writes held contents to blobs/, then syncs them side by side
// (syncEach), then the folder, and lets go of them: under the gc lock's
// shared side, since a collection removes the temporary files it finds.
// A blob is named before its sync here: the segment that holds the
// content is removed only after the whole seal succeeded, and a replay
// writes again a content damaged in blobs/ (docs/journal.md, "Crashes").
func (s *Store) writeHeld(d *folders, held map[string][]byte) error {
	release, err := s.gc.rlock(context.Background(), d)
	if err != nil {
		return err
	}
	defer release()
	for name, content := range held {
		if err := writeBlob(d, name, content, false); err != nil {
			return err
		}
	}
	if err := syncEach(d.blobs.Fd(), maps.Keys(held), sealSyncs); err != nil {
		return err
	}
	if err := d.blobs.Sync(); err != nil {
		return err
	}
	for name := range held {
		s.held.drop(name)
	}
	return nil
}

// openKept opens the kept content sum: held in memory, in blobs/, or (a
// replica's, not sealed yet) in a journal segment; errDamaged when none
// has it.
func (s *Store) openKept(d *folders, sum string) (io.ReadCloser, error) {
	if c, ok := s.held.get(sum); ok {
		return io.NopCloser(bytes.NewReader(c)), nil
	}
	f, err := openBlob(d, sum)
	if err != errDamaged || s.opt.Segments == nil {
		return f, err
	}
	rec, ok := s.opt.Segments.Find(journal.KindBlob, func(r journal.Record) bool {
		if len(r.Parts) != 1 {
			return false
		}
		h := sha256.Sum256(r.Parts[0])
		return hex.EncodeToString(h[:]) == sum
	})
	if ok {
		return io.NopCloser(bytes.NewReader(rec.Parts[0])), nil
	}
	return openBlob(d, sum) // its seal may have written it meanwhile
}

// copyKept writes the kept content sum to w, checking that its bytes still
// have that SHA-256 (errDamaged otherwise): w must not be trusted before
// it returns nil.
func (s *Store) copyKept(ctx context.Context, d *folders, sum string, w io.Writer) error {
	f, err := s.openKept(d, sum)
	if err != nil {
		return err
	}
	defer f.Close()
	return copyChecked(ctx, f, sum, w)
}

// writeBlob puts content in blobs/ under name, unless a blob of that name
// and size is there: a temporary file renamed to its name, synced with
// sync (else the journal holds the content until the seal syncs it).
func writeBlob(d *folders, name string, content []byte, sync bool) error {
	dir := d.blobs.Fd()
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == int64(len(content)) {
		return nil
	}
	tmp := ".blob." + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = journal.WriteFull(fd, content)
	if err == nil && sync {
		err = unix.Fdatasync(fd)
	}
	unix.Close(fd)
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
	}
	return err
}

// journalLines puts lines appended to lg (unsynced) in the entry.
func (r *Recording) journalLines(lg *sessionLog, buf []byte) {
	r.entry.Add(journal.KindLog, []byte(lg.name), []byte(lg.h.id), buf)
	r.s.dirty.add("", lg.name)
}

// Replayed is what replaying the journal of dead processes put back.
type Replayed struct {
	Blobs, Lines int
}

// replay puts back, from the entries of dead processes' segments, what a
// crash took from the files: a kept content missing or damaged in blobs/,
// and the lines a log lacks (a change it does not list, the outcome of a
// change still pending), synced. A log rewritten or forgotten since (its
// header's id is another) has them already or must not get them back.
func (s *Store) replay(ctx context.Context, d *folders, recs []journal.Record) (Replayed, error) {
	var out Replayed
	type logLines struct {
		id    string
		lines [][]byte
	}
	// No collection deletes a content put back before its line is.
	release, err := s.gc.rlock(ctx, d)
	if err != nil {
		return out, err
	}
	defer release()
	logs := map[string]*logLines{}
	var order []string
	for _, rec := range recs {
		switch {
		case rec.Kind == journal.KindBlob && len(rec.Parts) == 1:
			content := rec.Parts[0]
			sum := sha256.Sum256(content)
			name := hex.EncodeToString(sum[:])
			if copyBlob(ctx, d, name, io.Discard) == nil {
				continue
			}
			_ = unix.Unlinkat(d.blobs.Fd(), name, 0)
			if err := writeBlob(d, name, content, true); err != nil {
				return out, err
			}
			out.Blobs++
		case rec.Kind == journal.KindLog && len(rec.Parts) == 3:
			name, id := string(rec.Parts[0]), string(rec.Parts[1])
			l := logs[name]
			if l == nil || l.id != id {
				if l == nil {
					order = append(order, name)
				}
				l = &logLines{id: id}
				logs[name] = l
			}
			l.lines = append(l.lines, rec.Parts[2])
		}
	}
	if out.Blobs > 0 {
		if err := d.blobs.Sync(); err != nil {
			return out, err
		}
	}
	for _, name := range order {
		l := logs[name]
		err := s.withLogNamed(ctx, d, name, "", func(lg *sessionLog) error {
			if lg.fd < 0 || lg.h.id != l.id {
				return nil
			}
			var missing []entry
			for _, buf := range l.lines {
				for _, line := range splitLines(buf) {
					var e entry
					if json.Unmarshal(line, &e) != nil {
						continue
					}
					e.decodePath()
					if !lacks(lg.h, &e) {
						continue
					}
					if e.T == tChange {
						// An entry committed before its outcome line (docs/
						// journal.md) leaves its change pending: the next
						// change of the file settles it, as its Prepare did.
						for _, st := range settleByBefore(lg.h, e.Path, e.Before) {
							lg.h.apply(&st)
							missing = append(missing, st)
						}
					}
					lg.h.apply(&e) // so a later line of the same change sees it
					missing = append(missing, e)
				}
			}
			if len(missing) == 0 {
				return nil
			}
			out.Lines += len(missing)
			return lg.append(true, missing...) // applying them again changes nothing
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// lacks reports whether h lacks what e says: a change it does not list
// (above its floor), or the outcome of a change it lists as pending.
func lacks(h *history, e *entry) bool {
	c := h.index[changeKey{e.Seq, e.Path}]
	switch e.T {
	case tChange:
		return c == nil && e.Seq > h.floor
	case tDone, tDrop:
		return c != nil && c.state == pending
	}
	return false
}

// splitLines splits buf into its lines (without their newlines).
func splitLines(buf []byte) [][]byte {
	var out [][]byte
	for len(buf) > 0 {
		i := 0
		for i < len(buf) && buf[i] != '\n' {
			i++
		}
		out = append(out, buf[:i])
		if i == len(buf) {
			break
		}
		buf = buf[i+1:]
	}
	return out
}
