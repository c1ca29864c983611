package events

import (
	"errors"
	"flag"
	"time"
)

// The change feed's defaults, as its flags and a zero Config take them.
const (
	DefaultMaxSubscribers = 64
	DefaultMaxWatches     = 8192
	DefaultHeartbeat      = 15 * time.Second
)

// Settings are the change feed's flags (docs/events.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). A zero field
// that must be positive takes its default (WithDefaults); Enabled and
// MaxWatches mean what their zero means: off, and no external changes.
type Settings struct {
	Enabled        bool          // --events
	MaxSubscribers int           // --events-max-subscribers
	MaxWatches     int           // --events-max-watches; 0 = report no external changes
	Heartbeat      time.Duration // --events-heartbeat
}

// RegisterFlags binds s to the change feed's flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.BoolVar(&s.Enabled, "events", true, "serve the change feed GET /events (docs/events.md)")
	fl.IntVar(&s.MaxSubscribers, "events-max-subscribers", DefaultMaxSubscribers, "GET /events streams open at once (more get 503 TOO_MANY_SUBSCRIBERS)")
	fl.IntVar(&s.MaxWatches, "events-max-watches", DefaultMaxWatches, "folders watched for external changes (0 = report no external changes)")
	fl.DurationVar(&s.Heartbeat, "events-heartbeat", DefaultHeartbeat, "comment sent on an idle GET /events stream")
}

// WithDefaults gives each zero field that must be positive its default.
func (s Settings) WithDefaults() Settings {
	if s.MaxSubscribers == 0 {
		s.MaxSubscribers = DefaultMaxSubscribers
	}
	if s.Heartbeat == 0 {
		s.Heartbeat = DefaultHeartbeat
	}
	return s
}

// Validate reports the first value no feed can run with, in its flag's
// words.
func (s Settings) Validate() error {
	switch {
	case s.MaxSubscribers <= 0:
		return errors.New("--events-max-subscribers must be positive")
	case s.Heartbeat <= 0:
		return errors.New("--events-heartbeat must be positive")
	case s.MaxWatches < 0:
		return errors.New("--events-max-watches must not be negative")
	}
	return nil
}
