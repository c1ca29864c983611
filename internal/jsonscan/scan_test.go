package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMembersAndElements(t *testing.T) {
	b := []byte(` { "a" : [1, "x,]", {"b":"}"}] ,"c\"":true, "d":-1.5e3 } `)
	type kv struct{ key, value string }
	var got []kv
	for m := range Members(b, 1) {
		got = append(got, kv{string(m.Key), string(b[m.At:m.End])})
	}
	assert.Equal(t, []kv{{`"a"`, `[1, "x,]", {"b":"}"}]`}, {`"c\""`, "true"}, {`"d"`, "-1.5e3"}}, got)

	a := []byte(`[ 1 ,"]",[[]], {"a":[]},null ]`)
	var elems []string
	for at, end := range Elements(a, 0) {
		elems = append(elems, string(a[at:end]))
	}
	assert.Equal(t, []string{"1", `"]"`, "[[]]", `{"a":[]}`, "null"}, elems)

	for _, empty := range []string{`{}`, `{ }`, `[]`, `[ ]`, `1`, `""`, ``} {
		for range Members([]byte(empty), 0) {
			t.Fatalf("%s has members", empty)
		}
		for range Elements([]byte(empty), 0) {
			t.Fatalf("%s has elements", empty)
		}
	}
	assert.Equal(t, 0, Depth([]byte(`"[{"`)))
	assert.Equal(t, 3, Depth([]byte(`[{"a":[]},[]]`)))
}

// FuzzScan: on any valid JSON, Members and Elements split an object or
// array exactly as encoding/json does, and Depth is its nesting.
func FuzzScan(f *testing.F) {
	for _, b := range jsonBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		i := SkipSpace(b, 0)
		require.Equal(t, len(bytes.TrimRight(b, " \t\r\n")), ValueEnd(b, i), "%q", b)
		switch b[i] {
		case '{':
			dec := json.NewDecoder(bytes.NewReader(b))
			_, _ = dec.Token()
			for m := range Members(b, i) {
				tok, err := dec.Token()
				require.NoError(t, err)
				var key string
				require.NoError(t, json.Unmarshal(m.Key, &key))
				require.Equal(t, tok, key)
				var v json.RawMessage
				require.NoError(t, dec.Decode(&v))
				require.Equal(t, string(v), string(b[m.At:m.End]))
			}
			require.False(t, dec.More(), "%q: a member was missed", b)
		case '[':
			var want []json.RawMessage
			require.NoError(t, json.Unmarshal(b, &want))
			n := 0
			for at, end := range Elements(b, i) {
				require.Less(t, n, len(want))
				require.Equal(t, string(want[n]), string(b[at:end]))
				n++
			}
			require.Equal(t, len(want), n)
		}
		require.Equal(t, depthOracle(b), Depth(b))
	})
}

// depthOracle counts nesting through encoding/json's tokens.
func depthOracle(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
