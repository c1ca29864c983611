package policy

import (
	"errors"
	"flag"
	"time"
)

// Settings are the read-before-write policy's flags and its sessions'
// bounds (docs/api.md, "Sessions"), registered by RegisterFlags with their
// defaults, the one place each is written (docs/architecture.md, "Where
// each kind of change goes"). A zero bound takes its default
// (WithDefaults); Enabled false is the bare provider (--policy=false). The
// bounds are also the MCP sessions' (docs/mcp.md).
type Settings struct {
	Enabled            bool          // --policy
	TTL                time.Duration // --session-ttl
	MaxSessions        int           // --max-sessions
	MaxPathsPerSession int           // --max-paths-per-session
}

// RegisterFlags binds s to the policy's flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.BoolVar(&s.Enabled, "policy", true, "read-before-write policy (false = bare provider)")
	fl.DurationVar(&s.TTL, "session-ttl", DefaultTTL, "idle time after which a session's observations are forgotten")
	fl.IntVar(&s.MaxSessions, "max-sessions", DefaultMaxSessions, "sessions kept at once (least recently used go first)")
	fl.IntVar(&s.MaxPathsPerSession, "max-paths-per-session", DefaultMaxPathsPerSession, "observations kept per session (least recently used go first)")
}

// WithDefaults gives each zero bound its default.
func (s Settings) WithDefaults() Settings {
	if s.TTL == 0 {
		s.TTL = DefaultTTL
	}
	if s.MaxSessions == 0 {
		s.MaxSessions = DefaultMaxSessions
	}
	if s.MaxPathsPerSession == 0 {
		s.MaxPathsPerSession = DefaultMaxPathsPerSession
	}
	return s
}

// Validate reports the first bound no store can keep, in its flag's words.
func (s Settings) Validate() error {
	switch {
	case s.MaxSessions <= 0:
		return errors.New("--max-sessions must be positive")
	case s.MaxPathsPerSession <= 0:
		return errors.New("--max-paths-per-session must be positive")
	case s.TTL <= 0:
		return errors.New("--session-ttl must be positive")
	}
	return nil
}

// Config is the store's Config of these bounds.
func (s Settings) Config() Config {
	return Config{TTL: s.TTL, MaxSessions: s.MaxSessions, MaxPathsPerSession: s.MaxPathsPerSession}
}
