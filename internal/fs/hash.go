package fs

import (
	"context"
	"encoding/hex"
	"os"

	"github.com/zeebo/xxh3"
)

// The content hash is XXH3-128 (github.com/zeebo/xxh3): non-cryptographic
// (nobody gains by forging a collision with their own file: they could
// write it), 128 bits so an accidental collision is out of reach, and
// streaming at memory speed, so hashing every read costs little beside the
// read's own pass (docs/performance.md).

func hashOf(h *xxh3.Hasher) Hash {
	sum := h.Sum128().Bytes()
	return Hash(hex.EncodeToString(sum[:]))
}

// HashBytes is the Hash of b.
func HashBytes(b []byte) Hash {
	h := xxh3.New()
	h.Write(b)
	return hashOf(h)
}

// HashString is the Hash of s.
func HashString(s string) Hash {
	h := xxh3.New()
	h.WriteString(s)
	return hashOf(h)
}

// hashFile hashes f's whole content from offset 0.
func hashFile(ctx context.Context, f *os.File) (Hash, error) {
	h := xxh3.New()
	err := readChunks(ctx, f, func(chunk []byte) error {
		h.Write(chunk)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hashOf(h), nil
}

// sameBytes reports whether f, at another version than the one seen, still
// holds exactly the bytes seen (their hash is seen). An unknown hash never
// matches: then the versions decide.
func sameBytes(ctx context.Context, f *os.File, seen Hash) bool {
	if seen == "" {
		return false
	}
	h, err := hashFile(ctx, f)
	return err == nil && h == seen
}
