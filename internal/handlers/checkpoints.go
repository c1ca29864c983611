package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// maxSubjectBytes bounds ?subject= (api/openapi.yaml, the Subject
// parameter).
const maxSubjectBytes = 1024

type ownerKey struct{}

// namedSubject resolves ?subject= on the sessions routes (docs/identity.md,
// "An admin reaches another subject's session"): absent or empty, the
// caller's own session of that id; another subject than the caller's needs
// toolfs:admin (the static --token holds it). It runs after auth and before
// the session step, so a refused request touches no session.
func (s *rest) namedSubject(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.URL.Query()["subject"]
		if isPreflight(r) || len(vals) == 0 || len(vals) == 1 && vals[0] == "" {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case len(vals) > 1:
			writeProblem(w, fault.CodeInvalidArgument, "give subject at most once")
			return
		case s.cfg.OAuth == nil:
			writeProblem(w, fault.CodeInvalidArgument, "subject names the subject of an access token, and this server verifies none (no --oauth-issuer): omit it")
			return
		case len(vals[0]) > maxSubjectBytes:
			writeProblem(w, fault.CodeInvalidArgument, "subject must be at most "+strconv.Itoa(maxSubjectBytes)+" bytes")
			return
		}
		c := caller(r)
		if vals[0] == c.Subject {
			next.ServeHTTP(w, r)
			return
		}
		if !c.Admin {
			p, _ := identity.FromContext(r.Context())
			d := identity.Require(p, identity.ScopeAdmin)
			d.Message += ": only an admin reaches another subject's session (subject=)"
			s.deny(w, r, d)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, vals[0])))
	})
}

// sessionCaller is the tools.Call of a sessions route: the caller, acting
// on the session of the subject namedSubject resolved.
func sessionCaller(r *http.Request) tools.Call {
	c := caller(r)
	c.Transport = "rest"
	c.Owner, _ = r.Context().Value(ownerKey{}).(string)
	return c
}

// ListChanges serves GET /sessions/{id}/changes: the session's change
// history, newest first (docs/checkpoints.md).
func (s *rest) ListChanges(w http.ResponseWriter, r *http.Request, id string) {
	c := sessionCaller(r)
	ctx, end := s.traced(w, r, &c, time.Now())
	defer end()
	res, err := s.x.Changes(ctx, c, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", res)
}

// RevertSession serves POST /sessions/{id}/revert {"to", "dry_run"?,
// "sandbox_permissions"?, "justification"?}: the session's changes after
// to undone, all or nothing (docs/checkpoints.md), fenced under the
// request's X-Session-Cwd as writes are (docs/sandbox.md).
func (s *rest) RevertSession(w http.ResponseWriter, r *http.Request, id string) {
	c := sessionCaller(r)
	ctx, end := s.traced(w, r, &c, time.Now())
	defer end()
	// The headers were checked by touch; the cwd is the fence's.
	_, c.Cwd, _ = s.sessions.resolve(r, s.sessions.named)
	raw, terr := s.body(r)
	if terr != nil {
		s.x.Refuse(c, tools.ToolRevert, terr)
		writeError(w, terr)
		return
	}
	defer bodies.put(raw)
	res, err := s.x.Revert(ctx, c, id, raw)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", res)
}
