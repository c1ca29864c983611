package tools

import (
	"errors"
	"strconv"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/jsonscan"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Body messages: decoders are lenient where a tool call must not be
// (RFC 8259 §8.1, §4, §8.2; docs/api.md, "Request bodies").
const (
	msgBodyRequired  = "request body must be a JSON object"
	msgBodyJSON      = "request body is not valid JSON"
	msgBodyUTF8      = "request body is not valid UTF-8"
	msgBodySurrogate = "request body has an unpaired UTF-16 surrogate escape"
)

// BodyIncomplete is the refusal of arguments a transport could not read
// whole (the client broke off mid-body).
func BodyIncomplete() *fault.Error { return argError(msgBodyJSON) }

// args are the members of a request object, decoded once. Lookups are by
// exact key; a JSON null counts as absent (docs/api.md, "Request bodies").
type args []jsonscan.Field

// decodeArgs reads a tool's arguments as one JSON object, strictly
// (jsonscan.Object: invalid UTF-8, unpaired surrogate escapes, trailing
// data and a key given twice refused), and says why not in the body
// messages.
func decodeArgs(raw []byte) (args, *fault.Error) {
	fields, err := jsonscan.Object(raw)
	if err == nil {
		return fields, nil
	}
	var dup *jsonscan.DuplicateKeyError
	switch {
	case errors.As(err, &dup):
		return nil, argError("request body has a duplicate key " + render.Quote(dup.Key))
	case errors.Is(err, jsonscan.ErrUTF8):
		return nil, argError(msgBodyUTF8)
	case errors.Is(err, jsonscan.ErrSurrogate):
		return nil, argError(msgBodySurrogate)
	case errors.Is(err, jsonscan.ErrNotObject):
		return nil, argError(msgBodyRequired)
	}
	return nil, argError(msgBodyJSON)
}

// get returns the raw value of key, nil when absent or null.
func (a args) get(key string) []byte {
	for _, m := range a {
		if m.Key == key {
			if string(m.Value) == "null" {
				return nil
			}
			return m.Value
		}
	}
	return nil
}

// numberOf is the value of a JSON number (false for any other value).
func numberOf(v []byte) (float64, bool) {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

// booleanOf is the value of a JSON boolean (false, false for any other
// value).
func booleanOf(v []byte) (b, ok bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
