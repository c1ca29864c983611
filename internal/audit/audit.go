// Package audit is the audit log of --audit-log (docs/identity.md, "The
// audit log"): one JSON line per successful mutation and per approval
// decision, on disk (fsync) before the call is answered, never file
// contents. Concurrent records share one write and one fsync (group
// commit). A mutation reserves its record before it changes anything, so
// a log that cannot take the record refuses the mutation first.
package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is wrapped by every error of Reserve and Commit.
var ErrUnavailable = errors.New("audit log unavailable")

// The subjects of a record made without a verified token.
const (
	SubjectToken = "token" // the static --token
	SubjectNone  = "none"  // no credential at all (a loopback server without --token)
)

// Record is one line of the log. Its fields are written in this order.
type Record struct {
	// Time is when the mutation or decision happened (the log's clock when
	// zero), written in UTC with nanoseconds.
	Time time.Time `json:"time"`
	// Subject is the token's subject, SubjectToken or SubjectNone.
	Subject string `json:"subject"`
	Session string `json:"session"`
	// SessionSubject is the subject whose session it is, when an admin
	// acted on another subject's session (docs/identity.md); omitted when
	// it is Subject's own.
	SessionSubject string `json:"session_subject,omitempty"`
	Transport      string `json:"transport"`
	// Tool is write, edit, revert, upload or delete; for an approval
	// decision, the tool of the call it decides.
	Tool string `json:"tool"`
	// Path is relative to the workspace root, as people read it: a name
	// that is not valid UTF-8 shows U+FFFD for each bad byte.
	Path string `json:"path"`
	// PathBytes is Path's exact bytes (base64 in the line), written only
	// when Path cannot say them: it is not valid UTF-8, or holds U+FFFD
	// itself. The log sets it from Path; a caller's value is ignored.
	PathBytes []byte `json:"path_bytes,omitempty"`
	// Before and After are the file's state around the change, nil
	// (null) for absent: Before of a create, After of a delete. A
	// decision has neither.
	Before *State `json:"before"`
	After  *State `json:"after"`
	// RequestID ties the line to the access log.
	RequestID string `json:"request_id"`
	// TraceID is the W3C trace id of the caller's traceparent (the HTTP
	// header, or an MCP call's _meta), omitted when there was none.
	TraceID string `json:"trace_id,omitempty"`
	// Approval and Decision ("approve" or "reject") are set on the line
	// of an approval decision only.
	Approval string `json:"approval,omitempty"`
	Decision string `json:"decision,omitempty"`
	// Via is "elicitation" on the line of a decision the MCP client's own
	// user made (docs/sandbox.md); omitted for one made at /approvals.
	Via string `json:"via,omitempty"`
}

// State is a file's state: its version, the SHA-256 of its bytes (hex) and
// their count. Never its contents.
type State struct {
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	Bytes   int64  `json:"bytes"`
}

// Options configure a Log.
type Options struct {
	// OnError is told of every failure: each refused reservation and each
	// record of a failed flush (toolfs_audit_write_errors_total). It runs
	// under the log's lock, so it must not block.
	OnError func(error)
	// Now is the clock of records without a Time (time.Now).
	Now func() time.Time
}

const (
	// reserveBytes is the room reserved on disk per pending record; a
	// record's line is a few hundred bytes (paths are at most 4096).
	reserveBytes = 16 << 10
	// preallocChunk is how much room beyond the end of the file one
	// fallocate claims, so most reservations cost no system call.
	preallocChunk = 256 << 10
	// retryBroken is how often a log whose write failed tries to reopen
	// its file, from Reserve.
	retryBroken = time.Second
)

// Log is an open audit log: an append-only file at one path. It is safe
// for concurrent use; one process appends to one file.
type Log struct {
	path    string
	onError func(error)
	now     func() time.Time

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a flush ends
	f        *os.File
	size     int64 // bytes the file holds, as far as this log knows
	allocEnd int64 // the file's blocks are allocated up to here (KEEP_SIZE)
	noAlloc  bool  // the file system cannot preallocate: reservations check health only
	reserved int   // reservations not yet committed or cancelled
	pending  *batch
	flushing bool
	broken   error // the last write failed; Reserve refuses until the file is reopened
	retried  time.Time
	closed   bool

	syncs, records atomic.Uint64

	beforeSync func() // tests only: runs before each flush's fsync
}

// batch is the records one write and one fsync put on disk.
type batch struct {
	buf  []byte
	n    int
	done bool
	err  error
}

// Open opens (creating it, mode 0600) the log at path for appending.
func Open(path string, o Options) (*Log, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Log{path: path, onError: o.OnError, now: o.Now, pending: &batch{}}
	l.cond = sync.NewCond(&l.mu)
	f, size, err := openFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	l.f, l.size, l.allocEnd = f, size, size
	return l, nil
}

// openFile opens path for appending, syncing its folder when it was
// created, so the file itself survives a crash. A file whose last line was
// cut (a write that failed half-way) gets a newline first.
func openFile(path string) (*os.File, int64, error) {
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*os.File, int64, error) { f.Close(); return nil, 0, err }
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() && fi.Mode()&os.ModeDevice == 0 {
		return fail(fmt.Errorf("%s is not a regular file", path))
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := syncDir(filepath.Dir(path)); err != nil {
			return fail(err)
		}
	}
	size := fi.Size()
	if size > 0 && fi.Mode().IsRegular() {
		last := make([]byte, 1)
		r, err := os.Open(path)
		if err == nil {
			_, err = r.ReadAt(last, size-1)
			r.Close()
		}
		if err == nil && last[0] != '\n' {
			n, err := f.Write([]byte{'\n'})
			size += int64(n)
			if err != nil {
				return fail(err)
			}
		}
	}
	return f, size, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Reservation is the room for one record, taken before the mutation it
// records: Commit writes the record after the mutation, Cancel (a no-op
// after Commit; deferrable) gives the room back when the mutation did not
// happen.
type Reservation struct {
	l    *Log
	done bool
}

// Reserve takes room for one record. It fails, wrapping ErrUnavailable,
// when the log cannot take it: its last write failed and the file cannot
// be reopened, or the disk has no room for the record (the room is
// preallocated, so a full disk refuses here, before anything changes,
// and not in Commit). The caller then refuses the mutation with
// fault.CodeAuditUnavailable.
func (l *Log) Reserve() (*Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("%w: closed", ErrUnavailable)
	}
	if l.broken != nil {
		if err := l.recoverLocked(); err != nil {
			return nil, l.failed(err)
		}
	}
	if err := l.allocateLocked(int64(l.reserved+1) * reserveBytes); err != nil {
		return nil, l.failed(err)
	}
	l.reserved++
	return &Reservation{l: l}, nil
}

// allocateLocked makes sure need bytes past the end of the file are
// allocated. A file system without fallocate (or a device) is not an
// error: its reservations only check the log's health.
func (l *Log) allocateLocked(need int64) error {
	if l.noAlloc || l.allocEnd-l.size >= need {
		return nil
	}
	length := max(need, preallocChunk)
	for {
		err := unix.Fallocate(int(l.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, l.size, length)
		switch {
		case err == nil:
			l.allocEnd = l.size + length
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ESPIPE):
			l.noAlloc = true
			return nil
		case length > need && (errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)):
			length = need // a full chunk does not fit: try the bare need
		default:
			return &os.PathError{Op: "fallocate", Path: l.path, Err: err}
		}
	}
}

// recoverLocked reopens the file of a broken log, at most once per
// retryBroken, and drops the old descriptor.
func (l *Log) recoverLocked() error {
	now := l.now()
	if now.Sub(l.retried) < retryBroken {
		return l.broken
	}
	l.retried = now
	for l.flushing {
		l.cond.Wait()
	}
	f, size, err := openFile(l.path)
	if err != nil {
		return err
	}
	l.f.Close()
	l.f, l.size, l.allocEnd, l.noAlloc, l.broken = f, size, size, false, nil
	return nil
}

// failed counts err and wraps it in ErrUnavailable.
func (l *Log) failed(err error) error {
	if l.onError != nil {
		l.onError(err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Commit writes r and returns once it is on disk (fsynced), together with
// the records committed concurrently. Its error wraps ErrUnavailable: the
// mutation happened but has no record (an I/O error after the
// reservation; docs/identity.md says what the caller answers).
func (r *Reservation) Commit(rec Record) error {
	if r.done {
		return errors.New("audit: reservation already used")
	}
	r.done = true
	line, err := r.l.line(rec)
	if err != nil {
		r.l.release()
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return r.l.append(line)
}

// Written is where Write put a record's line: the file (its path, device
// and inode), the offset, and the line.
type Written struct {
	Path     string
	Dev, Ino uint64
	Offset   int64
	Line     []byte
}

// Write writes r's line without a sync and says where: the caller makes
// it durable in its journal before the answer (docs/audit.md, "With the
// journal"), and the line is synced with the file by Syncer's function
// or by Reopen. Its error wraps ErrUnavailable, as Commit's.
func (r *Reservation) Write(rec Record) (Written, error) {
	if r.done {
		return Written{}, errors.New("audit: reservation already used")
	}
	r.done = true
	l := r.l
	line, err := l.line(rec)
	if err != nil {
		l.release()
		return Written{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.flushing {
		l.cond.Wait()
	}
	l.reserved--
	if l.broken != nil {
		return Written{}, fmt.Errorf("%w: %w", ErrUnavailable, l.broken)
	}
	w := Written{Path: l.path, Offset: l.size, Line: line}
	var st unix.Stat_t
	if err = unix.Fstat(int(l.f.Fd()), &st); err == nil {
		w.Dev, w.Ino = st.Dev, st.Ino
		_, err = l.f.Write(line)
	}
	if err != nil {
		l.f.Truncate(l.size)
		err = &os.PathError{Op: "write", Path: l.path, Err: unwrapPathError(err)}
		l.broken, l.retried = err, l.now()
		if l.onError != nil {
			l.onError(err)
		}
		return Written{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	l.size += int64(len(line))
	l.records.Add(1)
	return w, nil
}

// Syncer returns what fsyncs the lines Write wrote until now (a journal's
// seal runs it before it drops their entries). A file Reopen closed since
// was synced then.
func (l *Log) Syncer() func() error {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	return func() error {
		err := f.Sync()
		if errors.Is(err, os.ErrClosed) {
			return nil
		}
		return err
	}
}

// Replay appends, synced, the lines a crash took from the log at path:
// of ws (lines Write wrote, kept in a journal), those its file, when it
// is still the file they were written to, does not hold at or after
// their offset. A file rotated since was synced before it was left.
func Replay(path string, ws []Written) (int, error) {
	if len(ws) == 0 {
		return 0, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	from := int64(-1)
	for _, w := range ws {
		if w.Dev == st.Dev && w.Ino == st.Ino && (from < 0 || w.Offset < from) {
			from = w.Offset
		}
	}
	if from < 0 {
		return 0, nil
	}
	from = min(from, st.Size)
	tail := make([]byte, st.Size-from)
	if _, err := f.ReadAt(tail, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	var missing []byte
	n := 0
	for _, w := range ws {
		if w.Dev == st.Dev && w.Ino == st.Ino && !bytes.Contains(tail, w.Line) {
			missing = append(missing, w.Line...)
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if len(tail) > 0 && tail[len(tail)-1] != '\n' {
		missing = append([]byte{'\n'}, missing...) // a line the crash cut stays alone
	}
	if _, err := f.Write(missing); err != nil {
		return 0, err
	}
	return n, f.Sync()
}

// Cancel gives the room back; a no-op after Commit or Cancel.
func (r *Reservation) Cancel() {
	if r == nil || r.done {
		return
	}
	r.done = true
	r.l.release()
}

func (l *Log) release() {
	l.mu.Lock()
	l.reserved--
	l.mu.Unlock()
}

// Append writes one record without a reservation (an approval decision,
// which changes no file): Reserve then Commit.
func (l *Log) Append(rec Record) error {
	r, err := l.Reserve()
	if err != nil {
		return err
	}
	return r.Commit(rec)
}

// exactBytes is p's bytes when its UTF-8 rendering cannot say them (not
// valid UTF-8, or U+FFFD in it), nil otherwise: the lines of every other
// name stay as they were (docs/audit.md).
func exactBytes(p string) []byte {
	if utf8.ValidString(p) && !strings.ContainsRune(p, utf8.RuneError) {
		return nil
	}
	return []byte(p)
}

func (l *Log) line(rec Record) ([]byte, error) {
	if rec.Time.IsZero() {
		rec.Time = l.now()
	}
	rec.Time = rec.Time.UTC()
	rec.PathBytes = exactBytes(rec.Path)
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// append adds line to the pending batch and waits until a flush put it on
// disk. The first committer that finds no flush running flushes the whole
// pending batch (its own line and every line added before it took the
// batch); the others wait, and one of those still pending leads the next
// flush, so N concurrent commits cost far fewer than N fsyncs.
func (l *Log) append(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.pending
	b.buf = append(b.buf, line...)
	b.n++
	for !b.done {
		if !l.flushing {
			l.flushLocked(b)
			break
		}
		l.cond.Wait()
	}
	return b.err
}

// flushLocked writes and fsyncs batch b (the pending one) with l.mu
// released during the I/O.
func (l *Log) flushLocked(b *batch) {
	l.flushing = true
	l.pending = &batch{}
	f, size, broken := l.f, l.size, l.broken
	l.mu.Unlock()

	err := broken
	n := 0
	if err == nil {
		n, err = f.Write(b.buf)
		if err == nil {
			if l.beforeSync != nil {
				l.beforeSync()
			}
			err = f.Sync()
			l.syncs.Add(1)
		}
		if err != nil {
			// The line may be half on disk: cut it off (best effort; the
			// next open adds a newline if this fails).
			f.Truncate(size)
			n = 0
			err = &os.PathError{Op: "write", Path: l.path, Err: unwrapPathError(err)}
		}
	}

	l.mu.Lock()
	l.size += int64(n)
	l.reserved -= b.n
	if err != nil {
		l.broken = err
		l.retried = l.now()
		for range b.n {
			if l.onError != nil {
				l.onError(err)
			}
		}
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	} else {
		l.records.Add(uint64(b.n))
	}
	b.err, b.done = err, true
	l.flushing = false
	l.cond.Broadcast()
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Reopen opens the log's path anew (after a rotation renamed the file:
// SIGHUP) and closes the old file once the flush in progress ends; new
// records go to the new file. On error the log keeps its old file.
func (l *Log) Reopen() error {
	f, size, err := openFile(l.path)
	if err != nil {
		return fmt.Errorf("audit log: reopen: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.flushing {
		l.cond.Wait()
	}
	if l.closed {
		f.Close()
		return errors.New("audit log: reopen: closed")
	}
	old := l.f
	l.f, l.size, l.allocEnd, l.noAlloc, l.broken = f, size, size, false, nil
	// Lines Write left unsynced in the old file: the journal's entries
	// for them may be dropped once this file is no longer the path's.
	if err := old.Sync(); err != nil && !errors.Is(err, unix.EINVAL) && l.onError != nil {
		l.onError(err)
	}
	return old.Close()
}

// Close waits for the flush in progress and closes the file; later
// records fail.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.flushing {
		l.cond.Wait()
	}
	if l.closed {
		return nil
	}
	l.closed = true
	l.broken = errors.New("closed")
	return l.f.Close()
}

// Stats are counts since Open: records on disk and fsyncs made.
type Stats struct{ Records, Syncs uint64 }

// Stats returns the log's counts.
func (l *Log) Stats() Stats { return Stats{Records: l.records.Load(), Syncs: l.syncs.Load()} }

var _ io.Closer = (*Log)(nil)
