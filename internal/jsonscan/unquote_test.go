package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

var stringValues = []string{
	`""`, `"a"`, `"plain text without escapes"`, `"\"\\\/\b\f\n\r\t"`, `"tab\there\nnew line"`,
	`"\u0041\u00e9\u65e5\u2028"`, `"\ud83d\ude00 emoji"`, `"\u0000nul"`, `"é 日本語 😀"`, `"end\\"`, `"\\\""`,
}

// TestUnquoteMatchesDecoder: Unquote decodes every string exactly as
// encoding/json does.
func TestUnquoteMatchesDecoder(t *testing.T) {
	for _, v := range stringValues {
		var want string
		if err := json.Unmarshal([]byte(v), &want); err != nil {
			t.Fatalf("fixture %s: %v", v, err)
		}
		got, ok := Unquote([]byte(v))
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
			got, ok := Unquote(body)
			if !ok || got != want {
				t.Fatalf("%s: Unquote %q (%v), decoder %q", body, got, ok, want)
			}
		}
	})
}
