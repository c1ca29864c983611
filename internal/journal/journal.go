// Package journal is a workspace's journal of durable records (SPEC §28,
// docs/journal.md): a change's records (the content its checkpoint keeps,
// its history lines, its audit line) go into one entry, and concurrent
// entries share one write and one fdatasync (group commit), so a change
// pays one sync for all its records instead of one per record. The files
// the records describe (blobs, session logs, the audit log) are written
// without a sync: across a SIGKILL the kernel keeps them, and after a
// power loss Open finds the entries of the dead process and the caller
// replays them.
//
// Each process appends to a segment of its own (<folder>/r-<salt>.wal),
// flocked while it lives, so replicas on one shared file system never
// interleave their appends and a segment whose lock can be taken belongs
// to a dead process. A segment past its bound is sealed: a new one takes
// the appends, the records' files are synced (the Sealers), and the old
// segment is renamed under a new salt and kept for the next seal (at most
// one), or removed, so the journal stays bounded. A recycled segment's
// entries overwrite blocks it holds already, so their fdatasync flushes
// data alone, with no size or extent to commit; its old frames fail the
// checksum, which covers the salt (docs/journal.md, "Bounds").
package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is what a record holds.
type Kind byte

// The kinds of records.
const (
	// KindBlob: one part, a content the checkpoints keep (its name is its
	// SHA-256, recomputed on replay).
	KindBlob Kind = 'B'
	// KindLog: a session log's name, its header id, and lines appended to it.
	KindLog Kind = 'L'
	// KindAudit: the audit log's path, its device and inode, the offset the
	// line was written at, and the line.
	KindAudit Kind = 'A'
)

// Record is one record of an entry.
type Record struct {
	Kind  Kind
	Parts [][]byte
}

// Entry is one change's records, written and synced as one frame: on disk
// whole or not at all. Safe for concurrent use.
type Entry struct {
	mu  sync.Mutex
	buf []byte
}

// Add appends a record of kind with its parts and returns the last part
// as the entry holds it: later Adds never change those bytes, so a caller
// may keep them instead of a copy of its own.
func (e *Entry) Add(k Kind, parts ...[]byte) (stored []byte) {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf = append(e.buf, byte(k), byte(len(parts)))
	for _, p := range parts {
		e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(len(p)))
		e.buf = append(e.buf, p...)
	}
	if len(parts) > 0 {
		n := len(parts[len(parts)-1])
		stored = e.buf[len(e.buf)-n : len(e.buf) : len(e.buf)]
	}
	return stored
}

// Records are the entry's records, as a replay reads them.
func (e *Entry) Records() []Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs, _ := parseEntry(e.buf)
	return rs
}

// Len is the entry's size in bytes.
func (e *Entry) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.buf)
}

// A frame is [u32 length][u32 CRC-32C of the salt and the payload][payload];
// a segment named without a salt (<random>.wal, before recycling) has
// frames whose CRC covers the payload alone.
const frameHeader = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Limits.
const (
	// InlineBytes is the largest content an entry holds: a larger one is
	// synced in its own file, as before the journal, so an entry's memory
	// stays bounded (docs/journal.md).
	InlineBytes = 256 << 10
	// reserveBytes is the room reserved on disk per pending entry: an
	// inline content and its lines.
	reserveBytes = InlineBytes + 64<<10
	// preallocChunk is how much room one fallocate claims beyond the end.
	preallocChunk = 4 << 20
	// DefaultSegmentBytes is the bound past which a segment is sealed.
	DefaultSegmentBytes = 64 << 20
	// maxFrame bounds a frame read back (a damaged length is not trusted).
	maxFrame = 64 << 20
)

// Folder is the journal's folder, opened and checked by the provider
// (fs.Folder is one).
type Folder interface {
	Fd() int
	Sync() error
}

// Sealer makes the files its records describe durable: called when a
// segment is sealed, it returns the function that syncs what was written
// until then (run in the background before the segment is removed). It
// runs under the journal's lock, so it must only swap what it tracks.
type Sealer func() (sync func() error)

// Options configure a Journal.
type Options struct {
	// SegmentBytes bounds a segment (DefaultSegmentBytes when 0).
	SegmentBytes int64
	// OnError is told of every failure of a write or sync.
	OnError func(error)
	// Make makes the folder when Open had none.
	Make func() (Folder, error)
}

// Journal is this process's segment of a workspace's journal.
type Journal struct {
	dir     Folder
	opt     Options
	sealers []Sealer

	mu       sync.Mutex
	cond     *sync.Cond
	seg      *segment
	pending  *batch
	spare    *segment // a sealed segment renamed under a new salt, for the next seal
	flushing bool
	reserved int
	broken   error
	retried  time.Time
	closed   bool
	retiring sync.WaitGroup
	sealing  bool

	entries, syncs, seals, recycled atomic.Uint64
	beforeSync                      func() // tests only
}

// segment is one open segment file, flocked.
type segment struct {
	name           string
	fd             int
	seed           uint32 // the CRC-32C of the salt: each frame's checksum starts there
	size, allocEnd int64
	noAlloc        bool
}

type batch struct {
	buf  []byte
	n    int
	done bool
	err  error
}

// Orphan is a dead process's segment, found by Open: its entries' records
// in order, to be replayed, then Retire'd.
type Orphan struct {
	Name    string
	Records []Record
	fd      int
}

// Open opens the journal in dir and returns the segments of dead
// processes (their lock free), read up to their first torn frame. A nil
// dir (a root without the folder yet) has none: the first Reserve makes
// the folder with Options.Make. This process's segment is made by the
// first Reserve too, so a server that changes nothing writes nothing.
// The journal closes its folder when it closes, if the folder has Close.
func Open(dir Folder, o Options) (*Journal, []*Orphan, error) {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	var orphans []*Orphan
	if dir != nil {
		var err error
		if orphans, err = findOrphans(dir); err != nil {
			return nil, nil, err
		}
	}
	j := &Journal{dir: dir, opt: o, pending: &batch{}}
	j.cond = sync.NewCond(&j.mu)
	return j, orphans, nil
}

// newSegment creates and locks a new segment file; its name is synced
// into the folder, so its entries can be found after a crash.
func newSegment(dir Folder) (*segment, error) {
	name, seed := saltedName()
	fd, err := unix.Openat(dir.Fd(), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(dir.Fd(), name, 0)
		return nil, fmt.Errorf("journal: lock: %w", err)
	}
	if err := dir.Sync(); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(dir.Fd(), name, 0)
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &segment{name: name, fd: fd, seed: seed}, nil
}

// saltedName is a new segment's name, r-<salt>.wal, and its seed.
func saltedName() (string, uint32) {
	salt := rand.Uint64()
	return "r-" + strconv.FormatUint(salt, 36) + ".wal", saltSeed(salt)
}

func saltSeed(salt uint64) uint32 {
	return crc32.Checksum(binary.LittleEndian.AppendUint64(nil, salt), castagnoli)
}

// seedOf is the checksum seed of the segment called name: its salt's, or
// 0 for a segment named without one.
func seedOf(name string) (uint32, bool) {
	base, ok := strings.CutSuffix(name, ".wal")
	if !ok {
		return 0, false
	}
	salt, ok := strings.CutPrefix(base, "r-")
	if !ok {
		return 0, true
	}
	n, err := strconv.ParseUint(salt, 36, 64)
	if err != nil {
		return 0, false
	}
	return saltSeed(n), true
}

// findOrphans reads every segment whose lock is free.
func findOrphans(dir Folder) ([]*Orphan, error) {
	d, err := unix.Openat(dir.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "journal")
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var out []*Orphan
	for _, name := range names {
		seed, ok := seedOf(name)
		if !ok {
			continue
		}
		fd, err := unix.Openat(dir.Fd(), name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
			unix.Close(fd) // a live process's
			continue
		}
		recs, err := readSegment(fd, seed)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("journal: %s: %w", name, err)
		}
		out = append(out, &Orphan{Name: name, Records: recs, fd: fd})
	}
	return out, nil
}

// readSegment parses the frames of a segment up to the first torn or
// damaged one (an append a crash interrupted: never acknowledged).
func readSegment(fd int, seed uint32) ([]Record, error) {
	var recs []Record
	err := scanSegment(fd, seed, func(rs []Record) bool {
		recs = append(recs, rs...)
		return true
	})
	return recs, err
}

// scanSegment hands each whole frame's records to fn, in order, until fn
// returns false or a frame is torn or damaged (or, in a recycled segment,
// older than its salt); one frame is held at a time.
func scanSegment(fd int, seed uint32, fn func([]Record) bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	var off int64
	hdr := make([]byte, frameHeader)
	for off+frameHeader <= st.Size {
		if n, err := unix.Pread(fd, hdr, off); err != nil || n < frameHeader {
			return err
		}
		n := int64(binary.LittleEndian.Uint32(hdr))
		sum := binary.LittleEndian.Uint32(hdr[4:])
		if n > maxFrame || off+frameHeader+n > st.Size {
			break
		}
		payload := make([]byte, n)
		if m, err := unix.Pread(fd, payload, off+frameHeader); err != nil || int64(m) < n {
			return err
		}
		if crc32.Update(seed, castagnoli, payload) != sum {
			break
		}
		rs, ok := parseEntry(payload)
		if !ok || !fn(rs) {
			break
		}
		off += frameHeader + n
	}
	return nil
}

// Find is the first record of kind that match accepts in the segments of
// every process on the root (this one's, live replicas', dead ones' not
// yet replayed), read one frame at a time; ok is false when none has one.
// It is how a kept content that a replica holds only in its journal until
// its seal is found (docs/journal.md): a slow path, bounded by the
// segments' bound.
func (j *Journal) Find(kind Kind, match func(Record) bool) (rec Record, ok bool) {
	j.mu.Lock()
	dir := j.dir
	j.mu.Unlock()
	if dir == nil {
		return rec, false
	}
	d, err := unix.Openat(dir.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return rec, false
	}
	f := os.NewFile(uintptr(d), "journal")
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return rec, false
	}
	for _, name := range names {
		seed, ok := seedOf(name)
		if !ok {
			continue
		}
		fd, err := unix.Openat(dir.Fd(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // sealed and removed or renamed meanwhile
		}
		_ = scanSegment(fd, seed, func(rs []Record) bool {
			for _, r := range rs {
				if r.Kind == kind && match(r) {
					rec, ok = r, true
					return false
				}
			}
			return true
		})
		unix.Close(fd)
		if ok {
			return rec, true
		}
	}
	return rec, false
}

// parseEntry splits an entry's payload into its records.
func parseEntry(b []byte) ([]Record, bool) {
	var out []Record
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, false
		}
		r := Record{Kind: Kind(b[0])}
		parts := int(b[1])
		b = b[2:]
		for range parts {
			if len(b) < 4 {
				return nil, false
			}
			n := binary.LittleEndian.Uint32(b)
			if uint64(len(b)-4) < uint64(n) {
				return nil, false
			}
			r.Parts = append(r.Parts, b[4:4+n])
			b = b[4+n:]
		}
		out = append(out, r)
	}
	return out, true
}

// Retire removes a replayed orphan's segment.
func (j *Journal) Retire(o *Orphan) error {
	err := unix.Unlinkat(j.dir.Fd(), o.Name, 0)
	unix.Close(o.fd)
	if err != nil && err != unix.ENOENT {
		return err
	}
	return j.dir.Sync()
}

// Seal registers a Sealer; call it before the first entry.
func (j *Journal) Seal(s Sealer) { j.sealers = append(j.sealers, s) }

// ErrUnavailable is wrapped by every error of Reserve and Commit but
// ErrNoFolder.
var ErrUnavailable = errors.New("journal unavailable")

// ErrNoFolder is Reserve's error when the journal's folder cannot be made
// (a root the server may not write): the caller syncs each record in its
// own file instead, and meets the same refusal there.
var ErrNoFolder = errors.New("journal: its folder cannot be made")

// Reservation is the room of one entry, taken before its change: Commit
// writes the entry, Cancel (deferrable, a no-op after Commit) gives the
// room back.
type Reservation struct {
	j    *Journal
	done bool
}

// Reserve takes room for one entry: it fails (wrapping ErrUnavailable)
// when the last write failed or the disk has no room, so a full disk
// refuses the change before anything changes.
func (j *Journal) Reserve() (*Reservation, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, fmt.Errorf("%w: closed", ErrUnavailable)
	}
	if j.broken != nil {
		if err := j.recoverLocked(); err != nil {
			return nil, j.failed(err)
		}
	}
	if j.dir == nil {
		if j.opt.Make == nil {
			return nil, ErrNoFolder
		}
		dir, err := j.opt.Make()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoFolder, err)
		}
		j.dir = dir
	}
	if j.seg == nil {
		seg, err := newSegment(j.dir)
		if err != nil {
			return nil, j.failed(err)
		}
		j.seg = seg
	}
	if err := j.seg.allocate(int64(j.reserved+1) * reserveBytes); err != nil {
		return nil, j.failed(err)
	}
	j.reserved++
	return &Reservation{j: j}, nil
}

// recoverLocked replaces a broken segment by a new one, at most once per
// retryBroken: after a failed fdatasync the old file's pages cannot be
// trusted. The old segment is closed, so its lock is free and the next
// start replays what it holds.
func (j *Journal) recoverLocked() error {
	if time.Since(j.retried) < retryBroken {
		return j.broken
	}
	j.retried = time.Now()
	for j.flushing {
		j.cond.Wait()
	}
	next, err := newSegment(j.dir)
	if err != nil {
		return err
	}
	if j.seg != nil {
		unix.Close(j.seg.fd)
	}
	j.seg, j.broken = next, nil
	return nil
}

// retryBroken is how often a broken journal tries a new segment.
const retryBroken = time.Second

func (j *Journal) failed(err error) error {
	if j.opt.OnError != nil {
		j.opt.OnError(err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// allocate makes sure need bytes past the end are allocated (KEEP_SIZE).
func (s *segment) allocate(need int64) error {
	if s.noAlloc || s.allocEnd-s.size >= need {
		return nil
	}
	length := max(need, preallocChunk)
	for {
		err := unix.Fallocate(s.fd, unix.FALLOC_FL_KEEP_SIZE, s.size, length)
		switch {
		case err == nil:
			s.allocEnd = s.size + length
			return nil
		case err == unix.EINTR:
			continue
		case err == unix.EOPNOTSUPP || err == unix.ENOSYS:
			s.noAlloc = true
			return nil
		case length > need && (err == unix.ENOSPC || err == unix.EDQUOT):
			length = need
		default:
			return &os.PathError{Op: "fallocate", Path: s.name, Err: err}
		}
	}
}

// Cancel gives the room back; a no-op after Commit or Cancel.
func (r *Reservation) Cancel() {
	if r == nil || r.done {
		return
	}
	r.done = true
	r.j.mu.Lock()
	r.j.reserved--
	r.j.mu.Unlock()
}

// Commit writes e and returns once it is on disk, with the entries
// committed concurrently (one write, one fdatasync). An empty entry
// writes nothing.
func (r *Reservation) Commit(e *Entry) error {
	if r.done {
		return errors.New("journal: reservation already used")
	}
	r.done = true
	j := r.j
	e.mu.Lock()
	payload := e.buf
	e.mu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(payload) == 0 {
		j.reserved--
		return nil
	}
	b := j.pending
	b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(len(payload)))
	b.buf = binary.LittleEndian.AppendUint32(b.buf, 0) // by flushLocked, for the segment written
	b.buf = append(b.buf, payload...)
	b.n++
	for !b.done {
		if !j.flushing {
			j.flushLocked(b)
			break
		}
		j.cond.Wait()
	}
	return b.err
}

// flushLocked writes and syncs batch b with j.mu released during the I/O,
// then seals the segment when it is past its bound.
func (j *Journal) flushLocked(b *batch) {
	j.flushing = true
	j.pending = &batch{}
	seg, err := j.seg, j.broken
	j.mu.Unlock()

	n := 0
	if err == nil {
		checksum(b.buf, seg.seed)
		n, err = pwriteFull(seg.fd, b.buf, seg.size)
		if err == nil {
			if j.beforeSync != nil {
				j.beforeSync()
			}
			err = unix.Fdatasync(seg.fd)
			j.syncs.Add(1)
		}
		if err != nil {
			_ = unix.Ftruncate(seg.fd, seg.size) // cut a torn frame (readers skip it anyway)
			n = 0
			err = &os.PathError{Op: "write", Path: seg.name, Err: err}
		}
	}

	j.mu.Lock()
	seg.size += int64(n)
	j.reserved -= b.n
	if err != nil {
		j.broken = err
		if j.opt.OnError != nil {
			for range b.n {
				j.opt.OnError(err)
			}
		}
		j.retried = time.Now()
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	} else {
		j.entries.Add(uint64(b.n))
		if seg.size >= j.opt.SegmentBytes && !j.sealing && !j.closed {
			j.sealLocked()
		}
	}
	b.err, b.done = err, true
	j.flushing = false
	j.cond.Broadcast()
}

// checksum fills the CRC of each frame of buf, seeded with seed.
func checksum(buf []byte, seed uint32) {
	for off := 0; off+frameHeader <= len(buf); {
		n := int(binary.LittleEndian.Uint32(buf[off:]))
		end := off + frameHeader + n
		binary.LittleEndian.PutUint32(buf[off+4:], crc32.Update(seed, castagnoli, buf[off+frameHeader:end]))
		off = end
	}
}

// sealLocked starts a new segment for the appends to come (the spare, if
// there is one) and, in the background, syncs what the old one's records
// describe, then recycles or removes it. A failure keeps the old segment
// (replayed at the next start).
func (j *Journal) sealLocked() {
	next := j.spare
	j.spare = nil
	if next == nil {
		var err error
		if next, err = newSegment(j.dir); err != nil {
			if j.opt.OnError != nil {
				j.opt.OnError(err)
			}
			return
		}
	}
	if err := next.allocate(int64(j.reserved) * reserveBytes); err != nil && j.opt.OnError != nil {
		j.opt.OnError(err)
	}
	old := j.seg
	j.seg = next
	syncs := make([]func() error, 0, len(j.sealers))
	for _, s := range j.sealers {
		syncs = append(syncs, s())
	}
	j.sealing = true
	j.seals.Add(1)
	j.retiring.Add(1)
	go func() {
		defer j.retiring.Done()
		j.retire(old, syncs)
	}()
}

func (j *Journal) retire(old *segment, syncs []func() error) {
	var err error
	for _, s := range syncs {
		if e := s(); e != nil && err == nil {
			err = e
		}
	}
	if err == nil && j.recycle(old) {
		j.mu.Lock()
		j.sealing = false
		j.mu.Unlock()
		return
	}
	if err == nil {
		if err = unix.Unlinkat(j.dir.Fd(), old.name, 0); err == nil {
			err = j.dir.Sync()
		}
	}
	unix.Close(old.fd) // a kept segment's lock is free: the next start replays it
	if err != nil && j.opt.OnError != nil {
		j.opt.OnError(err)
	}
	j.mu.Lock()
	j.sealing = false
	j.mu.Unlock()
}

// recycle keeps old, sealed and its records' files synced, as the spare
// for the next seal: renamed under a new salt (so its frames no longer
// pass the checksum) and the rename synced before any entry is written
// there, its lock kept. It reports false when old is not kept: the
// journal closing, a spare kept already, or a failure (old still there
// under its name).
func (j *Journal) recycle(old *segment) bool {
	j.mu.Lock()
	keep := !j.closed && j.spare == nil
	j.mu.Unlock()
	if !keep {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(old.fd, &st) != nil {
		return false
	}
	name, seed := saltedName()
	if unix.Renameat2(j.dir.Fd(), old.name, j.dir.Fd(), name, unix.RENAME_NOREPLACE) != nil {
		return false
	}
	old.name = name
	if j.dir.Sync() != nil {
		return false // removed by the caller under its new name; its frames fail the new salt
	}
	spare := &segment{name: name, fd: old.fd, seed: seed, allocEnd: st.Size, noAlloc: old.noAlloc}
	j.mu.Lock()
	j.spare = spare
	j.mu.Unlock()
	j.recycled.Add(1)
	return true
}

// Close waits for the flush and the seal in progress, seals the segment
// (its records' files synced) and removes it: a clean stop leaves nothing
// to replay. Later reservations fail.
func (j *Journal) Close() error {
	j.mu.Lock()
	for j.flushing {
		j.cond.Wait()
	}
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.broken = errors.New("closed")
	j.mu.Unlock()
	j.retiring.Wait()
	j.mu.Lock()
	if sp := j.spare; sp != nil {
		j.spare = nil
		_ = unix.Unlinkat(j.dir.Fd(), sp.name, 0) // synced with the last segment's removal
		unix.Close(sp.fd)
	}
	syncs := make([]func() error, 0, len(j.sealers))
	for _, s := range j.sealers {
		syncs = append(syncs, s())
	}
	seg := j.seg
	j.mu.Unlock()
	if seg != nil {
		j.retire(seg, syncs)
	}
	if c, ok := j.dir.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Stats are counts since Open.
type Stats struct{ Entries, Syncs, Seals, Recycled uint64 }

// Stats returns the journal's counts.
func (j *Journal) Stats() Stats {
	return Stats{Entries: j.entries.Load(), Syncs: j.syncs.Load(), Seals: j.seals.Load(), Recycled: j.recycled.Load()}
}

// pwriteFull writes all of b to fd at off, through short writes and EINTR.
func pwriteFull(fd int, b []byte, off int64) (int, error) {
	return full(b, func(p []byte, done int) (int, error) { return unix.Pwrite(fd, p, off+int64(done)) })
}

// WriteFull writes all of b to fd, through short writes and EINTR; the
// checkpoint store writes its files with it too.
func WriteFull(fd int, b []byte) (int, error) {
	return full(b, func(p []byte, _ int) (int, error) { return unix.Write(fd, p) })
}

// full calls write with what is left of b (and how much is done) until
// all of it is written, retrying EINTR.
func full(b []byte, write func(p []byte, done int) (int, error)) (int, error) {
	n := 0
	for n < len(b) {
		m, err := write(b[n:], n)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}
