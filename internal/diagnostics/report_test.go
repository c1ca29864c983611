package diagnostics

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The texts an answer gains, byte for byte (docs/diagnostics.md, "What the
// model sees").
func TestReportText(t *testing.T) {
	many := make([]Problem, 23)
	for i := range many {
		many[i] = Problem{Line: i + 1, Col: 2, Message: fmt.Sprintf("problem %d", i+1)}
	}
	exactly20 := many[:20]
	for _, tc := range []struct {
		name    string
		results []Result
		want    string
	}{
		{"no checker matched", nil, ""},
		{"nothing new, every checker answered", []Result{{Checker: "gofmt", Fresh: true, Resolved: 2}}, ""},
		{
			"new problems",
			[]Result{{Checker: "gofmt", Fresh: true, Introduced: []Problem{{5, 1, "expected operand, found '}'"}, {7, 0, "no column"}}}},
			"\nNew problems after this change (the change was applied):\n5:1: expected operand, found '}'\n7: no column",
		},
		{
			"at most 20 lines, the last saying how many more",
			[]Result{{Checker: "x", Fresh: true, Introduced: many}},
			"\nNew problems after this change (the change was applied):\n" +
				"1:2: problem 1\n2:2: problem 2\n3:2: problem 3\n4:2: problem 4\n5:2: problem 5\n" +
				"6:2: problem 6\n7:2: problem 7\n8:2: problem 8\n9:2: problem 9\n10:2: problem 10\n" +
				"11:2: problem 11\n12:2: problem 12\n13:2: problem 13\n14:2: problem 14\n15:2: problem 15\n" +
				"16:2: problem 16\n17:2: problem 17\n18:2: problem 18\n19:2: problem 19\n20:2: problem 20 (and 3 more)",
		},
		{
			"exactly 20 lines say no more",
			[]Result{{Checker: "x", Fresh: true, Introduced: exactly20}},
			"\nNew problems after this change (the change was applied):\n" +
				"1:2: problem 1\n2:2: problem 2\n3:2: problem 3\n4:2: problem 4\n5:2: problem 5\n" +
				"6:2: problem 6\n7:2: problem 7\n8:2: problem 8\n9:2: problem 9\n10:2: problem 10\n" +
				"11:2: problem 11\n12:2: problem 12\n13:2: problem 13\n14:2: problem 14\n15:2: problem 15\n" +
				"16:2: problem 16\n17:2: problem 17\n18:2: problem 18\n19:2: problem 19\n20:2: problem 20",
		},
		{
			"a checker that could not answer, alone",
			[]Result{{Checker: "shellcheck", Unavailable: reasonTimeout("5s")}},
			"\nDiagnostics unavailable: shellcheck timed out after 5s.",
		},
		{
			"several checkers: one list in line order, identical problems once, then the unavailable",
			[]Result{
				{Checker: "gofmt", Fresh: true, Introduced: []Problem{{4, 2, "expected operand"}, {9, 1, "x"}}},
				{Checker: "vet", Unavailable: reasonExit(3)},
				{Checker: "gotype", Fresh: true, Introduced: []Problem{{4, 2, "expected operand"}, {6, 3, "undefined: y"}}},
				{Checker: "lint", Unavailable: reasonNoStart},
			},
			"\nNew problems after this change (the change was applied):\n4:2: expected operand\n6:3: undefined: y\n9:1: x" +
				"\nDiagnostics unavailable: vet exited with status 3 and printed nothing it could parse." +
				"\nDiagnostics unavailable: lint did not start.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := make([][]Problem, len(tc.results))
			for i, r := range tc.results {
				all[i] = r.Introduced
			}
			assert.Equal(t, tc.want, newReport(tc.results, all).Text())
		})
	}
}

// Each reason, as the unavailable line ends.
func TestReasons(t *testing.T) {
	assert.Equal(t, "did not start", reasonNoStart)
	assert.Equal(t, "timed out after 1.5s", reasonTimeout("1.5s"))
	assert.Equal(t, "exited with status 3 and printed nothing it could parse", reasonExit(3))
	assert.Equal(t, "was killed by signal SIGSEGV and printed nothing it could parse", reasonSignal("SIGSEGV"))
	assert.Equal(t, "printed more than 1048576 bytes", reasonOverflow(1<<20))
	assert.Equal(t, "was cancelled", reasonCancelled)
	assert.Equal(t, "timed out after 5s on the version before", reasonTimeout("5s")+onBefore)
}

func TestReportMetadata(t *testing.T) {
	js := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	assert.Nil(t, Report{}.Metadata())
	one := newReport([]Result{{Checker: "gofmt", Fresh: true, Introduced: []Problem{{5, 1, "x"}, {6, 0, "y"}}, Resolved: 1}}, nil)
	assert.Equal(t, `{"checker":"gofmt","fresh":true,"introduced":[{"line":5,"col":1,"message":"x"},{"line":6,"col":null,"message":"y"}],"resolved":1}`, js(one.Metadata()))
	two := newReport([]Result{{Checker: "a", Fresh: true}, {Checker: "b", Unavailable: reasonNoStart}}, nil)
	assert.Equal(t, `[{"checker":"a","fresh":true,"introduced":[],"resolved":0},{"checker":"b","fresh":false,"introduced":[],"resolved":0,"unavailable":"did not start"}]`, js(two.Metadata()))

	many := make([]Problem, MaxIntroducedListed+7)
	for i := range many {
		many[i] = Problem{Line: i + 1, Message: "m"}
	}
	capped := newReport([]Result{{Checker: "a", Fresh: true, Introduced: many}}, [][]Problem{many})
	res := capped.Metadata().(Result)
	assert.Len(t, res.Introduced, MaxIntroducedListed)
	assert.Equal(t, 7, res.More)
	assert.Contains(t, capped.Text(), "20: m (and 87 more)")
}
