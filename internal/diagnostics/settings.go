package diagnostics

import (
	"errors"
	"flag"
	"time"
)

// Settings are the diagnostics' flags (docs/diagnostics.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). A zero Timeout
// takes its default (WithDefaults); File "" runs no checkers.
type Settings struct {
	File    string        // --diagnostics: the JSON file of checkers (LoadConfig)
	Timeout time.Duration // --diagnostics-timeout
}

// RegisterFlags binds s to the diagnostics' flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.StringVar(&s.File, "diagnostics", "", "JSON file of checkers (gofmt, shellcheck, a compiler) run after each write and edit of the extended profile; the answer lists only the problems the change introduced (docs/diagnostics.md)")
	fl.DurationVar(&s.Timeout, "diagnostics-timeout", DefaultTimeout, "time limit of the checkers of one write or edit, all together")
}

// WithDefaults gives a zero Timeout its default.
func (s Settings) WithDefaults() Settings {
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	return s
}

// Validate reports a value no checker can run with, in its flag's words.
// The file itself is read and checked by LoadConfig when the server is
// built, since it may change until then.
func (s Settings) Validate() error {
	if s.Timeout <= 0 {
		return errors.New("--diagnostics-timeout must be positive")
	}
	return nil
}
