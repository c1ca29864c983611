package jsonscan

import (
	"bytes"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Why Object refuses a text. Each is one model-facing message in the
// executor (internal/tools, body.go), so they are told apart, not worded.
var (
	// ErrNotObject: the text is empty, white space, or another JSON value.
	ErrNotObject = errors.New("not a JSON object")
	// ErrInvalid: the text is not one JSON value.
	ErrInvalid = errors.New("not valid JSON")
	// ErrUTF8: the text is not valid UTF-8.
	ErrUTF8 = errors.New("not valid UTF-8")
	// ErrSurrogate: a string has an unpaired UTF-16 surrogate escape.
	ErrSurrogate = errors.New("an unpaired UTF-16 surrogate escape")
)

// DuplicateKeyError is an object that names a key twice, under case
// folding. Key is the second one, decoded.
type DuplicateKeyError struct{ Key string }

func (e *DuplicateKeyError) Error() string { return "duplicate key " + e.Key }

// Field is one member of an object read by Object: its key decoded and its
// value as written.
type Field struct {
	Key   string
	Value []byte
}

// Object reads raw as one JSON object, strictly, and returns its members
// in order. It refuses what encoding/json would quietly accept: invalid
// UTF-8 and unpaired \uD800-\uDFFF escapes (both decode to U+FFFD, so a
// write would store other bytes than the caller sent), trailing data
// after the value, and a key given twice (case-folded, as encoding/json
// matches keys: each reader could pick another one). The checks run in
// that order: ErrNotObject for an empty text, ErrUTF8, ErrInvalid,
// ErrSurrogate, ErrNotObject for another value, then a
// *DuplicateKeyError. Values share raw's memory.
func Object(raw []byte) ([]Field, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, ErrNotObject
	}
	if !utf8.Valid(raw) {
		return nil, ErrUTF8
	}
	switch valid, lone := Check(raw); {
	case !valid:
		return nil, ErrInvalid
	case lone:
		return nil, ErrSurrogate
	}
	i := SkipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, ErrNotObject
	}
	var fields []Field
	var seen map[string]bool
	for m := range Members(raw, i) {
		key, ok := Unquote(m.Key)
		if !ok {
			return nil, ErrInvalid
		}
		if named(fields, &seen, key) {
			return nil, &DuplicateKeyError{Key: key}
		}
		fields = append(fields, Field{Key: key, Value: raw[m.At:m.End]})
	}
	return fields, nil
}

// linearKeys is how many keys named compares one by one (a tool body has
// a handful: no map, no folded copies); past it, a map of folded keys keeps
// a body of many keys linear.
const linearKeys = 8

// named reports whether fields name key already, under case folding;
// seen is the map of folded keys once there are linearKeys fields.
// strings.EqualFold and equal foldKeys are the same relation: both compare
// rune by rune, each rune's simple folding orbit.
func named(fields []Field, seen *map[string]bool, key string) bool {
	if len(fields) < linearKeys {
		for _, f := range fields {
			if strings.EqualFold(f.Key, key) {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]bool, 2*linearKeys)
		for _, f := range fields {
			(*seen)[foldKey(f.Key)] = true
		}
	}
	folded := foldKey(key)
	if (*seen)[folded] {
		return true
	}
	(*seen)[folded] = true
	return false
}

// foldKey maps every rune to the smallest of its case-fold orbit, so keys
// equal under strings.EqualFold ("ſ" and "s", "K" and "k") map alike.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}
