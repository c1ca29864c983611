package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// validationError maps what the OpenAPI validator found on a route without
// a tool body (tool bodies are the executor's) to a code and message.
func validationError(r *http.Request, err error) *tools.Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tools.NewError(tools.CodeBodyTooLarge, bodyTooLargeMessage(mbe.Limit))
	}
	var routeErr *routers.RouteError
	if errors.As(err, &routeErr) {
		if errors.Is(err, routers.ErrMethodNotAllowed) {
			return tools.NewError(tools.CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
		}
		return tools.NewError(tools.CodeNoSuchEndpoint, "no such endpoint: "+r.Method+" "+r.URL.Path)
	}
	var reqErr *openapi3filter.RequestError
	if errors.As(err, &reqErr) && reqErr.Parameter != nil && reqErr.Parameter.In == "path" {
		return tools.NewError(tools.CodeInvalidSession, "malformed session id: it must be 1-128 characters of A-Za-z0-9._:-")
	}
	return tools.NewError(tools.CodeInvalidArgument, "invalid request: "+firstLine(err.Error()))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
