package tools

import (
	"crypto/sha256"
	"encoding/hex"
)

// SessionKey is the key a session's state lives under (docs/identity.md,
// "What a subject owns"): the id itself when no subject was
// verified, else a digest of the subject joined to the id, so the same id
// named by two subjects is two sessions (their observations, checkpoints
// and default session apart). "~" never occurs in an id, so the two kinds
// of key never meet; the digest keeps a key's length bounded whatever the
// subject's.
func SessionKey(subject, id string) string {
	if subject == "" || id == "" {
		return id
	}
	sum := sha256.Sum256([]byte(subject))
	return "~" + hex.EncodeToString(sum[:12]) + "~" + id
}

// key is the key of c's session.
func (c Call) key() string { return SessionKey(c.owner(), c.Session) }

// owner is the subject whose session c acts on: Owner when an admin named
// one, else c's own.
func (c Call) owner() string {
	if c.Owner != "" {
		return c.Owner
	}
	return c.Subject
}

// Sees reports whether c may see and act on what owner's calls left (a
// pending approval, an event with diffs): its own subject's, or every
// subject's with Admin. Without identities every owner is "" and every
// call sees everything.
func (c Call) Sees(owner string) bool { return c.Admin || owner == c.Subject }

// Writes reports whether tool may change the workspace: with identities
// it needs the write scope (docs/identity.md, "Scopes"). Only the
// read-only tools (read, glob, grep, changes) need the read scope alone,
// so a tool added later (move, delete, mkdir) is a writing one unless it
// is listed here.
func Writes(tool string) bool {
	switch tool {
	case ToolRead, ToolGlob, ToolGrep, ToolChanges:
		return false
	}
	return true
}
