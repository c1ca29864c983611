package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonBodies are bodies at the edges of the grammar, valid and not.
var jsonBodies = []string{
	``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `1.5e-3`, `-1E+9`, `true`, `false`, `null`, ` {"a" : [1, "x", {}] } `,
	`{`, `}`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`, `{1:2}`, `[1 2]`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `nul`, `truex`, `True`, `"a" "b"`, `{} {}`, `[]]`,
	`"\"\\\/\b\f\n\r\t"`, `"\u00e9\u00E9"`, `"\u00g0"`, `"\u00e"`, `"\x"`, `"\`, `"abc`, "\"a\tb\"", "\"a\x01b\"", "\"a\x7fb\"",
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\ud83dx\ude00"`, `["\ud83d", "\ude00"]`,
	`{"\udc00":1}`, `"\ud83d\ude0"`, `"\ud83d\\ude00"`,
	"\"\xff\xfe\"", `"é 日本語"`, strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001), strings.Repeat("[", 9999) + "[]" + strings.Repeat("]", 9999),
	`{"file_path":"f","content":"` + strings.Repeat(`\tv0001 := compute(a, b)\n`, 100) + `"}`,
}

// TestCheckJSONMatchesValid: Check's verdicts are json.Valid's, and its
// surrogate verdict is the oracle's (hasLoneSurrogate, in body_test.go).
func TestCheckJSONMatchesValid(t *testing.T) {
	for _, b := range jsonBodies {
		assertCheckJSON(t, []byte(b))
	}
}

func FuzzCheckJSON(f *testing.F) {
	for _, b := range jsonBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(assertCheckJSON)
}

func assertCheckJSON(t *testing.T, b []byte) {
	t.Helper()
	valid, lone := Check(b)
	if want := json.Valid(b); valid != want {
		t.Fatalf("%.200q: Check valid=%v, json.Valid %v", b, valid, want)
	}
	if valid && lone != hasLoneSurrogate(b) {
		t.Fatalf("%.200q: Check lone=%v, hasLoneSurrogate %v", b, lone, !lone)
	}
}

// BenchmarkCheckJSON compares the validator with what it replaced on a 60
// KiB write body.
func BenchmarkCheckJSON(b *testing.B) {
	body, _ := json.Marshal(map[string]string{"file_path": "src.go", "content": strings.Repeat("\tv0001 := compute(a, b) * 0001\n", 2000)})
	b.Run("Check", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			Check(body)
		}
	})
	b.Run("json.Valid+hasLoneSurrogate", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			_ = json.Valid(body) && hasLoneSurrogate(body)
		}
	})
}
