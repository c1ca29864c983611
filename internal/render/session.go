package render

// SessionIDRule is what a session id may be, as messages say it
// (docs/api.md, "Sessions"); request ids follow it too.
const SessionIDRule = "1-128 characters of A-Za-z0-9._:-"

// ValidSessionID reports whether s follows SessionIDRule. It is the one
// check of a session id: the session headers, --default-session, the
// sessions routes, the change feed's ?session= and X-Request-Id use it.
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
