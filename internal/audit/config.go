package audit

import "flag"

// Settings are the audit log's flag (docs/audit.md), registered by
// RegisterFlags with its default, the one place it is written
// (docs/architecture.md, "Where each kind of change goes").
type Settings struct {
	Path string // --audit-log: "" = no audit log
}

// RegisterFlags binds s to the audit log's flag.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	fl.StringVar(&s.Path, "audit-log", "", "file of one JSON line per write, edit, revert, upload, delete and approval decision, on disk before the call is answered (synced in the journal's entry with --journal); a mutation whose line cannot be written fails with 503 AUDIT_UNAVAILABLE; SIGHUP reopens it (docs/audit.md)")
}
