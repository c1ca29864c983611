package fs

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSweepInterval is how often a provider sweeps its private tmp folder
// when LocalOptions.SweepInterval is zero.
const DefaultSweepInterval = time.Minute

const (
	// sweepBatch is how many names one sweep batch reads and tests.
	sweepBatch = 1024
	// sweepStartBatches bounds the sweep NewLocal does: enough for the
	// debris of any plausible run of crashes, never an unbounded pause.
	sweepStartBatches = 64
)

// SweepCounts is what one sweep did: temporary files removed (no live
// process held them) and left in place because a live process holds them.
type SweepCounts struct {
	Removed, InUse int
}

// StartupSweep reports what the sweep NewLocal did found (zero when the
// private folder did not exist yet).
func (l *Local) StartupSweep() SweepCounts { return l.startupSweep }

// startSweeper runs one sweep batch every interval until Close.
func (l *Local) startSweeper(every time.Duration) {
	if every < 0 {
		return
	}
	if every == 0 {
		every = DefaultSweepInterval
	}
	l.stopSweep, l.swept = make(chan struct{}), make(chan struct{})
	go func(stop <-chan struct{}) {
		defer close(l.swept)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if p, _ := l.private.get(false); p != nil {
				l.sweep(p, 1)
			}
		}
	}(l.stopSweep)
}

// sweep removes the temporary files in the private tmp folder that no live
// process is writing, reading at most batches*sweepBatch names. Age plays no
// part: a file is removed only when its flock can be taken, which proves its
// writer is gone.
func (l *Local) sweep(p *privateFolder, batches int) (c SweepCounts) {
	// A descriptor of its own, so the listing offset is not shared.
	fd, err := unix.Openat(p.tmp, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return c
	}
	d := os.NewFile(uintptr(fd), privateTmp)
	defer d.Close()
	for range batches {
		names, err := d.Readdirnames(sweepBatch)
		for _, name := range names {
			if ok, _ := filepath.Match(tempGlob, name); ok {
				switch sweepOne(p.tmp, name) {
				case sweptRemoved:
					c.Removed++
				case sweptInUse:
					c.InUse++
				}
			}
		}
		if err == io.EOF || err != nil {
			break
		}
	}
	return c
}

// swept is what sweepOne did with one name.
type swept int

const (
	sweptSkipped swept = iota // not a regular file, gone, or not ours to judge
	sweptInUse                // a live process holds its flock
	sweptRemoved
)

// sweepOne removes dir/name when no process holds its flock. Holding the
// flock ourselves while we check that the name still names the file we
// locked (a live writer may have published it and let go) and unlink it
// means no writer can take it back in between: a writer that created the
// file just before we locked it finds it unlinked and starts again
// (createLocked).
func sweepOne(dir int, name string) swept {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err == unix.EACCES { // a file staged with a mode that denies reading
		fd, err = unix.Openat(dir, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	}
	if err != nil {
		return sweptSkipped
	}
	defer unix.Close(fd)
	var st, cur unix.Stat_t
	if unix.Fstat(fd, &st) != nil || !isRegular(&st) {
		return sweptSkipped
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return sweptInUse // a live writer holds it
	}
	if unix.Fstatat(dir, name, &cur, unix.AT_SYMLINK_NOFOLLOW) != nil || cur.Dev != st.Dev || cur.Ino != st.Ino {
		return sweptSkipped // published or removed meanwhile
	}
	if unix.Unlinkat(dir, name, 0) != nil {
		return sweptSkipped
	}
	return sweptRemoved
}
