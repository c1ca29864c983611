package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Body messages beyond the validator's: decoders are lenient where a tool
// call must not be (RFC 8259 §8.1, §4, §8.2).
const (
	msgBodyUTF8      = "request body is not valid UTF-8"
	msgBodySurrogate = "request body has an unpaired UTF-16 surrogate escape"
)

// strictJSON reads a JSON request body whole (bodyCap has bounded it) and
// refuses what encoding/json would quietly accept: invalid UTF-8 and
// unpaired \uD800-\uDFFF escapes (both decode to U+FFFD, so a write would
// store other bytes than the caller sent), trailing data after the value
// (the validator and the decoder read only the first), and a key given twice
// (each side could pick another one). The body is handed on unchanged.
func strictJSON(reject func(*http.Request, string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || fieldMessages[toolOf(r)] == nil || !isJSON(r.Header.Get("Content-Type")) {
				// Unknown routes stay 404 and a wrong content type is the
				// validator's to answer.
				next.ServeHTTP(w, r)
				return
			}
			body, err := io.ReadAll(r.Body)
			r.Body.Close()
			code, msg := codeInvalidArgument, ""
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				code, msg = codeBodyTooLarge, bodyTooLargeMessage(mbe.Limit)
			case err != nil:
				msg = msgBodyJSON // the client broke off mid-body
			case len(bytes.TrimSpace(body)) == 0:
				msg = msgBodyRequired
			case !utf8.Valid(body):
				msg = msgBodyUTF8
			case !json.Valid(body):
				msg = msgBodyJSON
			case hasLoneSurrogate(body):
				msg = msgBodySurrogate
			default:
				if key, dup := duplicateKey(body); dup {
					msg = "request body has a duplicate key " + quote(key)
				}
			}
			if msg != "" {
				reject(r, code)
				writeProblem(w, code, msg)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			next.ServeHTTP(w, r)
		})
	}
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// hasLoneSurrogate reports a \u escape of a UTF-16 surrogate that is not a
// high one directly followed by a low one. body must be valid JSON, so every
// backslash starts an escape inside a string.
func hasLoneSurrogate(body []byte) bool {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if body[i] != 'u' {
			continue
		}
		r := hex4(body[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(body) || body[i+1] != '\\' || body[i+2] != 'u' {
				return true
			}
			if lo := hex4(body[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// duplicateKey finds a key given twice in a top-level object (the only
// level the tools read). Keys are compared case-folded, as encoding/json
// matches them to fields ("FILE_PATH" and "file_path" both set FilePath,
// while the validator checks only "file_path"). body must be valid JSON.
// It scans the bytes rather than decoding tokens: values are skipped, not
// decoded (a 60 KiB write body: 0.5 ms -> 0.01 ms).
func duplicateKey(body []byte) (string, bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return "", false
	}
	seen := map[string]bool{}
	for i = skipSpace(body, i+1); i < len(body) && body[i] == '"'; {
		end := stringEnd(body, i)
		var key string
		if err := json.Unmarshal(body[i:end], &key); err != nil {
			return "", false
		}
		folded := foldKey(key)
		if seen[folded] {
			return key, true
		}
		seen[folded] = true
		i = skipSpace(body, skipSpace(body, end)+1) // past the ':'
		i = skipSpace(body, valueEnd(body, i))
		if i >= len(body) || body[i] != ',' {
			break // '}'
		}
		i = skipSpace(body, i+1)
	}
	return "", false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at
// b[i] == '"': the next quote not escaped, that is, not preceded by an odd
// run of backslashes.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		j += k
		slashes := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			slashes++
		}
		if slashes%2 == 0 {
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				j = stringEnd(b, j)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
			j++
		}
		return len(b)
	}
	for j := i; j < len(b); j++ { // number, true, false, null
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
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
