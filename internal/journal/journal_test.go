package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

type dirFolder struct{ fd int }

func (d dirFolder) Fd() int     { return d.fd }
func (d dirFolder) Sync() error { return unix.Fsync(d.fd) }

func openDir(t testing.TB, path string) dirFolder {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return dirFolder{fd}
}

func commit(t testing.TB, j *Journal, recs ...Record) {
	t.Helper()
	r, err := j.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	var e Entry
	for _, rec := range recs {
		e.Add(rec.Kind, rec.Parts...)
	}
	if err := r.Commit(&e); err != nil {
		t.Fatal(err)
	}
}

// abandon drops j as a SIGKILL would: its segment and spare stay, their
// locks go.
func abandon(j *Journal) {
	unix.Close(j.seg.fd)
	if j.spare != nil {
		unix.Close(j.spare.fd)
	}
}

// TestOrphansReplayedInOrder: the entries of a process that died are
// found by the next Open, whole, in order; a torn last frame (an append a
// crash cut) is left out; a live process's segment is not touched.
func TestOrphansReplayedInOrder(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	dead, orphans, err := Open(d, Options{})
	if err != nil || len(orphans) != 0 {
		t.Fatal(orphans, err)
	}
	commit(t, dead, Record{KindLog, [][]byte{[]byte("a.log"), []byte("id"), []byte("line 1\n")}}, Record{KindAudit, [][]byte{[]byte("x")}})
	commit(t, dead, Record{KindBlob, [][]byte{[]byte("content")}})
	// A torn frame: its length promises more than the file holds.
	if _, err := unix.Pwrite(dead.seg.fd, []byte{200, 0, 0, 0, 1, 2, 3, 4, 'L'}, dead.seg.size); err != nil {
		t.Fatal(err)
	}
	live, orphans, err := Open(d, Options{})
	if err != nil || len(orphans) != 0 {
		t.Fatal(orphans, err)
	}
	defer live.Close()
	commit(t, live, Record{KindBlob, [][]byte{[]byte("live")}})
	abandon(dead)

	j, orphans, err := Open(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(orphans) != 1 {
		t.Fatalf("orphans: %d, want the dead process's one", len(orphans))
	}
	got := fmt.Sprintf("%q", orphans[0].Records)
	want := `[{'L' ["a.log" "id" "line 1\n"]} {'A' ["x"]} {'B' ["content"]}]`
	if got != want {
		t.Fatalf("records:\n got %s\nwant %s", got, want)
	}
	if err := j.Retire(orphans[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, orphans[0].Name)); !os.IsNotExist(err) {
		t.Fatalf("retired segment still there: %v", err)
	}
}

// TestConcurrentEntriesShareSyncs: 64 commits released at once are all on
// disk when each returns, with far fewer fdatasyncs than entries.
func TestConcurrentEntriesShareSyncs(t *testing.T) {
	d := openDir(t, t.TempDir())
	j, _, err := Open(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var inSync atomic.Int32
	j.beforeSync = func() { inSync.Add(1) }
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			commit(t, j, Record{KindAudit, [][]byte{[]byte(fmt.Sprint(i))}})
		}()
	}
	close(start)
	wg.Wait()
	st := j.Stats()
	if st.Entries != 64 || st.Syncs > 32 {
		t.Fatalf("stats %+v: want 64 entries in at most 32 syncs", st)
	}
	recs, err := readSegment(j.seg.fd, j.seg.seed)
	if err != nil || len(recs) != 64 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	t.Logf("64 entries, %d fdatasyncs", st.Syncs)
	j.Close()
}

// TestSealBoundsTheSegment: past SegmentBytes a new segment takes the
// appends, the Sealer's sync runs, and the old segment is kept as the
// spare for the next seal or removed, so a live journal holds two segments
// at most once the seal ends, and none after Close.
func TestSealBoundsTheSegment(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	j, _, err := Open(d, Options{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var synced atomic.Int32
	j.Seal(func() func() error { return func() error { synced.Add(1); return nil } })
	for range 20 {
		commit(t, j, Record{KindBlob, [][]byte{bytes.Repeat([]byte("x"), 1000)}})
	}
	j.retiring.Wait()
	if j.Stats().Seals == 0 || synced.Load() == 0 {
		t.Fatalf("no seal: %+v, synced %d", j.Stats(), synced.Load())
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(names) != 2 {
		t.Fatalf("segments %v, want the one written and the spare", names)
	}
	j.Close()
	if names, _ := filepath.Glob(filepath.Join(dir, "*.wal")); len(names) != 0 {
		t.Fatalf("after Close: %v, want none", names)
	}
}

// TestRecycledSegmentHidesItsPast: a sealed segment is reused for a later
// seal (same file, new name), and after a crash only the entries written
// since it was reused are read from it: its older frames, still on disk
// past the new ones, fail the checksum that covers the new salt.
func TestRecycledSegmentHidesItsPast(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	j, _, err := Open(d, Options{SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint64]bool{}
	inode := func() {
		var st unix.Stat_t
		if err := unix.Fstat(j.seg.fd, &st); err != nil {
			t.Fatal(err)
		}
		inodes[st.Ino] = true
	}
	var seg *segment
	var last []string // the entries of the segment being written
	for i := 0; j.Stats().Recycled < 3 || len(last) < 3; i++ {
		if i > 1000 {
			t.Fatalf("no recycling: %+v", j.Stats())
		}
		rec := fmt.Sprintf("entry %04d", i) // one size: old frames start where new ones end
		commit(t, j, Record{KindBlob, [][]byte{[]byte(rec), bytes.Repeat([]byte("x"), 1000)}})
		if seg == nil {
			seg = j.seg
			inode()
		}
		if j.seg == seg {
			last = append(last, rec)
			continue
		}
		// Sealed by this entry, written in the old segment.
		j.retiring.Wait()
		seg, last = j.seg, nil
		inode()
	}
	if len(inodes) > 2 {
		t.Fatalf("%d files for %d seals, want the two recycled", len(inodes), j.Stats().Seals)
	}
	abandon(j)

	j2, orphans, err := Open(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	var got []string
	for _, o := range orphans {
		for _, r := range o.Records {
			got = append(got, string(r.Parts[0]))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(last) {
		t.Fatalf("replayed %q\nwant %q (the entries since the last seal)", got, last)
	}
}

// TestUnsaltedSegmentReplayed: a segment written before recycling
// (<random>.wal, each frame's CRC over its payload alone) is still read.
func TestUnsaltedSegmentReplayed(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	var buf []byte
	for _, p := range []string{"one", "two"} {
		var e Entry
		e.Add(KindAudit, []byte(p))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(e.buf)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(e.buf, castagnoli))
		buf = append(buf, e.buf...)
	}
	if err := os.WriteFile(filepath.Join(dir, "k3x9.wal"), buf, 0o600); err != nil {
		t.Fatal(err)
	}
	j, orphans, err := Open(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(orphans) != 1 || fmt.Sprintf("%q", orphans[0].Records) != `[{'A' ["one"]} {'A' ["two"]}]` {
		t.Fatalf("orphans %+v", orphans)
	}
}
