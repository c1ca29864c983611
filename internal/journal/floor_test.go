package journal

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkSyncFloor measures, at the system calls alone, what a change's
// journal entry adds to the file's own durable replace (docs/performance.md,
// "The floor under the journal's sync (issue 45)"): each iteration times
// one bare replace (write a temporary file of 60 KiB, fdatasync it, rename
// it over the file, fsync the folder) and one replace with the entry of a
// change with checkpoints (the 60 KiB kept content and its lines), and
// reports the ratio of their sums as x-vs-none. The variants:
//   - none: no entry (the instrument's own bias, near 1);
//   - after: the entry's Commit after the folder's sync;
//   - early: the Commit started at the temporary file's sync, beside it,
//     the rename and the folder's sync (the server without the audit log);
//   - beside: the Commit started at the rename, beside the folder's sync
//     (the server with the audit log, whose line is written there);
//   - overwrite, overwrite-early: as beside and early, the entry written
//     over bytes a segment already holds (a recycled or zeroed segment: no
//     size or extent to sync), the best any segment scheme can do.
func BenchmarkSyncFloor(b *testing.B) {
	content := bytes.Repeat([]byte("0123456789abcdef"), 60<<10/16)
	for _, v := range []string{"none", "after", "early", "beside", "overwrite", "overwrite-early"} {
		b.Run(v, func(b *testing.B) {
			dir := b.TempDir()
			d := openDir(b, dir)
			j, _, err := Open(d, Options{SegmentBytes: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			var over *overwriter
			if strings.HasPrefix(v, "overwrite") {
				over = newOverwriter(b, filepath.Join(dir, "recycled"), int64(b.N+1)*int64(len(content)+1024))
			}
			entry := func() error {
				if over != nil {
					return over.append(content)
				}
				r, err := j.Reserve()
				if err != nil {
					return err
				}
				var e Entry
				e.Add(KindBlob, content)
				e.Add(KindLog, []byte("history.log"), []byte("id"), bytes.Repeat([]byte("h"), 200))
				return r.Commit(&e)
			}
			async := func(f func() error) func() error {
				done := make(chan error, 1)
				go func() { done <- f() }()
				return func() error { return <-done }
			}
			var early, atRename func() func() error
			switch v {
			case "beside", "overwrite":
				atRename = func() func() error { return async(entry) }
			case "early", "overwrite-early":
				early = func() func() error { return async(entry) }
			}
			bare := func(i int) time.Duration {
				t := time.Now()
				replace(b, d, "none-"+strconv.Itoa(i%8), content, nil, nil)
				return time.Since(t)
			}
			recorded := func(i int) time.Duration {
				t := time.Now()
				replace(b, d, "with-"+strconv.Itoa(i%8), content, early, atRename)
				if v == "after" {
					if err := entry(); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(t)
			}
			var none, with time.Duration
			b.ResetTimer()
			for i := range b.N {
				// Each goes first every other round: the disk's state after
				// one is the other's start.
				if i%2 == 0 {
					none += bare(i)
					with += recorded(i)
				} else {
					with += recorded(i)
					none += bare(i)
				}
			}
			b.ReportMetric(float64(with)/float64(none), "x-vs-none")
		})
	}
}

// replace durably replaces name in d by content, as the server does
// (docs/journal.md). early and atRename, when given, start work at the
// temporary file's sync and at the rename, and return their waits, run
// after the folder's sync.
func replace(b *testing.B, d dirFolder, name string, content []byte, early, atRename func() func() error) {
	tmp := name + ".tmp"
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := WriteFull(fd, content); err != nil {
		b.Fatal(err)
	}
	var waits []func() error
	if early != nil {
		waits = append(waits, early())
	}
	if err := unix.Fdatasync(fd); err != nil {
		b.Fatal(err)
	}
	unix.Close(fd)
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		b.Fatal(err)
	}
	if atRename != nil {
		waits = append(waits, atRename())
	}
	if err := d.Sync(); err != nil {
		b.Fatal(err)
	}
	for _, w := range waits {
		if err := w(); err != nil {
			b.Fatal(err)
		}
	}
}

// overwriter appends frames over a file written and synced beforehand.
type overwriter struct {
	fd  int
	off int64
}

func newOverwriter(b *testing.B, path string, size int64) *overwriter {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := WriteFull(fd, zeros); err != nil {
			b.Fatal(err)
		}
	}
	if err := unix.Fsync(fd); err != nil {
		b.Fatal(err)
	}
	return &overwriter{fd: fd}
}

func (o *overwriter) append(p []byte) error {
	n, err := unix.Pwrite(o.fd, p, o.off)
	if err != nil {
		return err
	}
	o.off += int64(n)
	return unix.Fdatasync(o.fd)
}
