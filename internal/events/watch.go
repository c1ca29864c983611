package events

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// WatchConfig configures a Watcher. Zero fields take the defaults in
// brackets.
type WatchConfig struct {
	// Root is the workspace root; it is canonicalized (symlinks resolved)
	// once, as the provider does, and every reported path is relative to it.
	Root string
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
}

// Watcher publishes changes made under the root outside the API, through
// inotify (github.com/fsnotify/fsnotify). Folders are watched one by one
// (inotify is not recursive): all of them at start, new ones as they appear.
// It never follows a symlink, so nothing outside the root is watched or
// reported; the server's private folder (fs.PrivateDir) and staged temporary
// files (fs.TempGlob) are ignored. When the kernel drops notifications it
// publishes an overflow event and watches again whatever folders it missed.
type Watcher struct {
	hub  *Hub
	cfg  WatchConfig
	root string
	log  *slog.Logger
	obs  observer
	fsw  *fsnotify.Watcher

	// Owned by the run goroutine.
	dirs         map[string]dirID // watched folders, root-relative ("" = the root)
	pending      map[string]*change
	order        []string // pending paths, first seen first
	timer        *time.Timer
	limitWarned  bool
	pauseForTest chan chan struct{}

	stop chan struct{}
	done chan struct{}
}

// dirID identifies a watched folder's inode, to notice it was swapped.
type dirID struct{ dev, ino uint64 }

// change is a path's gathered changes, not yet published. kind "" means
// they cancelled out (created, then removed).
type change struct {
	kind    Type
	at      time.Time
	retries int // times it waited for a mutation's event (see publish)
}

// NewWatcher watches every folder under cfg.Root and starts publishing
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
	abs, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("events: root %q: %w", cfg.Root, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("events: root %q: %w", cfg.Root, err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	w := &Watcher{
		hub: hub, cfg: cfg, root: root, log: cfg.Logger, obs: observer{cfg.Metrics}, fsw: fsw,
		dirs:         map[string]dirID{},
		pending:      map[string]*change{},
		timer:        time.NewTimer(time.Hour),
		pauseForTest: make(chan chan struct{}),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	w.timer.Stop()
	if !w.watchTree("", false) {
		fsw.Close()
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
	return w.fsw.Close()
}

func (w *Watcher) run() {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.overflow()
			} else {
				w.log.Warn("events: watcher error", "err", err)
			}
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
func (w *Watcher) handle(ev fsnotify.Event) {
	rel, ok := w.rel(ev.Name)
	if !ok || rel == "" || ignored(rel) {
		return
	}
	// An event from a watch we already dropped (its folder moved away, maybe
	// out of the root) is not about the root any more.
	if _, watched := w.dirs[parent(rel)]; !watched {
		return
	}
	switch {
	case ev.Has(fsnotify.Remove):
		w.unwatchTree(rel)
		w.note(rel, TypeRemoved)
	case ev.Has(fsnotify.Rename):
		w.unwatchTree(rel)
		w.note(rel, TypeRenamed)
	case ev.Has(fsnotify.Create):
		w.note(rel, TypeCreated)
		if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
			// Entries made before the watch was in place are reported
			// from a listing.
			w.watchTree(rel, true)
		}
	case ev.Has(fsnotify.Write):
		w.note(rel, TypeModified)
	}
	// Chmod alone (touch, chmod) changes no content: not reported.
}

// rel is name relative to the root, when it is the root or under it.
func (w *Watcher) rel(name string) (string, bool) {
	if name == w.root {
		return "", true
	}
	r, ok := strings.CutPrefix(name, w.root+"/")
	return r, ok
}

func (w *Watcher) abs(rel string) string {
	if rel == "" {
		return w.root
	}
	return w.root + "/" + rel
}

// ignored reports paths the feed never shows: the server's private folder
// and its staged temporary files (their publication shows as the target's
// own event).
func ignored(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	if first == fs.PrivateDir {
		return true
	}
	m, _ := path.Match(fs.TempGlob, path.Base(rel))
	return m
}

func parent(rel string) string {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ""
	}
	return rel[:i]
}

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
		ok := w.watchDir(d)
		if first {
			first = false
			if !ok {
				return false
			}
		}
		if !ok {
			continue
		}
		w.list(d, func(name string, isDir bool) {
			child := path.Join(d, name)
			if ignored(child) {
				return
			}
			if report {
				w.note(child, TypeCreated)
			}
			if isDir {
				stack = append(stack, child)
			}
		})
	}
	return true
}

// watchDir adds one inotify watch on the folder rel. inotify resolves the
// path it is given and follows a symlink, so the folder is checked with
// lstat before and after: a folder swapped for a link in between loses its
// watch again.
func (w *Watcher) watchDir(rel string) bool {
	if _, ok := w.dirs[rel]; ok {
		return true
	}
	if len(w.dirs) >= w.cfg.MaxWatches {
		w.limitHit(rel, nil)
		return false
	}
	abs := w.abs(rel)
	before, ok := lstatDir(abs)
	if !ok {
		return false
	}
	if err := w.fsw.Add(abs); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			w.limitHit(rel, err)
		} else if !errors.Is(err, syscall.ENOENT) {
			w.log.Debug("events: cannot watch a folder", "path", rel, "err", err)
		}
		return false
	}
	if after, ok := lstatDir(abs); !ok || after != before {
		_ = w.fsw.Remove(abs)
		return false
	}
	w.dirs[rel] = before
	w.obs.watching(len(w.dirs))
	return true
}

func lstatDir(abs string) (dirID, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return dirID{}, false
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// list calls fn for each entry of the folder rel, reading it in batches so a
// huge folder costs a batch of memory at a time.
func (w *Watcher) list(rel string, fn func(name string, isDir bool)) {
	f, err := os.Open(w.abs(rel))
	if err != nil {
		return
	}
	defer f.Close()
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
	for d := range w.dirs {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			_ = w.fsw.Remove(w.abs(d))
			delete(w.dirs, d)
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
	if (c.kind == TypeCreated || c.kind == TypeModified) && w.cfg.Version != nil {
		own, echo, pending := w.hub.ownEcho(rel, func() (string, bool) { return w.cfg.Version(rel) })
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
	for d, id := range w.dirs {
		if now, ok := lstatDir(w.abs(d)); !ok || now != id {
			w.unwatchTree(d)
		}
	}
	if _, ok := w.dirs[""]; !ok {
		w.log.Error("events: the workspace root is no longer watched")
		return
	}
	w.watchTree("", false)
}
