package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// blobChunk is how much of a content is held at a time while it is copied.
const blobChunk = 256 << 10

var chunks = sync.Pool{New: func() any { return new([blobChunk]byte) }}

// errDamaged is a kept content whose bytes no longer have their SHA-256
// (or that is missing).
var errDamaged = errors.New("checkpoint: a kept content is damaged or missing")

// putBlob copies r into blobs/ and reports its SHA-256 (hex, the blob's
// name) and size. It is durable on return: written to a temporary file,
// synced, renamed to its name (unless a blob of that name is there already:
// one copy of each content) and the folder synced. The caller holds the gc
// lock shared until a synced log line references the blob.
func (s *Store) putBlob(ctx context.Context, d *folders, r io.Reader) (sum string, n int64, err error) {
	dir := d.blobs.Fd()
	tmp := ".blob." + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", 0, err
	}
	f := os.NewFile(uintptr(fd), tmp)
	published := false
	defer func() {
		f.Close()
		if !published {
			_ = unix.Unlinkat(dir, tmp, 0)
		}
	}()
	h := sha256.New()
	if n, err = copyChunks(ctx, io.MultiWriter(f, h), r); err != nil {
		return "", 0, err
	}
	sum = hex.EncodeToString(h.Sum(nil))
	var st unix.Stat_t
	if unix.Fstatat(dir, sum, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == n {
		return sum, n, nil // kept already
	}
	if err := unix.Fdatasync(fd); err != nil {
		return "", 0, err
	}
	if err := unix.Renameat(dir, tmp, dir, sum); err != nil {
		return "", 0, err
	}
	published = true
	if err := d.blobs.Sync(); err != nil {
		return "", 0, err
	}
	return sum, n, nil
}

// hashOnly is the SHA-256 (hex) and size of what r reads.
func hashOnly(ctx context.Context, r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := copyChunks(ctx, h, r)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copyChunks copies r to w through a pooled chunk, checking ctx between
// chunks.
func copyChunks(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	c := chunks.Get().(*[blobChunk]byte)
	defer chunks.Put(c)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := r.Read(c[:])
		if m > 0 {
			if _, werr := w.Write(c[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// openBlob opens the blob sum for reading (errDamaged when missing).
func openBlob(d *folders, sum string) (*os.File, error) {
	if len(sum) != 2*sha256.Size {
		return nil, errDamaged
	}
	fd, err := unix.Openat(d.blobs.Fd(), sum, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT || err == unix.ELOOP {
		return nil, errDamaged
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), sum), nil
}

// copyBlob writes the blob sum to w, checking that its bytes still have
// that SHA-256 (errDamaged otherwise): w must not be trusted before it
// returns nil.
func copyBlob(ctx context.Context, d *folders, sum string, w io.Writer) error {
	f, err := openBlob(d, sum)
	if err != nil {
		return err
	}
	defer f.Close()
	return copyChecked(ctx, f, sum, w)
}

// copyChecked copies r to w; errDamaged when its bytes do not have the
// SHA-256 sum.
func copyChecked(ctx context.Context, r io.Reader, sum string, w io.Writer) error {
	h := sha256.New()
	if _, err := copyChunks(ctx, io.MultiWriter(w, h), r); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		return errDamaged
	}
	return nil
}
