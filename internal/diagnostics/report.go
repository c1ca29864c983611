package diagnostics

import (
	"strconv"
	"strings"
)

// Result is one checker's answer about one change.
type Result struct {
	// Checker is the checker's name.
	Checker string `json:"checker"`
	// Fresh is true when the problems come from the checker run on exactly
	// the version the change produced; false when it could not answer.
	Fresh bool `json:"fresh"`
	// Introduced are the problems after the change that were not there
	// before, in line order, at most MaxIntroducedListed of them.
	Introduced []Problem `json:"introduced"`
	// More counts the introduced problems past MaxIntroducedListed.
	More int `json:"more,omitempty"`
	// Resolved counts the problems before the change that are gone.
	Resolved int `json:"resolved"`
	// Unavailable is why the checker could not answer ("timed out after
	// 5s"), "" when it answered.
	Unavailable string `json:"unavailable,omitempty"`
}

// MaxIntroducedListed bounds a Result's Introduced list; the text shows at
// most MaxShown.
const (
	MaxIntroducedListed = 100
	MaxShown            = 20
)

// The model-facing texts (docs/diagnostics.md, "What the model sees").
const (
	HeaderNew       = "New problems after this change (the change was applied):"
	prefixUnanswer  = "Diagnostics unavailable: "
	reasonNoStart   = "did not start"
	reasonCancelled = "was cancelled"
	onBefore        = " on the version before"
)

func reasonTimeout(limit string) string { return "timed out after " + limit }

func reasonExit(code int) string {
	return "exited with status " + strconv.Itoa(code) + " and printed nothing it could parse"
}

func reasonSignal(name string) string {
	return "was killed by signal " + name + " and printed nothing it could parse"
}

func reasonOverflow(limit int64) string {
	return "printed more than " + strconv.FormatInt(limit, 10) + " bytes"
}

// Report is what the checkers said about one change, in the order of the
// configuration. The zero Report (no checker matched the file) adds
// nothing to an answer.
type Report struct {
	results []Result
	// introduced are all the results' introduced problems, before
	// MaxIntroducedListed cut each list, deduplicated and in line order.
	introduced []Problem
}

// Results are the checkers' answers.
func (r Report) Results() []Result { return r.results }

// Text is what the answer's text gains after the tool's own sentence: ""
// when nothing is new and every checker answered; else, after a newline,
// HeaderNew and at most MaxShown lines "<line>:<col>: <message>" (the last
// with " (and <n> more)"), then one line "Diagnostics unavailable:
// <checker> <reason>." per checker that could not answer, each after a
// newline. A problem without a column shows as "<line>: <message>".
func (r Report) Text() string {
	var b strings.Builder
	if len(r.introduced) > 0 {
		b.WriteString("\n" + HeaderNew)
		for i, p := range r.introduced[:min(len(r.introduced), MaxShown)] {
			b.WriteString("\n" + strconv.Itoa(p.Line))
			if p.Col > 0 {
				b.WriteString(":" + strconv.Itoa(p.Col))
			}
			b.WriteString(": " + p.Message)
			if i == MaxShown-1 && len(r.introduced) > MaxShown {
				b.WriteString(" (and " + strconv.Itoa(len(r.introduced)-MaxShown) + " more)")
			}
		}
	}
	for _, res := range r.results {
		if res.Unavailable != "" {
			b.WriteString("\n" + prefixUnanswer + res.Checker + " " + res.Unavailable + ".")
		}
	}
	return b.String()
}

// Metadata is the answer's "diagnostics" member: nil when no checker
// matched, one Result for one checker, a list for several.
func (r Report) Metadata() any {
	switch len(r.results) {
	case 0:
		return nil
	case 1:
		return r.results[0]
	}
	return r.results
}

// newReport gathers the results: the text's problems are all of theirs,
// an identical problem named by two checkers once.
func newReport(results []Result, all [][]Problem) Report {
	var merged []Problem
	seen := map[Problem]bool{}
	for _, ps := range all {
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				merged = append(merged, p)
			}
		}
	}
	sortProblems(merged)
	for i := range results {
		if results[i].Introduced == nil {
			results[i].Introduced = []Problem{}
		}
		if n := len(results[i].Introduced); n > MaxIntroducedListed {
			results[i].More = n - MaxIntroducedListed
			results[i].Introduced = results[i].Introduced[:MaxIntroducedListed]
		}
	}
	return Report{results: results, introduced: merged}
}
