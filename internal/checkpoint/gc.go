package checkpoint

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The bounds are enforced by a collection, run when an estimate passes 7/8
// of a bound (in the background) or the bound itself (before the next
// change is kept), at start-up and every SweepInterval; it brings both down
// to 3/4 of their bound, so it runs once per eighth of the bound added, not
// on every change (docs/checkpoints.md, "Bounds").

func high(bound int64) int64 { return bound - bound/8 }
func low(bound int64) int64  { return bound - bound/4 }

// waitBounds runs a collection first when a bound is reached; a change
// waits for it before it keeps anything.
func (s *Store) waitBounds(ctx context.Context) error {
	if s.bytes.Load() <= s.opt.Bytes && s.changes.Load() <= int64(s.opt.MaxChanges) {
		return nil
	}
	return s.collect(ctx)
}

// afterChange starts a collection in the background when an estimate
// passed 7/8 of its bound.
func (s *Store) afterChange() {
	if s.bytes.Load() > high(s.opt.Bytes) || s.changes.Load() > high(int64(s.opt.MaxChanges)) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// sweeper runs the collections asked for by afterChange and Forget, and
// one every SweepInterval.
func (s *Store) sweeper() {
	defer close(s.stopped)
	var tick <-chan time.Time
	if s.opt.SweepInterval > 0 {
		t := time.NewTicker(s.opt.SweepInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-tick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := s.collect(ctx); err != nil {
			s.log.Warn("checkpoints: enforcing the bounds failed", "err", err)
		}
		cancel()
	}
}

// collected is one change as a collection sees it.
type collected struct {
	log  int // index in logs
	c    *change
	blob string // its kept content ("" when none)
}

// collect enforces the bounds and the TTL: under the gc lock (exclusive,
// so no blob is between its writing and its reference) it reads every log,
// forgets the histories idle past the TTL, drops the kept content of the
// oldest changes while the kept contents exceed 3/4 of Bytes, drops the
// oldest changes while there are more than 3/4 of MaxChanges, compacts the
// logs that need it, and deletes the blobs no change references and the
// temporary files a crash left.
func (s *Store) collect(ctx context.Context) error {
	d, err := s.folders(false)
	if err != nil || d == nil {
		return err
	}
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	unlock, err := s.gc.lock(ctx, d)
	if err != nil {
		return err
	}
	defer unlock()

	names, err := listNames(d.sessions.Fd())
	if err != nil {
		return err
	}
	type logInfo struct {
		name  string
		h     *history
		evict []*change
		floor int64
	}
	var logs []*logInfo
	var all []collected
	refs := map[string]int{}
	now := s.opt.Now()
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			_ = unix.Unlinkat(d.sessions.Fd(), name, 0) // a rewrite a crash interrupted
			continue
		}
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		var h *history
		err := s.withLogNamed(ctx, d, name, "", func(lg *sessionLog) error {
			if s.opt.TTL > 0 && lg.fd >= 0 {
				var st unix.Stat_t
				if unix.Fstat(lg.fd, &st) == nil && now.Sub(time.Unix(st.Mtim.Unix())) > s.opt.TTL && !hasPending(lg.h) {
					s.touched.forget(lg.h.session)
					return lg.remove()
				}
			}
			h = lg.h.snapshot() // read after the lock is let go
			return nil
		})
		if err != nil {
			return err
		}
		if h == nil {
			continue
		}
		li := &logInfo{name: name, h: h}
		logs = append(logs, li)
		for _, c := range h.changes {
			if c.state == dropped {
				continue
			}
			cl := collected{log: len(logs) - 1, c: c}
			if c.kept && c.before != nil {
				cl.blob = c.before.SHA256
				refs[cl.blob]++
			}
			if c.state == pending && c.tool == ToolRevert && c.after != nil {
				refs[c.after.SHA256]++ // a revert to finish needs it
			}
			all = append(all, cl)
		}
	}

	sizes, err := blobSizes(d)
	if err != nil {
		return err
	}
	s.held.addSizes(sizes) // written by the journal's seal (docs/journal.md)
	var total int64
	for sum := range refs {
		total += sizes[sum]
	}
	// Oldest first: by time, then by session log and order in it.
	slices.SortStableFunc(all, func(a, b collected) int { return a.c.time.Compare(b.c.time) })

	// The kept contents: the oldest changes lose theirs first, but never
	// the newest change (it fits: MaxFileBytes <= Bytes).
	for i := 0; i < len(all)-1 && total > low(s.opt.Bytes); i++ {
		cl := all[i]
		if cl.blob == "" || cl.c.state != done {
			continue
		}
		logs[cl.log].evict = append(logs[cl.log].evict, cl.c)
		if refs[cl.blob]--; refs[cl.blob] == 0 {
			total -= sizes[cl.blob]
		}
		all[i].blob = ""
	}
	// The changes: the oldest go first, a seq (a revert's changes) at once,
	// never past a pending one.
	count := len(all)
	blocked := map[int]bool{}
	for i := 0; i < len(all) && count > int(low(int64(s.opt.MaxChanges))); i++ {
		cl := all[i]
		li := logs[cl.log]
		if blocked[cl.log] || cl.c.seq <= li.floor {
			continue
		}
		if cl.c.state == pending {
			blocked[cl.log] = true
			continue
		}
		li.floor = cl.c.seq
		for _, c := range li.h.changes {
			if c.seq == cl.c.seq && c.state != dropped {
				count--
			}
		}
	}
	for _, cl := range all {
		if cl.blob != "" && cl.c.seq <= logs[cl.log].floor {
			if refs[cl.blob]--; refs[cl.blob] == 0 {
				total -= sizes[cl.blob]
			}
		}
	}

	for _, li := range logs {
		if len(li.evict) == 0 && li.floor == 0 && li.h.lines <= 2*li.h.live+16 {
			continue
		}
		err := s.withLogNamed(ctx, d, li.name, "", func(lg *sessionLog) error {
			var es []entry
			for _, c := range li.evict {
				if cur := lg.h.index[changeKey{c.seq, c.path}]; cur != nil && cur.kept {
					es = append(es, entry{T: tEvict, Seq: c.seq, Path: c.path})
				}
			}
			if len(es) > 0 {
				if err := lg.append(true, es...); err != nil {
					return err
				}
			}
			if li.floor == 0 && lg.h.lines <= 2*lg.h.live+16 {
				return nil
			}
			dropBelow(lg.h, li.floor)
			if len(lg.h.changes) == 0 {
				return lg.remove()
			}
			return lg.rewrite()
		})
		if err != nil {
			return err
		}
	}

	for name := range sizes {
		if refs[name] == 0 {
			_ = unix.Unlinkat(d.blobs.Fd(), name, 0)
			s.held.drop(name)
		}
	}
	s.bytes.Store(total)
	s.changes.Store(int64(count))
	return nil
}

// dropBelow drops from h every change up to floor.
func dropBelow(h *history, floor int64) {
	if floor <= h.floor {
		return
	}
	h.floor = floor
	kept := h.changes[:0]
	for _, c := range h.changes {
		if c.seq > floor {
			kept = append(kept, c)
		} else {
			delete(h.index, changeKey{c.seq, c.path})
			if c.state != dropped {
				h.live--
			}
		}
	}
	clear(h.changes[len(kept):])
	h.changes = kept
}

func hasPending(h *history) bool {
	for _, c := range h.changes {
		if c.state == pending {
			return true
		}
	}
	return false
}

// blobSizes lists blobs/ (removing the temporary files a crash left: under
// the exclusive gc lock nobody is writing one).
func blobSizes(d *folders) (map[string]int64, error) {
	names, err := listNames(d.blobs.Fd())
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(names))
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			_ = unix.Unlinkat(d.blobs.Fd(), name, 0)
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(d.blobs.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			out[name] = st.Size
		}
	}
	return out, nil
}

// listNames lists a folder through a descriptor of its own.
func listNames(dir int) ([]string, error) {
	fd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// Forget forgets session's history (DELETE /sessions/{id}, or its TTL in
// the session store); its kept contents go with the next collection. A
// session without a history is no error.
func (s *Store) Forget(ctx context.Context, session string) error {
	d, err := s.folders(false)
	if err != nil || d == nil {
		return err
	}
	s.touched.forget(session)
	err = s.withLog(ctx, d, session, func(lg *sessionLog) error {
		if lg.fd < 0 {
			return nil
		}
		s.changes.Add(-int64(lg.h.live))
		return lg.remove()
	})
	if err != nil {
		return ioErr("forget", err)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// Touch notes that session is in use, so its history does not expire
// (Options.TTL) while the session lives: at most one utimensat of its log
// per TTL/16.
func (s *Store) Touch(session string) {
	if s.opt.TTL <= 0 {
		return
	}
	// Due first: in a root with no private folder yet, folders(false) is a
	// failing openat, which every read would otherwise pay.
	now := s.opt.Now()
	if !s.touched.due(session, now, s.opt.TTL/16) {
		return
	}
	d, err := s.folders(false)
	if err != nil || d == nil {
		return
	}
	ts := unix.NsecToTimespec(now.UnixNano())
	_ = unix.UtimesNanoAt(d.sessions.Fd(), logName(session), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
