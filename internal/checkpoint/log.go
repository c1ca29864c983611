package checkpoint

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/journal"
)

// A session's log is JSON lines, appended under the session's lock
// (docs/checkpoints.md, "On disk"):
//
//	{"t":"session","session":<id>,"id":<random>,"floor":<seq>}  the first line; changes up to floor were dropped
//	{"t":"change","seq",…,"before"?,"after"?,"kept"?,"why"?}  synced before the change is published
//	{"t":"done","seq","path","version","added"?,"removed"?}   once it is published
//	{"t":"drop","seq","path"}                                 it was not published after all
//	{"t":"evict","seq","path"}                                its kept content was dropped (bounds)
//
// A change is identified by seq and path (a revert's changes share one
// seq). A compacted log folds done and evict into the change line
// ("done":true). A torn last line (a crash in mid-append) is cut off by
// the next writer.
const (
	tSession = "session"
	tChange  = "change"
	tDone    = "done"
	tDrop    = "drop"
	tEvict   = "evict"
)

// State is a file's state in a change: its version, the SHA-256 of its
// bytes (hex) and their number. A change's after has no bytes.
type State struct {
	Version string `json:"version,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
	// Mode is the permission bits (0o777) of a file a change replaced or
	// removed: a revert that recreates it gives them back.
	Mode uint32 `json:"mode,omitempty"`
}

// entry is one line of a log.
type entry struct {
	T       string `json:"t"`
	Session string `json:"session,omitempty"`
	ID      string `json:"id,omitempty"` // of this file: a cache can tell a new log in a reused inode
	Floor   int64  `json:"floor,omitempty"`
	Seq     int64  `json:"seq,omitempty"`
	Time    string `json:"time,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Path    string `json:"path,omitempty"`
	// PathBytes is Path's exact bytes when Path alone cannot say them
	// (exactBytes); a line without it and with U+FFFD in Path was written
	// before names were kept byte for byte (Lossy).
	PathBytes []byte `json:"path_bytes,omitempty"`
	Before    *State `json:"before,omitempty"` // absent: the file did not exist
	After     *State `json:"after,omitempty"`  // absent: the change removed it
	Kept      bool   `json:"kept,omitempty"`   // before's content is in blobs/
	Why       string `json:"why,omitempty"`    // why not, when before exists
	Done      bool   `json:"done,omitempty"`
	// Journal marks a file of a journaled change of several files made by
	// Journal (a revert's are known by their tool).
	Journal bool `json:"journal,omitempty"`
	// Folder marks a change of folders (RecordFolder): "made" (Path the
	// outermost folder made, To the folder asked for) or "moved" (Path the
	// source, To the destination).
	Folder  string `json:"folder,omitempty"`
	To      string `json:"to,omitempty"`
	Version string `json:"version,omitempty"`
	Added   *int   `json:"added,omitempty"`
	Removed *int   `json:"removed,omitempty"`
	// Lossy: Path is not known byte for byte (read from an older line),
	// so it is written again without PathBytes.
	Lossy bool `json:"-"`
}

// exactBytes is p's bytes when its UTF-8 rendering cannot say them: p is
// not valid UTF-8 (json.Marshal would write U+FFFD for each bad byte), or
// holds U+FFFD itself, so a reader could not tell the two apart; nil
// otherwise, so the lines of every other name stay as they were
// (docs/checkpoints.md, "Names that are not UTF-8").
func exactBytes(p string) []byte {
	if utf8.ValidString(p) && !strings.ContainsRune(p, utf8.RuneError) {
		return nil
	}
	return []byte(p)
}

// decodePath gives e its exact Path from PathBytes, and marks a path
// with U+FFFD and without them Lossy.
func (e *entry) decodePath() {
	switch {
	case e.PathBytes != nil:
		e.Path, e.PathBytes = string(e.PathBytes), nil
	case strings.ContainsRune(e.Path, utf8.RuneError):
		e.Lossy = true
	}
}

// changeState is where a change is between its record and its answer.
type changeState uint8

const (
	pending changeState = iota // recorded, not known to be published
	done                       // published
	dropped                    // not published
)

// change is one change of a history.
type change struct {
	seq            int64
	time           time.Time
	tool, path     string
	before, after  *State
	kept           bool
	why            string
	state          changeState
	added, removed *int
	journal        bool // one file of a journaled change (Journal)
	// folder and to: a change of folders (entry.Folder, entry.To).
	folder, to string
	// lossy: path was recorded before names were kept byte for byte and
	// holds U+FFFD, so the file it named is uncertain: not revertible.
	lossy bool
}

// revertible reports whether the change can be undone: it created the
// file, or the content it replaced is kept.
func (c *change) revertible() bool { return !c.lossy && (c.before == nil || c.kept) }

// reason is why the change is not revertible.
func (c *change) reason() string {
	if c.lossy {
		return whyLossyName
	}
	return c.why
}

// journaled reports whether the change is one file of a journaled change
// of several (a revert, or Journal's): settled with its whole seq, never
// alone.
func (c *change) journaled() bool { return c.journal || c.tool == ToolRevert }

type changeKey struct {
	seq  int64
	path string
}

// history is a parsed log.
type history struct {
	session string
	id      string // the log file's, from its header
	floor   int64
	lastSeq int64
	changes []*change // in log order; dropped ones until compaction
	index   map[changeKey]*change
	size    int64 // bytes through the last whole line
	lines   int
	live    int // changes not dropped
}

// snapshot is a copy of h that later appends to h (which the cache
// keeps and another writer may catch up) leave alone; it has no index.
func (h *history) snapshot() *history {
	c := *h
	c.index = nil
	c.changes = make([]*change, len(h.changes))
	for i, ch := range h.changes {
		cp := *ch
		if ch.before != nil {
			b := *ch.before
			cp.before = &b
		}
		if ch.after != nil {
			a := *ch.after
			cp.after = &a
		}
		c.changes[i] = &cp
	}
	return &c
}

func newHistory(session string) *history {
	return &history{session: session, index: map[changeKey]*change{}}
}

// feed applies the whole lines of b and reports the bytes they took.
func (h *history) feed(b []byte) int {
	used := 0
	for {
		i := bytes.IndexByte(b[used:], '\n')
		if i < 0 {
			return used
		}
		var e entry
		if json.Unmarshal(b[used:used+i], &e) == nil {
			e.decodePath()
			h.apply(&e)
		}
		h.lines++
		used += i + 1
	}
}

func (h *history) apply(e *entry) {
	switch e.T {
	case tSession:
		if h.session == "" {
			h.session = e.Session
		}
		if h.id == "" {
			h.id = e.ID
		}
		h.floor = max(h.floor, e.Floor)
		h.lastSeq = max(h.lastSeq, e.Floor)
		return
	}
	k := changeKey{e.Seq, e.Path}
	c := h.index[k]
	switch e.T {
	case tChange:
		if c != nil || e.Seq <= h.floor {
			return
		}
		c = &change{seq: e.Seq, tool: e.Tool, path: e.Path, before: e.Before, after: e.After, kept: e.Kept, why: e.Why, lossy: e.Lossy, journal: e.Journal, folder: e.Folder, to: e.To}
		c.time, _ = time.Parse(time.RFC3339Nano, e.Time)
		if e.Done {
			c.state, c.added, c.removed = done, e.Added, e.Removed
		}
		h.changes = append(h.changes, c)
		h.index[k] = c
		h.live++
		h.lastSeq = max(h.lastSeq, e.Seq)
	case tDone:
		if c != nil && c.state == pending {
			c.state, c.added, c.removed = done, e.Added, e.Removed
			if c.after != nil {
				c.after.Version = e.Version
			}
		}
	case tDrop:
		if c != nil && c.state == pending {
			c.state = dropped
			h.live--
		}
	case tEvict:
		if c != nil && c.kept {
			c.kept, c.why = false, whyEvicted
		}
	}
}

// entries is the history as a compacted log: the header, then every change
// not dropped, folded.
func (h *history) entries() []entry {
	out := []entry{{T: tSession, Session: h.session, ID: newLogID(), Floor: h.floor}}
	for _, c := range h.changes {
		if c.state != dropped {
			out = append(out, c.entry())
		}
	}
	return out
}

// entry is the change's line: folded when it is done.
func (c *change) entry() entry {
	e := entry{T: tChange, Seq: c.seq, Time: c.time.Format(time.RFC3339Nano), Tool: c.tool, Path: c.path,
		Before: c.before, After: c.after, Kept: c.kept, Why: c.why, Lossy: c.lossy, Journal: c.journal, Folder: c.folder, To: c.to}
	if c.state == done {
		e.Done, e.Added, e.Removed = true, c.added, c.removed
	}
	return e
}

// logName is the file name of a session's log: a digest of the session id,
// so any id is a safe name.
func logName(session string) string {
	sum := sha256.Sum256([]byte(session))
	return hex.EncodeToString(sum[:16]) + ".log"
}

// sessionLog is one session's log, open under the session's lock: h is
// caught up with the file (fd -1 while there is none).
type sessionLog struct {
	s        *Store
	d        *folders
	name     string
	fd       int
	dev, ino uint64
	h        *history
}

// withLog runs fn with the log of session, under the session's lock.
func (s *Store) withLog(ctx context.Context, d *folders, session string, fn func(lg *sessionLog) error) error {
	return s.withLogNamed(ctx, d, logName(session), session, fn)
}

// withLogNamed is withLog by file name; session may be "" when only the
// name is known (the log's header names it).
func (s *Store) withLogNamed(ctx context.Context, d *folders, name, session string, fn func(lg *sessionLog) error) error {
	unlock, err := s.sessionLock(ctx, d, name)
	if err != nil {
		return err
	}
	defer unlock()
	lg := &sessionLog{s: s, d: d, name: name, fd: -1}
	if err := lg.open(session); err != nil {
		return err
	}
	defer lg.close()
	return fn(lg)
}

// open opens the log and catches its history up: from the cached one when
// the file is the same and has only grown, else from the start. A torn
// last line is cut off (we hold the lock: its writer is gone).
func (lg *sessionLog) open(session string) error {
	cached := lg.s.cache.take(lg.name)
	fd, err := unix.Openat(lg.d.sessions.Fd(), lg.name, unix.O_RDWR|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		lg.h = newHistory(session)
		return nil
	}
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return fmt.Errorf("checkpoint: %s/%s is not a regular file", lg.d.sessions, lg.name)
	}
	lg.fd, lg.dev, lg.ino = fd, st.Dev, st.Ino
	h := cached.h
	if h == nil || cached.dev != st.Dev || cached.ino != st.Ino || st.Size < h.size || headerID(fd) != h.id {
		h = newHistory("")
	}
	if st.Size > h.size {
		buf := make([]byte, st.Size-h.size)
		n, err := preadFull(fd, buf, h.size)
		if err != nil {
			unix.Close(fd)
			lg.fd = -1
			return err
		}
		h.size += int64(h.feed(buf[:n]))
	}
	if st.Size > h.size {
		_ = unix.Ftruncate(fd, h.size) // a read-only root keeps it; readers skip it
	}
	switch {
	case h.session == "":
		h.session = session
	case session != "" && h.session != session:
		unix.Close(fd)
		lg.fd = -1
		return fmt.Errorf("checkpoint: the log %s belongs to another session", lg.name)
	}
	lg.h = h
	return nil
}

// close releases the file and caches the history.
func (lg *sessionLog) close() {
	if lg.fd < 0 {
		return
	}
	unix.Close(lg.fd)
	lg.fd = -1
	lg.s.cache.put(lg.name, lg.dev, lg.ino, lg.h)
}

// append writes es at the end of the log in one write, synced when sync is
// set (a new log always is, with its folder), and applies them. A new log
// starts with its header.
func (lg *sessionLog) append(sync bool, es ...entry) error {
	_, err := lg.appendBytes(sync, es...)
	return err
}

// appendBytes is append, reporting the bytes it wrote.
func (lg *sessionLog) appendBytes(sync bool, es ...entry) ([]byte, error) {
	created := false
	if lg.fd < 0 {
		fd, err := unix.Openat(lg.d.sessions.Fd(), lg.name, unix.O_RDWR|unix.O_APPEND|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, err
		}
		lg.fd, lg.dev, lg.ino, created = fd, st.Dev, st.Ino, true
		es = append([]entry{{T: tSession, Session: lg.h.session, ID: newLogID(), Floor: lg.h.floor}}, es...)
	}
	buf, err := marshalLines(es)
	if err != nil {
		return nil, err
	}
	if n, err := journal.WriteFull(lg.fd, buf); err != nil {
		if n > 0 {
			_ = unix.Ftruncate(lg.fd, lg.h.size)
		}
		return nil, err
	}
	if sync || created {
		if err := unix.Fdatasync(lg.fd); err != nil {
			return nil, err
		}
	}
	if created {
		if err := lg.d.sessions.Sync(); err != nil {
			return nil, err
		}
	}
	for i := range es {
		lg.h.apply(&es[i])
	}
	lg.h.size += int64(len(buf))
	lg.h.lines += len(es)
	return buf, nil
}

// rewrite replaces the log by the compacted form of its history, atomically
// (a synced temporary file renamed over it).
func (lg *sessionLog) rewrite() error {
	es := lg.h.entries()
	buf, err := marshalLines(es)
	if err != nil {
		return err
	}
	tmp := "." + lg.name + "." + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
	dir := lg.d.sessions.Fd()
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = journal.WriteFull(fd, buf)
	if err == nil {
		err = unix.Fdatasync(fd)
	}
	unix.Close(fd)
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, lg.name)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return err
	}
	if err := lg.d.sessions.Sync(); err != nil {
		return err
	}
	if lg.fd >= 0 {
		unix.Close(lg.fd)
		lg.fd = -1
	}
	h := newHistory(lg.h.session)
	h.size = int64(h.feed(buf))
	lg.h = h
	fd, err = unix.Openat(dir, lg.name, unix.O_RDWR|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	lg.fd, lg.dev, lg.ino = fd, st.Dev, st.Ino
	return nil
}

// remove deletes the log (the session's history is forgotten).
func (lg *sessionLog) remove() error {
	if lg.fd >= 0 {
		unix.Close(lg.fd)
		lg.fd = -1
	}
	lg.h = newHistory(lg.h.session)
	err := unix.Unlinkat(lg.d.sessions.Fd(), lg.name, 0)
	if err != nil && err != unix.ENOENT {
		return err
	}
	return lg.d.sessions.Sync()
}

// newLogID names a new log file.
func newLogID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// headerID reads the id in a log's first line ("" when there is none).
func headerID(fd int) string {
	var b [512]byte
	n, _ := preadFull(fd, b[:], 0)
	line, _, ok := bytes.Cut(b[:n], []byte("\n"))
	var e entry
	if !ok || json.Unmarshal(line, &e) != nil || e.T != tSession {
		return ""
	}
	return e.ID
}

func marshalLines(es []entry) ([]byte, error) {
	var buf bytes.Buffer
	for i := range es {
		e := es[i]
		if !e.Lossy {
			e.PathBytes = exactBytes(e.Path)
		}
		b, err := json.Marshal(&e)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

func preadFull(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// historyCache keeps the parsed histories of recently used sessions, so an
// append reads only what others appended since. Bounded: at most
// cacheSessions histories and, together, about as many changes as the
// store's bound allows. An entry is taken out while its session is locked.
type historyCache struct {
	mu         sync.Mutex
	m          map[string]*list.Element
	lru        list.List // of *cachedHistory, most recent first
	changes    int
	maxChanges int
}

const cacheSessions = 256

type cachedHistory struct {
	name     string
	dev, ino uint64
	h        *history
}

func (c *historyCache) init(maxChanges int) {
	c.m = map[string]*list.Element{}
	c.maxChanges = maxChanges
}

// take removes and returns name's entry (zero when none).
func (c *historyCache) take(name string) cachedHistory {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[name]
	if el == nil {
		return cachedHistory{}
	}
	ch := el.Value.(*cachedHistory)
	c.lru.Remove(el)
	delete(c.m, name)
	c.changes -= len(ch.h.changes)
	return *ch
}

// put caches h for name, evicting the least recently used past the bounds.
func (c *historyCache) put(name string, dev, ino uint64, h *history) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[name]; old != nil { // cannot happen: taken under the session lock
		c.changes -= len(old.Value.(*cachedHistory).h.changes)
		c.lru.Remove(old)
	}
	c.m[name] = c.lru.PushFront(&cachedHistory{name: name, dev: dev, ino: ino, h: h})
	c.changes += len(h.changes)
	for c.lru.Len() > 1 && (c.lru.Len() > cacheSessions || c.changes > c.maxChanges+c.maxChanges/8) {
		last := c.lru.Back()
		ch := last.Value.(*cachedHistory)
		c.lru.Remove(last)
		delete(c.m, ch.name)
		c.changes -= len(ch.h.changes)
	}
}

var errBusy = errors.New("checkpoint: the session's history kept changing")
