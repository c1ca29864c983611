package events

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// WatchConfig configures a Watcher. Zero fields take the defaults in
// brackets.
type WatchConfig struct {
	// Workspace is the provider's: every folder is opened through it, and
	// every reported path is relative to its root, where the file really
	// is (fs.Workspace.Rel), as the executor's own events are.
	Workspace fs.Workspace
	// MaxWatches bounds the folders watched [8192]. Past it (or past the
	// kernel's fs.inotify.max_user_watches) further folders go unwatched,
	// with one warning in the log and toolfs_events_watch_limit_hits_total.
	MaxWatches int
	// Quiet is how long changes to one path are gathered into one event
	// (a create and its writes are one "created") [100ms].
	Quiet time.Duration
	// MaxPending bounds the paths gathered at once; past it they are
	// published at once [4096].
	MaxPending int
	// Version returns the current version of a root-relative file, as the
	// provider computes it (fs.Info.Version). A change whose path and version
	// are those of the last write or edit published for that path is that
	// mutation's echo and is not reported again. nil: never suppress.
	Version func(rel string) (version string, ok bool)
	Logger  *slog.Logger // nil: slog.Default()
	Metrics *Metrics     // nil: no metrics
	// Lease is how long the watcher lease of a Redis hub outlives its
	// holder's last renewal (Watch) [DefaultLease].
	Lease time.Duration
}

// Watcher publishes changes made under the root outside the API, through
// inotify. Folders are watched one by one (inotify is not recursive): all of
// them at start, new ones as they appear. It never follows a symlink, in any
// component of a path: each folder is opened beneath the root by the
// provider (fs.Workspace.OpenBeneath), watched and listed through that
// descriptor, and an event is reported only while its folder is still the
// one at its path, so nothing outside the root is watched or reported
// (docs/events.md, "Folders moved, removed or swapped for a link"). The
// provider's own files (fs.Workspace.IsPrivate) are ignored. When the kernel drops notifications it publishes an overflow
// event and watches again whatever folders it missed.
type Watcher struct {
	hub *Hub
	cfg WatchConfig
	ws  fs.Workspace // every folder is opened through it
	log *slog.Logger
	obs observer
	in  *inotify

	// Owned by the run goroutine.
	dirs         map[string]int32 // watched folders, root-relative ("" = the root) → watch descriptor
	wds          map[int32]folder
	pending      map[string]*change
	order        []string // pending paths, first seen first
	timer        *time.Timer
	limitWarned  bool
	pauseForTest chan chan struct{}

	stop chan struct{}
	done chan struct{}
}

// folder is one watched folder: where it was when it was watched, and its
// inode, to notice it is not there any more.
type folder struct {
	rel string
	id  dirID
}

// dirID identifies a folder's inode.
type dirID struct{ dev, ino uint64 }

// change is a path's gathered changes, not yet published. kind "" means
// they cancelled out (created, then removed).
type change struct {
	kind    Type
	at      time.Time
	retries int // times it waited for a mutation's event (see publish)
}

// NewWatcher watches every folder under the root of cfg.Workspace and starts publishing
// external changes to hub. Close stops it.
func NewWatcher(hub *Hub, cfg WatchConfig) (*Watcher, error) {
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = 8192
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = 100 * time.Millisecond
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workspace == nil {
		return nil, errors.New("events: a watcher needs the provider's Workspace")
	}
	ws, root := cfg.Workspace, cfg.Workspace.Root()
	// Watches are added through /proc/self/fd (inotify.add).
	rootFd, err := ws.OpenBeneath("", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("events: root %q: %w", root, err)
	}
	err = unix.Access(fdPath(rootFd), unix.F_OK)
	unix.Close(rootFd)
	if err != nil {
		return nil, fmt.Errorf("events: watching needs /proc mounted (watches are added through /proc/self/fd): %w", err)
	}
	stop := make(chan struct{})
	in, err := newInotify(stop)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		hub: hub, cfg: cfg, ws: ws, log: cfg.Logger, obs: observer{cfg.Metrics}, in: in,
		dirs:         map[string]int32{},
		wds:          map[int32]folder{},
		pending:      map[string]*change{},
		timer:        time.NewTimer(time.Hour),
		pauseForTest: make(chan chan struct{}),
		stop:         stop,
		done:         make(chan struct{}),
	}
	w.timer.Stop()
	if !w.watchTree("", false) {
		close(stop)
		in.close()
		return nil, fmt.Errorf("events: cannot watch the root %q", root)
	}
	go w.run()
	return w, nil
}

// Close stops watching; pending changes are dropped.
func (w *Watcher) Close() error {
	select {
	case <-w.stop:
		return nil
	default:
	}
	close(w.stop)
	<-w.done
	return w.in.close()
}

func (w *Watcher) run() {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.in.events:
			if !ok {
				return
			}
			w.handle(ev)
		case <-w.timer.C:
			w.flush(false)
		case release := <-w.pauseForTest:
			<-release
		case <-w.stop:
			return
		}
	}
}

// handle turns one inotify event into a gathered change.
func (w *Watcher) handle(ev inEvent) {
	switch {
	case ev.mask&unix.IN_Q_OVERFLOW != 0:
		w.overflow()
		return
	case ev.mask&maskReadFailed != 0:
		w.log.Error("events: reading inotify failed; external changes are no longer reported")
		return
	}
	d, ok := w.wds[ev.wd]
	if !ok {
		return // a watch dropped already (its folder moved away, maybe out of the root)
	}
	if ev.mask&unix.IN_IGNORED != 0 {
		w.unwatchTree(d.rel) // the kernel dropped the watch: its folder is gone
		return
	}
	if ev.name == "" {
		return // about the folder itself: its parent's watch reports it
	}
	rel := path.Join(d.rel, ev.name)
	if w.ignored(rel) || !w.still(d) {
		return
	}
	isDir := ev.mask&unix.IN_ISDIR != 0
	switch {
	case ev.mask&unix.IN_DELETE != 0:
		w.unwatchTree(rel)
		w.note(rel, TypeRemoved)
	case ev.mask&unix.IN_MOVED_FROM != 0:
		w.unwatchTree(rel)
		w.note(rel, TypeRenamed)
	case ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		w.note(rel, TypeCreated)
		if isDir {
			// Entries made before the watch was in place are reported
			// from a listing.
			w.watchTree(rel, true)
		}
	case ev.mask&unix.IN_MODIFY != 0:
		w.note(rel, TypeModified)
	}
}

// still reports whether the watched folder d is still the folder at its
// path, reached from the root without a symlink. An event is about the
// watched inode wherever it is now: after a folder (or one of its parents)
// was renamed, maybe out of the root, and maybe replaced by a symlink, its
// queued events would name entries under a path that no longer leads to
// it. Such a folder's watches are dropped, and its events with them; the
// rename's own events report its new place, listed anew, when that is in
// the root.
func (w *Watcher) still(d folder) bool {
	if d.rel == "" {
		return true // the provider holds the root open: it is always itself
	}
	id, err := w.openedID(d.rel)
	if err == nil && id == d.id {
		return true
	}
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		w.unwatchTree(d.rel)
	}
	// Another failure (out of descriptors) says nothing about the folder:
	// only this event is dropped.
	return false
}

// openedID is the inode of the folder at rel, opened beneath the root.
func (w *Watcher) openedID(rel string) (dirID, error) {
	fd, err := w.ws.OpenBeneath(rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return dirID{}, err
	}
	defer unix.Close(fd)
	return fstatID(fd)
}

func fstatID(fd int) (dirID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return dirID{}, err
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// ignored reports paths the feed never shows: the provider's own files,
// its private folder and its staged temporary files (their publication
// shows as the target's own event).
func (w *Watcher) ignored(rel string) bool { return w.ws.IsPrivate(rel) }

// watchTree watches the folder rel and every folder below it, without
// following symlinks, up to the watch bound. With report, every entry found
// is noted as created (it appeared with its new folder). It reports whether
// rel itself is watched.
func (w *Watcher) watchTree(rel string, report bool) bool {
	stack := []string{rel}
	first := true
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		f := w.watchDir(d)
		if first {
			first = false
			if f == nil {
				return false
			}
		}
		if f == nil {
			continue
		}
		list(f, func(name string, isDir bool) {
			child := path.Join(d, name)
			if w.ignored(child) {
				return
			}
			if report {
				w.note(child, TypeCreated)
			}
			if isDir {
				stack = append(stack, child)
			}
		})
		f.Close()
	}
	return true
}

// watchDir opens the folder rel beneath the root, following no symlink in
// any component (fs.Workspace.OpenBeneath), and watches it through that descriptor:
// what is watched is the folder that was opened, even if rel has been
// swapped for a link since. It returns the open folder, for the caller to
// list and close, or nil when it is not watched.
func (w *Watcher) watchDir(rel string) *os.File {
	fd, err := w.ws.OpenBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
			w.log.Debug("events: cannot open a folder", "path", rel, "err", err)
		}
		return nil
	}
	// The name is the descriptor's magic link, so a lookup the listing
	// makes by name (a filesystem that does not give entry types) reaches
	// this very folder.
	f := os.NewFile(uintptr(fd), fdPath(fd))
	id, err := fstatID(fd)
	if err != nil {
		f.Close()
		return nil
	}
	if wd, ok := w.dirs[rel]; ok {
		if w.wds[wd].id == id {
			return f
		}
		w.unwatchTree(rel) // another folder has taken this path
	}
	if len(w.dirs) >= w.cfg.MaxWatches {
		w.limitHit(rel, nil)
		f.Close()
		return nil
	}
	wd, err := w.in.add(fd)
	if err == nil {
		if old, ok := w.wds[wd]; ok {
			// The same folder, still watched at its old path (its move's
			// events were dropped with its parent): watch it here anew.
			w.unwatchTree(old.rel)
			wd, err = w.in.add(fd)
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			w.limitHit(rel, err)
		} else {
			w.log.Debug("events: cannot watch a folder", "path", rel, "err", err)
		}
		f.Close()
		return nil
	}
	w.dirs[rel] = wd
	w.wds[wd] = folder{rel: rel, id: id}
	w.obs.watching(len(w.dirs))
	return f
}

// list calls fn for each entry of the open folder f, reading it in batches
// so a huge folder costs a batch of memory at a time.
func list(f *os.File, fn func(name string, isDir bool)) {
	for {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			fn(e.Name(), e.Type().IsDir()) // a symlink's type is not a folder
		}
		if err == io.EOF || err != nil {
			return
		}
	}
}

func (w *Watcher) limitHit(rel string, err error) {
	w.obs.watchLimitHit()
	if w.limitWarned {
		return
	}
	w.limitWarned = true
	attrs := []any{"limit", w.cfg.MaxWatches, "watched", len(w.dirs), "first_unwatched", rel}
	if err != nil {
		attrs = append(attrs, "err", err, "hint", "raise fs.inotify.max_user_watches")
	}
	w.log.Warn("events: watch limit reached; external changes in further folders are not reported (raise --events-max-watches)", attrs...)
}

// unwatchTree forgets the folder rel and everything below it (it was removed
// or moved, maybe out of the root).
func (w *Watcher) unwatchTree(rel string) {
	if _, ok := w.dirs[rel]; !ok {
		return
	}
	for d, wd := range w.dirs {
		if d == rel || rel == "" || strings.HasPrefix(d, rel+"/") {
			w.in.remove(wd)
			delete(w.dirs, d)
			delete(w.wds, wd)
		}
	}
	w.obs.watching(len(w.dirs))
}

// note gathers one change of rel.
func (w *Watcher) note(rel string, t Type) {
	if c, ok := w.pending[rel]; ok {
		c.kind = merge(c.kind, t)
		return
	}
	if len(w.pending) >= w.cfg.MaxPending {
		w.flush(true)
	}
	w.pending[rel] = &change{kind: t, at: time.Now()}
	w.order = append(w.order, rel)
	if len(w.order) == 1 {
		w.timer.Reset(w.cfg.Quiet)
	}
}

// merge is what a path's earlier change and a later one amount to.
func merge(prev, next Type) Type {
	switch {
	case prev == "":
		return next
	case prev == TypeCreated && (next == TypeRemoved || next == TypeRenamed):
		return "" // it came and went: nothing to show
	case prev == TypeCreated:
		return TypeCreated
	case (prev == TypeRemoved || prev == TypeRenamed) && (next == TypeCreated || next == TypeModified):
		return TypeModified // replaced in place (an editor's safe save)
	case prev == TypeModified && next == TypeCreated:
		return TypeModified
	}
	return next
}

// flush publishes gathered changes: those older than Quiet, or all.
func (w *Watcher) flush(all bool) {
	now := time.Now()
	i := 0
	for ; i < len(w.order); i++ {
		rel := w.order[i]
		c := w.pending[rel]
		if !all && now.Sub(c.at) < w.cfg.Quiet {
			break
		}
		delete(w.pending, rel)
		w.order[i] = ""
		w.publish(rel, c)
	}
	w.order = slices.DeleteFunc(w.order, func(p string) bool { return p == "" })
	if len(w.order) == 0 {
		w.order = nil
		return
	}
	w.timer.Reset(w.cfg.Quiet - now.Sub(w.pending[w.order[0]].at))
}

func (w *Watcher) publish(rel string, c *change) {
	if c.kind == "" {
		return
	}
	if (c.kind == TypeCreated || c.kind == TypeModified || c.kind == TypeRemoved) && w.cfg.Version != nil {
		version := func() (string, bool) { return w.cfg.Version(rel) }
		if c.kind == TypeRemoved {
			// A delete through the API left its path at removedVersion.
			version = func() (string, bool) {
				if _, there := w.cfg.Version(rel); there {
					return "", false
				}
				return removedVersion, true
			}
		}
		own, echo, pending := w.hub.ownEcho(rel, version)
		if echo {
			return
		}
		// A path written through the tools lately, now at another version:
		// maybe a later write or edit has replaced the file but not yet
		// published its event. Wait one more quiet period (twice at most)
		// before calling the change external.
		// A mutation announced but not yet published (Hub.Expect) is
		// waited for longer: under load its event can lag the rename.
		if own && c.retries < maxEchoRetries || pending && c.retries < maxPendingRetries {
			w.pending[rel] = &change{kind: c.kind, at: time.Now(), retries: c.retries + 1}
			w.order = append(w.order, rel)
			return
		}
	}
	w.hub.Publish(Event{Type: c.kind, Path: rel})
}

// maxEchoRetries bounds the waits of a change to a path written through the
// tools whose version is not the published one.
const maxEchoRetries = 2

// maxPendingRetries bounds the waits for an announced mutation's event (50
// quiet periods: 5 s by default); past it the change is reported.
const maxPendingRetries = 50

// overflow handles lost notifications: what was gathered is published, then
// an overflow event, then folders that appeared or vanished meanwhile are
// watched or forgotten.
func (w *Watcher) overflow() {
	w.obs.overflow()
	w.flush(true)
	w.hub.Publish(Event{Type: TypeOverflow})
	for _, wd := range w.dirs {
		if d, ok := w.wds[wd]; ok {
			w.still(d) // drops the watches of folders no longer at their path
		}
	}
	if _, ok := w.dirs[""]; !ok {
		w.log.Error("events: the workspace root is no longer watched")
		return
	}
	w.watchTree("", false)
}
