package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path"
	"slices"
	"strings"

	"github.com/toolfs/toolfs-api/internal/render"
)

// Filter selects the events of one subscription (docs/events.md,
// "Filters"). An empty field selects everything. Overflow and reset events
// pass every filter: they concern the stream itself.
type Filter struct {
	// Sessions keeps mutations by one of these sessions; external changes,
	// which have no session, are left out when it is set.
	Sessions []string
	// Paths keeps events at or under one of these root-relative folders or
	// files, by whole path segments: "src" keeps "src" and "src/a.go", not
	// "srcx".
	Paths []string
	// Subject is the subscriber's verified subject, All whether it sees
	// every subject's events (docs/identity.md): without All, events that
	// carry a call's content (mutations with diffs, approvals) pass only
	// when their subject is the subscriber's. Without identities both are
	// zero and every event's subject is "", so everything passes.
	Subject string
	All     bool

	owner string // ownerOf(Subject), worked out once by Subscribe
}

// Limits on a filter, so one subscription costs a bounded amount per event.
const (
	maxFilterValues = 16
	maxFilterPath   = 4096
)

var (
	errFilterCount   = errors.New("at most 16 session values and 16 path values")
	errFilterSession = errors.New("session must be " + render.SessionIDRule + " only")
	errFilterPath    = errors.New("path must name a folder or file relative to the workspace root, with no .. segment")
)

// NewFilter checks and normalizes the ?session= and ?path= values of a
// subscription request. Paths are relative to the root; "", "." and "/" mean
// the whole root.
func NewFilter(sessions, paths []string) (Filter, error) {
	if len(sessions) > maxFilterValues || len(paths) > maxFilterValues {
		return Filter{}, errFilterCount
	}
	var f Filter
	for _, s := range sessions {
		if !render.ValidSessionID(s) {
			return Filter{}, errFilterSession
		}
		f.Sessions = append(f.Sessions, s)
	}
	whole := false
	for _, p := range paths {
		if len(p) > maxFilterPath || strings.IndexByte(p, 0) >= 0 || slices.Contains(strings.Split(p, "/"), "..") {
			return Filter{}, errFilterPath
		}
		c := path.Clean("/" + p)[1:] // a leading "/" means the root, as in a URL
		if c == "" {
			whole = true
		}
		f.Paths = append(f.Paths, c)
	}
	if whole {
		f.Paths = nil
	}
	return f, nil
}

// matches reports whether r passes the filter.
func (f Filter) matches(r *record) bool {
	if r.typ == TypeOverflow || r.typ == TypeReset {
		return true
	}
	if !f.All && r.owner != f.owner && (r.owner != "" || r.typ.isMutation() || r.typ == TypeApproval) {
		return false
	}
	if len(f.Sessions) > 0 && !slices.Contains(f.Sessions, r.session) {
		return false
	}
	if len(f.Paths) == 0 {
		return true
	}
	for _, p := range f.Paths {
		if r.path == p || (strings.HasPrefix(r.path, p) && r.path[len(p)] == '/') {
			return true
		}
	}
	return false
}

// ownerOf is what an event keeps of its subject, in memory and in the
// Redis stream: a fixed-size digest, whatever the subject's length; "" for
// none.
func ownerOf(subject string) string {
	if subject == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(subject))
	return hex.EncodeToString(sum[:12])
}
