package identity

import (
	"errors"
	"flag"
	"strings"
	"time"
	"unicode"
)

// Settings are the identities' flags (docs/identity.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). Issuer ""
// accepts no access tokens. --oauth-issuer's need of --public-url is the
// builder's check, which owns the public URL.
type Settings struct {
	Issuer string // --oauth-issuer ("" = off)
	// Audience is --oauth-audience as given: comma-separated aud values
	// ("" = the defaults of the public URL, DefaultAudiences).
	Audience string
	// No flag sets these: the binary keeps their defaults (Options), tests
	// shorten them.
	Leeway     time.Duration // clock skew allowed on a token's exp and nbf
	MinRefresh time.Duration // least time between two fetches of the issuer's keys
}

// RegisterFlags binds s to the identities' flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.StringVar(&s.Issuer, "oauth-issuer", "", "URL of the OAuth 2.1 authorization server whose JWT access tokens this server accepts (needs --public-url; --token still works beside it); sessions, approvals, events and changes then belong to each token's subject (docs/identity.md)")
	fl.StringVar(&s.Audience, "oauth-audience", "", "comma-separated aud values that name this server in an access token (default: --public-url and --public-url/mcp)")
}

// Validate reports a setting that names no issuer where it needs one.
func (s Settings) Validate() error {
	// An audience list of commas and spaces alone names none.
	named := strings.TrimFunc(s.Audience, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) != ""
	if s.Issuer == "" && named {
		return errors.New("--oauth-audience needs --oauth-issuer")
	}
	return nil
}
