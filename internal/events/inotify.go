package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// inotify is one inotify instance whose watches are added through folder
// descriptors, not paths (docs/events.md, "Folders moved, removed or
// swapped for a link"). fsnotify, which the feed used before, keys its
// watches by path and cannot: a descriptor's /proc/self/fd/<n> name is
// reused once the descriptor is closed, and its event names come from the
// path a watch was added with.
type inotify struct {
	fd     int
	file   *os.File // fd, read through the runtime poller so Close ends a read
	events chan inEvent
	done   chan struct{} // closed when the reader has returned
}

// inEvent is one inotify event: the watch it is about, what happened, and
// the name of the entry it happened to (empty for the watched folder
// itself).
type inEvent struct {
	wd   int32
	mask uint32
	name string
}

// inotifyMask is what a folder's watch reports: entries made, written,
// removed and moved. Attribute changes are not reported (docs/events.md).
// No IN_DONTFOLLOW: the watch is added through /proc/self/fd/<n>, a magic
// link that must be followed to reach the folder the descriptor holds.
const inotifyMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR

func newInotify(stop <-chan struct{}) (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("events: inotify: %w", err)
	}
	in := &inotify{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), events: make(chan inEvent), done: make(chan struct{})}
	go in.read(stop)
	return in, nil
}

// fdPath is the name through which the kernel reaches exactly the file open
// as fd, whatever has been renamed or replaced since it was opened.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// add watches the folder open as dirfd. The kernel follows the magic link
// to the inode the descriptor holds, never a path, so a folder swapped for
// a symlink after it was opened is not what gets watched. An inode already
// watched keeps its watch descriptor.
func (in *inotify) add(dirfd int) (int32, error) {
	wd, err := unix.InotifyAddWatch(in.fd, fdPath(dirfd), inotifyMask)
	return int32(wd), err
}

// remove drops a watch; the kernel then queues IN_IGNORED for it. A watch
// the kernel dropped already (its folder removed) is no error here.
func (in *inotify) remove(wd int32) {
	_, _ = unix.InotifyRmWatch(in.fd, uint32(wd))
}

// close ends the reader and releases the instance and its watches.
func (in *inotify) close() error {
	err := in.file.Close()
	<-in.done
	return err
}

// read turns the kernel's records into events until the instance is closed
// or stop is. It holds one buffer of them: while nobody takes its events,
// the kernel queues the rest (fs.inotify.max_queued_events) and then
// reports an overflow.
func (in *inotify) read(stop <-chan struct{}) {
	defer close(in.done)
	defer close(in.events)
	buf := make([]byte, 64<<10) // far more than one record (16 bytes + NAME_MAX + 1)
	for {
		n, err := in.file.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				// Nothing else is expected of an inotify read; the feed
				// stops reporting external changes (the caller logs it).
				select {
				case in.events <- inEvent{wd: -1, mask: maskReadFailed}:
				case <-stop:
				}
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			rec := buf[off:n]
			e := inEvent{
				wd:   int32(binary.NativeEndian.Uint32(rec[0:])),
				mask: binary.NativeEndian.Uint32(rec[4:]),
			}
			l := int(binary.NativeEndian.Uint32(rec[12:]))
			if unix.SizeofInotifyEvent+l > len(rec) {
				break // never: the kernel writes whole records
			}
			name := rec[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+l]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i] // the name is padded with NULs
			}
			e.name = string(name)
			off += unix.SizeofInotifyEvent + l
			select {
			case in.events <- e:
			case <-stop:
				return
			}
		}
	}
}

// maskReadFailed marks the event the reader sends when reading failed.
// inotify's masks use the low 16 bits and the top byte.
const maskReadFailed = 1 << 20
