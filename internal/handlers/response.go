package handlers

import (
	"net/http"

	"github.com/toolfs/toolfs-api/api"
)

// response is what every strict handler returns: a JSON body with a status.
// It implements the generated Visit interfaces itself so that all bodies go
// through writeJSON (no HTML escaping, one problem format).
type response struct {
	status      int
	contentType string
	body        any
}

func ok(body any) response {
	return response{status: http.StatusOK, contentType: "application/json", body: body}
}

func failure(err *toolError) response {
	p := newProblem(err.code, err.message)
	return response{status: p.Status, contentType: "application/problem+json", body: p}
}

func (r response) visit(w http.ResponseWriter) error {
	if r.body == nil {
		w.WriteHeader(r.status)
		return nil
	}
	return writeJSON(w, r.status, r.contentType, r.body)
}

func (r response) VisitReadToolResponse(w http.ResponseWriter) error      { return r.visit(w) }
func (r response) VisitWriteToolResponse(w http.ResponseWriter) error     { return r.visit(w) }
func (r response) VisitEditToolResponse(w http.ResponseWriter) error      { return r.visit(w) }
func (r response) VisitGlobToolResponse(w http.ResponseWriter) error      { return r.visit(w) }
func (r response) VisitGrepToolResponse(w http.ResponseWriter) error      { return r.visit(w) }
func (r response) VisitListToolsResponse(w http.ResponseWriter) error     { return r.visit(w) }
func (r response) VisitDeleteSessionResponse(w http.ResponseWriter) error { return r.visit(w) }
func (r response) VisitHealthzResponse(w http.ResponseWriter) error       { return r.visit(w) }

var (
	_ api.ReadToolResponseObject      = response{}
	_ api.WriteToolResponseObject     = response{}
	_ api.EditToolResponseObject      = response{}
	_ api.GlobToolResponseObject      = response{}
	_ api.GrepToolResponseObject      = response{}
	_ api.ListToolsResponseObject     = response{}
	_ api.DeleteSessionResponseObject = response{}
	_ api.HealthzResponseObject       = response{}
)
