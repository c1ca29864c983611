package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/render"
)

func TestBatchLen(t *testing.T) {
	for body, want := range map[string]int{
		`[]`:                                    0,
		` [ ] `:                                 0,
		`[1]`:                                   1,
		`[ {"a":1} , {"b":2} ]`:                 2,
		`[{"s":"],[,{\"}"},{"t":[1,[2,3],{}]}]`: 2,
		`[{"s":"\\"},{"t":"\\\""}]`:             2,
		`[[],[[]],{}, "x,y" ,null]`:             5,
		"[\n{\"a\":\"\u00e9,\"}\n,\n{}\n]":      2,
		`[{},{}] trailing, ignored`:             2,
		`[{},{`:                                 2, // malformed: the SDK refuses it
	} {
		assert.Equal(t, want, batchLen([]byte(body)), body)
	}
}

// TestEncodedLenBounds: the bound is at least what encoding/json writes, the
// SDK's way (no HTML escaping) and json.Marshal's way (as it joins a
// batch), and exact for plain text.
func TestEncodedLenBounds(t *testing.T) {
	for _, s := range []string{
		"", "plain text\n", "\x00\x01\x1f\"\\\t\r\n", "<a href=\"x\">&amp;</a>", "\u2028\u2029 — é 日本 🙂",
		"bad \xff\xfe utf-8 \xe2\x80", strings.Repeat("\x01<", 1000),
	} {
		var sdkWay bytes.Buffer
		enc := json.NewEncoder(&sdkWay)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		marshalled, err := json.Marshal(s)
		require.NoError(t, err)
		bound := encodedLen(s)
		assert.GreaterOrEqual(t, bound, int64(sdkWay.Len()-1), "%q", s)
		assert.GreaterOrEqual(t, bound, int64(len(marshalled)), "%q", s)
		raw := json.RawMessage(bytes.TrimSuffix(sdkWay.Bytes(), []byte("\n")))
		joined, err := json.Marshal([]json.RawMessage{raw})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, rawLen(raw)+2, int64(len(joined)), "%q", s)
	}
	assert.Equal(t, int64(len(`"plain text\n"`)), encodedLen("plain text\n"))
}

// TestDefaultBudgetFigure pins the budget docs/mcp.md gives for the
// default caps.
func TestDefaultBudgetFigure(t *testing.T) {
	assert.Equal(t, int64(380_800), readAnswerBound(render.DefaultCaps(), false))
	assert.Equal(t, int64(10_287_104), defaultBudget(render.DefaultCaps(), false))
	assert.Equal(t, int64(17_131_520), defaultBudget(render.DefaultCaps(), true))
}

// TestReadBody: the body whole whatever its declared length, and the error
// that cut it short with what came before.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("0123456789", 1000)
	for _, length := range []int64{-1, 0, 1, 9999, 10000, 10001, 1 << 40} {
		got, err := readBody(iotest.HalfReader(strings.NewReader(body)), length)
		require.NoError(t, err, length)
		assert.Equal(t, body, string(got), length)
	}
	got, err := readBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(io.ErrUnexpectedEOF)), 10)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, "abc", string(got))
}
