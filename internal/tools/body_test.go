package tools

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fs"
)

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

// TestBodyMessages pins the model text of every refusal of a tool body,
// whichever reader found it (jsonscan.Object), in the order they are
// checked.
func TestBodyMessages(t *testing.T) {
	long := strings.Repeat("k", 300)
	for body, want := range map[string]string{
		``:                                       "request body must be a JSON object",
		" \n\t":                                  "request body must be a JSON object",
		`[{"file_path":"a"}]`:                    "request body must be a JSON object",
		`"x"`:                                    "request body must be a JSON object",
		"{\"file_path\":\"\xff\"":                "request body is not valid UTF-8",
		`{"file_path":"a"`:                       "request body is not valid JSON",
		`{"file_path":"a"} {}`:                   "request body is not valid JSON",
		`{"file_path":"a\ud800"}`:                "request body has an unpaired UTF-16 surrogate escape",
		`{"file_path":"a","File_Path":"b"}`:      `request body has a duplicate key "File_Path"`,
		`{"` + long + `":1,"` + long + `":2}`:    `request body has a duplicate key "` + long[:256] + `..."`,
		`{"file_path":"a","\u0066ile_path":"b"}`: `request body has a duplicate key "file_path"`,
	} {
		_, err := decodeArgs([]byte(body))
		require.NotNil(t, err, "%q", body)
		assert.Equal(t, "INVALID_ARGUMENT", string(err.Code), "%q", body)
		assert.Equal(t, want, err.Message, "%q", body)
	}
	a, err := decodeArgs([]byte(`{"file_path":"a","offset":null}`))
	require.Nil(t, err)
	assert.Equal(t, []byte(`"a"`), a.get("file_path"))
	assert.Nil(t, a.get("offset"), "null is absent")
	assert.Nil(t, a.get("File_path"), "lookups are exact")
}
