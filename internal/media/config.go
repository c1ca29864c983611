package media

import (
	"flag"
	"fmt"
)

// The bounds of --read-image-max-pixels and --read-image-max-bytes: a side
// longer than any model takes, and too few bytes for any picture
// (docs/media.md).
const (
	MaxImageSide  = 16384
	MinImageBytes = 1024
)

// RegisterFlags binds l to the image read's flags with their defaults, the
// one place each is written (docs/architecture.md, "Where each kind of
// change goes").
func (l *ImageLimits) RegisterFlags(fl *flag.FlagSet) {
	fl.IntVar(&l.MaxSide, "read-image-max-pixels", DefaultMaxSide, "long side, in pixels, of the picture an image read sends (larger images are scaled down; docs/media.md)")
	fl.Int64Var(&l.MaxBytes, "read-image-max-bytes", DefaultMaxBytes, "encoded bytes of the picture an image read sends at most (larger ones are re-encoded or scaled down)")
}

// WithDefaults gives each zero limit its default.
func (l ImageLimits) WithDefaults() ImageLimits {
	if l.MaxSide == 0 {
		l.MaxSide = DefaultMaxSide
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Validate reports a limit out of its bounds, in its flag's words.
func (l ImageLimits) Validate() error {
	if l.MaxSide < 1 || l.MaxSide > MaxImageSide {
		return fmt.Errorf("--read-image-max-pixels must be between 1 and %d", MaxImageSide)
	}
	if l.MaxBytes < MinImageBytes || l.MaxBytes > MaxImageFileBytes {
		return fmt.Errorf("--read-image-max-bytes must be between %d and %d", MinImageBytes, MaxImageFileBytes)
	}
	return nil
}
