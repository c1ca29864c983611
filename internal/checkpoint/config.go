package checkpoint

import (
	"errors"
	"flag"
	"fmt"
)

// Settings are the checkpoints' flags (docs/checkpoints.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). A zero bound
// takes its default (WithDefaults); Enabled false is --checkpoints=false.
type Settings struct {
	Enabled      bool  // --checkpoints
	Bytes        int64 // --checkpoint-bytes
	MaxFileBytes int64 // --checkpoint-max-file-bytes
}

// RegisterFlags binds s to the checkpoints' flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.BoolVar(&s.Enabled, "checkpoints", true, "keep every session's change history, so its changes can be reverted (docs/checkpoints.md)")
	fl.Int64Var(&s.Bytes, "checkpoint-bytes", DefaultBytes, "bytes of the contents the checkpoints keep, all sessions together; the oldest go first")
	fl.Int64Var(&s.MaxFileBytes, "checkpoint-max-file-bytes", DefaultMaxFileBytes, "largest content a checkpoint keeps; a change that replaced a larger file is not revertible")
}

// WithDefaults gives each zero bound its default, as Open does: a zero
// MaxFileBytes is the default or Bytes, the smaller.
func (s Settings) WithDefaults() Settings {
	if s.Bytes == 0 {
		s.Bytes = DefaultBytes
	}
	if s.MaxFileBytes == 0 {
		s.MaxFileBytes = min(DefaultMaxFileBytes, s.Bytes)
	}
	return s
}

// Validate reports the first bound no store can keep, in its flag's words.
func (s Settings) Validate() error {
	switch {
	case s.Bytes <= 0:
		return errors.New("--checkpoint-bytes must be positive")
	case s.MaxFileBytes <= 0:
		return errors.New("--checkpoint-max-file-bytes must be positive")
	case s.MaxFileBytes > s.Bytes:
		return fmt.Errorf("--checkpoint-max-file-bytes (%d) must not exceed --checkpoint-bytes (%d): the largest kept file must fit in the bound of all of them", s.MaxFileBytes, s.Bytes)
	}
	return nil
}
