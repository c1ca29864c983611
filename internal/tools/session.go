package tools

import "strings"

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
// transport itself derived ("" = none).
func (s Sessions) Resolve(header func(name string) []string, transportSession string) (session, cwd string, err *Error) {
	for _, name := range append([]string{HeaderSessionID}, s.Aliases...) {
		v, present, ok := single(header(name))
		if !present {
			continue
		}
		if !ok || !ValidSessionID(v) {
			return "", "", sessionError("malformed " + name + ": it must be 1-128 characters of A-Za-z0-9._:-")
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
	v, present, ok := single(header(HeaderSessionCwd))
	if present && (!ok || strings.TrimSpace(v) == "" || strings.IndexByte(v, 0) >= 0) {
		return "", "", sessionError("malformed X-Session-Cwd: it must name an existing folder inside the workspace root")
	}
	return session, v, nil
}

// single is a header's one non-empty value: present is false when every
// value is empty (or there is none), ok is false when there are several.
func single(values []string) (v string, present, ok bool) {
	n := 0
	for _, s := range values {
		if s != "" {
			v = s
			n++
		}
	}
	return v, n > 0, n == 1
}

// ValidSessionID reports whether s is 1-128 characters of A-Za-z0-9._:-.
func ValidSessionID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
