package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// duplicateKey is Object's duplicate-key verdict on a valid body.
func duplicateKey(body []byte) (string, bool) {
	_, err := Object(body)
	var dup *DuplicateKeyError
	if !errors.As(err, &dup) {
		return "", false
	}
	return dup.Key, true
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
	// Around linearKeys: keys compared one by one, then by a map.
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"A":9}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"H":8}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"s":8,"i":9,"j":10,"ſ":11}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"K":13}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13}`,
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

// hasLoneSurrogate, the oracle of Check's surrogate verdict, reports a \u escape of a UTF-16 surrogate that is not a
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

// TestObject: what Object keeps, and why it refuses, in the order of its
// checks (the executor turns each into one message, internal/tools).
func TestObject(t *testing.T) {
	fields, err := Object([]byte(" {\"a\" : 1, \"b\\u0041\":\"x\\ny\",\"c\":{\"d\":[1,null]},\"e\":null}\n"))
	require.NoError(t, err)
	assert.Equal(t, []Field{{"a", []byte("1")}, {"bA", []byte(`"x\ny"`)}, {"c", []byte(`{"d":[1,null]}`)}, {"e", []byte("null")}}, fields)
	fields, err = Object([]byte(`{}`))
	require.NoError(t, err)
	assert.Empty(t, fields)

	for _, tc := range []struct {
		name, body string
		want       error
	}{
		{"empty", "", ErrNotObject},
		{"white space", " \t\r\n", ErrNotObject},
		{"an array", `[{"a":1}]`, ErrNotObject},
		{"a string", `"{}"`, ErrNotObject},
		{"null", `null`, ErrNotObject},
		{"invalid UTF-8 before invalid JSON", "{\"a\":\"\xff\"", ErrUTF8},
		{"invalid JSON", `{"a":}`, ErrInvalid},
		{"trailing data", `{"a":1} {}`, ErrInvalid},
		{"trailing comma", `{"a":1,}`, ErrInvalid},
		{"invalid JSON before a lone surrogate", `{"a":"\ud800"`, ErrInvalid},
		{"a lone surrogate before a duplicate key", `{"a":"\ud800","a":1}`, ErrSurrogate},
		{"a lone surrogate not first", `[1,"\udc00"]`, ErrSurrogate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Object([]byte(tc.body))
			assert.ErrorIs(t, err, tc.want)
		})
	}
	for body, key := range map[string]string{
		`{"a":1,"a":2}`:                     "a",
		`{"file_path":"x","FILE_PATH":"y"}`: "FILE_PATH",
		`{"ſ":1,"S":2}`:                     "S",
		`{"a":1,"\u0061":2}`:                "a",
		`{"x":{"y":1,"y":2}}`:               "", // nested objects are the reader's
	} {
		_, err := Object([]byte(body))
		var dup *DuplicateKeyError
		if key == "" {
			assert.NoError(t, err, body)
			continue
		}
		require.ErrorAs(t, err, &dup, body)
		assert.Equal(t, key, dup.Key, body)
	}
}

// TestObjectAllocations: a tool body of a few keys costs its fields slice
// (grown three times here) and its keys' strings, 6 allocations (7 under
// the race detector): no map and no folded copies of its keys (12 before,
// docs/performance.md "Reads at their floor").
func TestObjectAllocations(t *testing.T) {
	body := []byte(`{"file_path":"src.go","offset":1,"limit":2000}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Object(body); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 7.0)
}
