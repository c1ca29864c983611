package console

import "flag"

// Settings are the console's flags (docs/console.md), registered by
// RegisterFlags with their defaults, the one place each is written
// (docs/architecture.md, "Where each kind of change goes"). Enabled false
// serves no console (--ui=false), as the zero Settings do.
type Settings struct {
	Enabled  bool   // --ui
	ClientID string // --ui-client-id: the OAuth client the console signs people in as
}

// RegisterFlags binds s to the console's flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.BoolVar(&s.Enabled, "ui", true, "serve the web console at /ui/: approvals, the change feed, changes and revert, files, the server's state (docs/console.md)")
	fl.StringVar(&s.ClientID, "ui-client-id", "", "with --oauth-issuer, the OAuth client id the console signs people in as (authorization code with PKCE; its redirect URI is <public-url>/ui/)")
}
