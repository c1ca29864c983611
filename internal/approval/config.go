package approval

import (
	"errors"
	"flag"
	"strconv"
	"time"
)

// The defaults of --max-approvals and --approval-timeout, and of a zero
// Config.
const (
	DefaultMax     = 32
	DefaultTimeout = 5 * time.Minute
)

// Settings are the approvals' flags (docs/sandbox.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). A zero bound
// takes its default (WithDefaults); Deny is --approvals=false, so the zero
// Settings let escalations ask a person as the flag's default does.
type Settings struct {
	Deny    bool          // --approvals=false: every escalation is denied
	Timeout time.Duration // --approval-timeout
	Max     int           // --max-approvals
}

// RegisterFlags binds s to the approvals' flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	s.Deny = false // the default, as the flag package's own Var functions set it
	fl.Var((*allowed)(&s.Deny), "approvals", "let escalations ask a person through GET/POST /approvals (false: every escalation is denied)")
	fl.DurationVar(&s.Timeout, "approval-timeout", DefaultTimeout, "how long an escalated call waits for a person's decision")
	fl.IntVar(&s.Max, "max-approvals", DefaultMax, "approvals pending at once; past it an escalation answers 503 TOO_MANY_APPROVALS")
}

// WithDefaults gives each zero bound its default.
func (s Settings) WithDefaults() Settings {
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.Max == 0 {
		s.Max = DefaultMax
	}
	return s
}

// Validate reports the first bound no store can keep, in its flag's words.
func (s Settings) Validate() error {
	switch {
	case s.Timeout <= 0:
		return errors.New("--approval-timeout must be positive")
	case s.Max <= 0:
		return errors.New("--max-approvals must be positive")
	}
	return nil
}

// allowed is --approvals over Settings.Deny, its negation: a boolean flag
// like the flag package's own (its default true, its parse error the same).
type allowed bool

func (a *allowed) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("parse error") // as the flag package's boolean flags say
	}
	*a = allowed(!b)
	return nil
}

func (a *allowed) String() string {
	if a == nil {
		return "true"
	}
	return strconv.FormatBool(!bool(*a))
}

func (a *allowed) Get() any { return !bool(*a) }

// IsBoolFlag lets --approvals stand alone, as a boolean flag.
func (a *allowed) IsBoolFlag() bool { return true }
