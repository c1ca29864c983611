package handlers

import (
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/toolfs/toolfs-api/internal/render"
)

// Argument messages the original does not have; ours, in its style.
const (
	msgContent      = "content must be a string"
	msgNewString    = "new_string must be a string"
	msgReplaceAll   = "replace_all must be a boolean"
	msgPattern      = "pattern must be a non-empty string"
	msgPath         = "path must be a non-empty string when given"
	msgInclude      = "include must be a non-empty glob when given"
	msgBodyRequired = "request body must be a JSON object"
	msgBodyJSON     = "request body is not valid JSON"
	msgContentType  = "request body must be JSON (Content-Type: application/json)"
	msgFilePathNUL  = "file_path must not contain a NUL byte"
)

// fieldMessages lists, per tool and in the order the tool checks its
// arguments, the message a bad value of each field gets. When a body has
// several bad fields, the first in this order is the one reported, as the
// original validates file_path before offset before limit.
var fieldMessages = map[string][]struct{ field, message string }{
	"read":  {{"file_path", render.MsgFilePath}, {"offset", render.MsgOffset}, {"limit", render.MsgLimit}},
	"write": {{"file_path", render.MsgFilePath}, {"content", msgContent}},
	"edit": {{"file_path", render.MsgFilePath}, {"old_string", render.MsgOldString},
		{"new_string", msgNewString}, {"replace_all", msgReplaceAll}},
	"glob": {{"pattern", msgPattern}, {"path", msgPath}},
	"grep": {{"pattern", msgPattern}, {"path", msgPath}, {"include", msgInclude}},
}

// toolOf names the tool of a /tools/<name> path, or "".
func toolOf(r *http.Request) string {
	if name, ok := strings.CutPrefix(r.URL.Path, "/tools/"); ok {
		return name
	}
	return ""
}

// validationError turns what the OpenAPI validator found into the tools' own
// argument messages (SPEC §4), so a schema violation reads the same as the
// original's argument check.
func validationError(r *http.Request, err error) (code, message string) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return codeBodyTooLarge, bodyTooLargeMessage(mbe.Limit)
	}
	var routeErr *routers.RouteError
	if errors.As(err, &routeErr) {
		if errors.Is(err, routers.ErrMethodNotAllowed) {
			return codeMethodNotAllowed, "method " + r.Method + " is not allowed on " + r.URL.Path
		}
		return codeNotFound, "no such endpoint: " + r.Method + " " + r.URL.Path
	}

	var fields []string
	var header, pathParam, contentType, decode, missingBody bool
	walkErrors(err, func(e error) {
		switch e := e.(type) {
		case *openapi3filter.RequestError:
			if e.Parameter != nil {
				header = header || e.Parameter.In == "header"
				pathParam = pathParam || e.Parameter.In == "path"
			}
			if e.RequestBody != nil && e.Err == nil && strings.Contains(e.Reason, "value is required") {
				missingBody = true
			}
			if strings.Contains(e.Reason, "header Content-Type") {
				contentType = true
			}
		case *openapi3filter.ParseError:
			decode = true
		case *openapi3.SchemaError:
			if header || pathParam {
				return // a parameter's value, not a body field
			}
			if p := e.JSONPointer(); len(p) > 0 {
				fields = append(fields, p[0])
			} else {
				missingBody = true // the body is not an object
			}
		}
	})

	switch {
	case pathParam:
		return codeInvalidSession, "malformed session id: it must be 1-128 characters of A-Za-z0-9._:-"
	case header:
		return codeInvalidSession, "malformed session header: X-Session-ID must be 1-128 characters of A-Za-z0-9._:-"
	case contentType:
		return codeInvalidArgument, msgContentType
	case decode:
		return codeInvalidArgument, msgBodyJSON
	}
	for _, fm := range fieldMessages[toolOf(r)] {
		for _, f := range fields {
			if f == fm.field {
				return codeInvalidArgument, fm.message
			}
		}
	}
	if missingBody || len(fields) > 0 {
		return codeInvalidArgument, msgBodyRequired
	}
	return codeInvalidArgument, "invalid request: " + firstLine(err.Error())
}

// walkErrors visits err and everything it wraps, MultiErrors included.
func walkErrors(err error, visit func(error)) {
	if err == nil {
		return
	}
	visit(err)
	switch e := err.(type) {
	case openapi3.MultiError:
		for _, inner := range e {
			walkErrors(inner, visit)
		}
		return
	case *openapi3.SchemaError:
		walkErrors(e.Origin, visit)
		return
	}
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		for _, inner := range u.Unwrap() {
			walkErrors(inner, visit)
		}
		return
	}
	walkErrors(errors.Unwrap(err), visit)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func bodyTooLargeMessage(limit int64) string {
	return "request body is larger than the " + itoa(limit) + "-byte limit"
}

// positiveInt converts an optional JSON number argument: absent gives def; a
// value that is not a whole number of at least 1 (or that float64 cannot hold
// exactly) is refused with message.
func positiveInt(v *float64, def int, message string) (int, *toolError) {
	if v == nil {
		return def, nil
	}
	f := *v
	// 2^53 is refused too: 2^53+1 parses to it, so it may not be what was sent.
	if f < 1 || f != math.Trunc(f) || f >= 1<<53 || math.IsNaN(f) {
		return 0, argError(message)
	}
	return int(f), nil
}

// filePathArg applies the original's file_path check, and refuses NUL bytes
// (no path can contain one; the kernel would truncate it).
func filePathArg(p string) (string, *toolError) {
	if strings.TrimSpace(p) == "" {
		return "", argError(render.MsgFilePath)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", argError(msgFilePathNUL)
	}
	return p, nil
}
