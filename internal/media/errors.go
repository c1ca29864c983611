package media

import (
	"errors"
	"strings"
)

var (
	errNotImage     = errors.New("not an image")
	errDecoderPanic = errors.New("the decoder failed")
)

// reason is a decoder's error in a few words: the standard decoders' texts
// start with their package ("png: invalid format: ..."), which the model
// has no use for.
func reason(err error) string {
	s := err.Error()
	for _, p := range []string{"png: ", "jpeg: ", "gif: ", "webp: ", "image: "} {
		s = strings.TrimPrefix(s, p)
	}
	if s == "unexpected EOF" || s == "EOF" {
		return "truncated"
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
