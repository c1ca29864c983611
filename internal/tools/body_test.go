package tools

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// decodedDuplicateKey is duplicateKey as first written, with a token
// decoder: the oracle the byte scanner must agree with on valid JSON.
func decodedDuplicateKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := tok.(string)
		folded := foldKey(key)
		if seen[folded] {
			return key, true
		}
		seen[folded] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// duplicateKey is decodeArgs's duplicate-key verdict on a valid body.
func duplicateKey(body []byte) (string, bool) {
	_, err := decodeArgs(body)
	if err == nil {
		return "", false
	}
	key, ok := strings.CutPrefix(err.Message, "request body has a duplicate key ")
	if !ok {
		return "", false
	}
	return strings.Trim(key, `"`), true
}

var keyBodies = []string{
	`{}`, ` { } `, `[]`, `"x"`, `1`, `null`,
	`{"a":1,"b":2}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"file_path":"x","FILE_PATH":"y"}`,
	`{"ſ":1,"s":2}`, `{"K":1,"k":2}`,
	`{"a":"x\"y\\","b":{"a":[1,{"a":2}],"c":"}"},"a":3}`,
	`{"a":[["]"],{"}":"{"}],"b":true,"c":false,"d":null,"e":-1.5e3,"b":0}`,
	"{\n\t\"a\" :\r\n \"\\u0061\" ,\n \"\\u0061\": 1 }",
	`{"\u0061":1,"a":2}`, `{"a\"b":1,"a\"B":2}`, `{"x":"\\","y":"\\\"","x":0}`,
	`{"content":"` + strings.Repeat(`\tv0001 := compute(a, b)\n`, 100) + `","file_path":"f"}`,
}

func TestDuplicateKeyScannerMatchesDecoder(t *testing.T) {
	for _, b := range keyBodies {
		if !json.Valid([]byte(b)) {
			t.Fatalf("fixture is not valid JSON: %s", b)
		}
		wantKey, want := decodedDuplicateKey([]byte(b))
		gotKey, got := duplicateKey([]byte(b))
		assert.Equal(t, want, got, "%s", b)
		assert.Equal(t, wantKey, gotKey, "%s", b)
	}
}

func FuzzDuplicateKeyScanner(f *testing.F) {
	for _, b := range keyBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) || !utf8.Valid(body) || hasLoneSurrogate(body) {
			return // refused before the key scan
		}
		wantKey, want := decodedDuplicateKey(body)
		gotKey, got := duplicateKey(body)
		if got != want || gotKey != wantKey {
			t.Fatalf("%q: scanner (%q, %v), decoder (%q, %v)", body, gotKey, got, wantKey, want)
		}
	})
}

func BenchmarkDuplicateKey(b *testing.B) {
	body, _ := json.Marshal(map[string]string{"file_path": "src.go", "content": strings.Repeat("\tv0001 := compute(a, b) * 0001\n", 2000)})
	b.Run("scanner", func(b *testing.B) {
		for b.Loop() {
			duplicateKey(body)
		}
	})
	b.Run("decoder", func(b *testing.B) {
		for b.Loop() {
			decodedDuplicateKey(body)
		}
	})
}

var stringValues = []string{
	`""`, `"a"`, `"plain text without escapes"`, `"\"\\\/\b\f\n\r\t"`, `"tab\there\nnew line"`,
	`"\u0041\u00e9\u65e5\u2028"`, `"\ud83d\ude00 emoji"`, `"\u0000nul"`, `"é 日本語 😀"`, `"end\\"`, `"\\\""`,
}

// TestUnquoteMatchesDecoder: unquote decodes every string exactly as
// encoding/json does.
func TestUnquoteMatchesDecoder(t *testing.T) {
	for _, v := range stringValues {
		var want string
		if err := json.Unmarshal([]byte(v), &want); err != nil {
			t.Fatalf("fixture %s: %v", v, err)
		}
		got, ok := unquote([]byte(v))
		assert.True(t, ok, v)
		assert.Equal(t, want, got, v)
	}
}

func FuzzUnquote(f *testing.F) {
	for _, v := range stringValues {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, _ := json.Marshal(s) // every string, as a JSON string
		for _, body := range [][]byte{v, []byte(strings.ToUpper(string(v)))} {
			var want string
			if !json.Valid(body) || !utf8.Valid(body) || hasLoneSurrogate(body) || json.Unmarshal(body, &want) != nil {
				continue
			}
			got, ok := unquote(body)
			if !ok || got != want {
				t.Fatalf("%s: unquote %q (%v), decoder %q", body, got, ok, want)
			}
		}
	})
}

func BenchmarkDecodeWriteBody(b *testing.B) {
	body, _ := json.Marshal(map[string]string{"file_path": "src.go", "content": strings.Repeat("\tv0001 := compute(a, b) * 0001\n", 2000)})
	b.SetBytes(int64(len(body)))
	reportCPU(b)
	for b.Loop() {
		if _, err := writeArgsOf(body); err != nil {
			b.Fatal(err)
		}
	}
}

// hasLoneSurrogate, the oracle of checkJSON's surrogate verdict, reports a \u escape of a UTF-16 surrogate that is not a
// high one directly followed by a low one. body must be valid JSON, so every
// backslash starts an escape inside a string.
func hasLoneSurrogate(body []byte) bool {
	for i := 0; i < len(body); i++ {
		k := bytes.IndexByte(body[i:], '\\')
		if k < 0 {
			return false
		}
		i += k + 1 // the escaped character
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

// TestArgumentsOutliveTheBody: no decoded argument shares memory with the
// body, so a transport may reuse the body's buffer once the call returns
// (internal/handlers recycles them). Overwriting the body must not change
// any of them.
func TestArgumentsOutliveTheBody(t *testing.T) {
	body := func() []byte {
		return []byte(`{"file_path":"plain.go","content":"no escapes","old_string":"a\tb","new_string":"c",` +
			`"edits":[{"old_string":"x","new_string":"y"}],"pattern":"p","path":"q","include":"*.go","justification":"why"}`)
	}
	scribble := func(raw []byte) {
		for i := range raw {
			raw[i] = '#'
		}
	}
	raw := body()
	w, err := writeArgsOf(raw)
	require.Nil(t, err)
	scribble(raw)
	assert.Equal(t, writeArgs{path: "plain.go", content: "no escapes", esc: escalation{hasReason: true, reasonOK: true, justification: "why"}}, w)

	raw = []byte(`{"file_path":"plain.go","old_string":"a\tb","new_string":"c"}`)
	e, err := editArgsOf(raw)
	require.Nil(t, err)
	scribble(raw)
	assert.Equal(t, editArgs{path: "plain.go", oldString: "a\tb", newString: "c"}, e)

	raw = []byte(`{"file_path":"plain.go","edits":[{"old_string":"x","new_string":"y"}]}`)
	e, err = editArgsOf(raw)
	require.Nil(t, err)
	scribble(raw)
	assert.Equal(t, editArgs{path: "plain.go", batch: []fs.Edit{{OldString: "x", NewString: "y"}}}, e)

	raw = body()
	s, err := searchArgsOf(raw, true)
	require.Nil(t, err)
	scribble(raw)
	assert.Equal(t, "p", s.pattern)
	assert.Equal(t, "q", *s.path)
	assert.Equal(t, "*.go", *s.include)
}
