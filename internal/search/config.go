package search

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// Settings are glob's and grep's flags (docs/search.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). A zero field
// takes its default (WithDefaults), as New does.
type Settings struct {
	RgPath        string        // --rg-path ("" = rg on PATH)
	Timeout       time.Duration // --search-timeout
	MaxConcurrent int           // --max-searches
	Sandbox       string        // --search-sandbox: require or best-effort; also the checkers' (docs/diagnostics.md)
}

// RegisterFlags binds s to the search flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.StringVar(&s.RgPath, "rg-path", "", "ripgrep binary for glob and grep (default: rg on PATH)")
	fl.DurationVar(&s.Timeout, "search-timeout", DefaultTimeout, "glob and grep time limit")
	fl.IntVar(&s.MaxConcurrent, "max-searches", DefaultMaxConcurrent, "glob and grep calls running at once")
	fl.StringVar(&s.Sandbox, "search-sandbox", string(sandbox.Require), "confinement of rg by Landlock: require (glob and grep are unavailable without it) or best-effort (run rg unconfined without it)")
}

// WithDefaults gives each zero field its default.
func (s Settings) WithDefaults() Settings {
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.MaxConcurrent == 0 {
		s.MaxConcurrent = DefaultMaxConcurrent
	}
	if s.Sandbox == "" {
		s.Sandbox = string(sandbox.Require)
	}
	return s
}

// Validate reports the first value search cannot run with, in its flag's
// words.
func (s Settings) Validate() error {
	switch {
	case s.MaxConcurrent <= 0:
		return errors.New("--max-searches must be positive")
	case s.Timeout <= 0:
		return errors.New("--search-timeout must be positive")
	case s.Sandbox != string(sandbox.Require) && s.Sandbox != string(sandbox.BestEffort):
		return fmt.Errorf("--search-sandbox must be require or best-effort, not %q", s.Sandbox)
	}
	return nil
}

// Config is the Searcher's Config of these settings.
func (s Settings) Config() Config {
	return Config{RgPath: s.RgPath, Timeout: s.Timeout, MaxConcurrent: s.MaxConcurrent, Sandbox: sandbox.Requirement(s.Sandbox)}
}
