package handlers

import (
	"net/http"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// ListChanges serves GET /sessions/{id}/changes: the session's change
// history, newest first (docs/checkpoints.md).
func (s *rest) ListChanges(w http.ResponseWriter, r *http.Request, id string) {
	c := caller(r)
	c.Transport = "rest"
	res, err := s.x.Changes(r.Context(), c, id)
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
	c := caller(r)
	c.Transport = "rest"
	// The headers were checked by touch; the cwd is the fence's.
	_, c.Cwd, _ = s.sessions.resolve(r, s.sessions.named)
	raw, terr := s.body(r)
	if terr != nil {
		s.x.Refuse(c, tools.ToolRevert, terr)
		writeError(w, terr)
		return
	}
	defer bodies.put(raw)
	res, err := s.x.Revert(r.Context(), c, id, raw)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", res)
}
