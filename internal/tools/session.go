package tools

import (
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The session headers every HTTP transport reads (docs/api.md, "Sessions").
const (
	HeaderSessionID  = "X-Session-ID"
	HeaderSessionCwd = "X-Session-Cwd"
)

// Sessions resolves a call's session from what a transport received. The
// session is the first of: X-Session-ID; the first non-empty header among
// Aliases; the transport's own session (MCP); Default. A header present but
// empty counts as absent (frontends expand a missing template value to an
// empty string); a present, malformed value is INVALID_SESSION.
type Sessions struct {
	// Aliases are header names tried after X-Session-ID, in order, so a
	// frontend's own chat id can serve (--session-headers).
	Aliases []string
	// Default is the session of a call that names none ("" = none;
	// --default-session). It must be a valid id.
	Default string
}

// Resolve returns the session and cwd of a call. header returns the values
// of a header (nil when absent); transportSession is a session id the
// transport itself derived ("" = none). A header sent more than once stands
// for its one non-empty value; two different ones are INVALID_SESSION
// (docs/decisions.md, "A session header sent twice").
func (s Sessions) Resolve(header func(name string) []string, transportSession string) (session, cwd string, err *fault.Error) {
	for _, name := range append([]string{HeaderSessionID}, s.Aliases...) {
		v, present, conflict := headerValue(header(name), true)
		if conflict {
			return "", "", sessionError(name + " was sent more than once with different values: send one session id (an empty value counts as absent)")
		}
		if !present {
			continue
		}
		if !render.ValidSessionID(v) {
			return "", "", sessionError("malformed " + name + ": it must be " + render.SessionIDRule)
		}
		session = v
		break
	}
	if session == "" {
		session = transportSession
	}
	if session == "" {
		session = s.Default
	}
	v, present, conflict := headerValue(header(HeaderSessionCwd), false)
	if conflict {
		return "", "", sessionError("X-Session-Cwd was sent more than once with different values: send one folder (an empty value counts as absent)")
	}
	if present && (strings.TrimSpace(v) == "" || strings.IndexByte(v, 0) >= 0) {
		return "", "", sessionError("malformed X-Session-Cwd: it must name an existing folder inside the workspace root")
	}
	return session, v, nil
}

// headerValue is the one non-empty value among a header's values. When ids
// is set, each value is also split at commas, trimmed of spaces and tabs (a
// proxy may join repeated lines into one, RFC 9110 section 5.3, and no
// session id holds a comma); a folder may hold commas, so X-Session-Cwd is
// not split. present is false when every value is empty (or there is none);
// conflict is true when two non-empty values differ.
func headerValue(values []string, ids bool) (v string, present, conflict bool) {
	see := func(s string) {
		switch {
		case s == "":
		case !present:
			v, present = s, true
		case s != v:
			conflict = true
		}
	}
	for _, s := range values {
		if !ids {
			see(s)
			continue
		}
		for item := range strings.SplitSeq(s, ",") {
			see(strings.Trim(item, " \t"))
		}
	}
	return v, present, conflict
}
