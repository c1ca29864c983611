package handlers_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// corpusCase is one case of testdata/edit-corpus.json: a peer's own edit
// test (source names the repository, path, commit and test) as data: the
// file, the edits (one is sent as old_string/new_string, more as edits),
// and what the peer's test says: apply (expect holds the bytes) or refuse.
// two_places marks a case the peer applies at the first or nearest of
// several places; ours holds our bytes where they differ from the peer's
// by a decision of SPEC (differs says which).
type corpusCase struct {
	ID       string `json:"id"`
	Source   string `json:"source"`
	Category string `json:"category"`
	File     string `json:"file"`
	Edits    []struct {
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all,omitempty"`
	} `json:"edits"`
	Peer      string  `json:"peer"`
	Expect    *string `json:"expect"`
	TwoPlaces bool    `json:"two_places"`
	Ours      *string `json:"ours"`
	Differs   string  `json:"differs"`
}

// Outcomes of a corpus case, as docs/edits.md reports them.
const (
	outCorrect   = "correct"
	outTwoPlaces = "two places" // refused as ambiguous where the peer picks one: correct by design
	outDiffers   = "differs"    // our bytes follow a decision of SPEC, not the peer's
	outRefused   = "refused"
	outWrong     = "wrong"
)

// TestEditCorpus runs the conformance corpus of the peers' edit tests
// through the real server (extended profile) and counts per category
// what is correct, refused, or wrong (docs/edits.md, "Measured against
// the peers' edit tests"). Nothing may be applied wrongly; the totals are
// pinned so that a change of any outcome shows here. With
// TOOLFS_EDIT_CORPUS_REPORT set it prints the table and every case that
// is not correct.
func TestEditCorpus(t *testing.T) {
	cases := loadEditCorpus(t)

	h := start(t, options{})
	outcomes := runEditCorpus(t, h, cases)

	table, totals := corpusTable(cases, outcomes)
	if os.Getenv("TOOLFS_EDIT_CORPUS_REPORT") != "" {
		fmt.Println(table)
		for _, c := range cases {
			if o := outcomes[c.ID]; o != outCorrect {
				fmt.Printf("%-10s %-22s %-45s %s\n", o, c.Category, c.ID, c.Source)
			}
		}
	}
	assert.Equal(t, map[string]int{outCorrect: 102, outTwoPlaces: 3, outDiffers: 1, outRefused: 10, outWrong: 0}, totals, table)
}

// loadEditCorpus reads testdata/edit-corpus.json.
func loadEditCorpus(t *testing.T) []corpusCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/edit-corpus.json")
	require.NoError(t, err)
	var cases []corpusCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	return cases
}

// runEditCorpus sends every case as an edit through h's server and
// answers each case's outcome; a case applied wrongly fails t.
func runEditCorpus(t *testing.T, h *harness, cases []corpusCase) map[string]string {
	t.Helper()
	outcomes := map[string]string{}
	for _, c := range cases {
		name := c.ID + ".txt"
		h.file(name, c.File)
		require.Equal(t, 200, h.tool("read", "corpus", obj{"file_path": name}).Status, c.ID)
		body := obj{"file_path": name}
		if len(c.Edits) == 1 {
			e := c.Edits[0]
			body["old_string"], body["new_string"], body["replace_all"] = e.OldString, e.NewString, e.ReplaceAll
		} else {
			items := make([]obj, len(c.Edits))
			for i, e := range c.Edits {
				items[i] = obj{"old_string": e.OldString, "new_string": e.NewString, "replace_all": e.ReplaceAll}
			}
			body["edits"] = items
		}
		r := h.tool("edit", "corpus", body)
		got := h.contents(name)
		var out string
		switch {
		case r.Status == 200 && c.Peer == "refuse":
			out = outWrong
		case r.Status == 200:
			want := *c.Expect
			if c.Ours != nil {
				want = *c.Ours
			}
			switch {
			case got != want:
				out = outWrong
			case c.Ours != nil:
				out = outDiffers
			default:
				out = outCorrect
			}
		case got != c.File:
			out = outWrong // a refusal that changed the file
		case r.Code == "FS_AMBIGUOUS_EDIT" && c.TwoPlaces:
			out = outTwoPlaces
		case c.Peer == "refuse":
			out = outCorrect
		default:
			out = outRefused
		}
		outcomes[c.ID] = out
		if out == outWrong {
			t.Errorf("%s (%s) applied wrongly: %d %s\ngot  %q\nfile %q", c.ID, c.Source, r.Status, r.Output, got, c.File)
		}
	}
	return outcomes
}

// corpusTable is the markdown table of outcomes per category, and the
// totals.
func corpusTable(cases []corpusCase, outcomes map[string]string) (string, map[string]int) {
	rows := make([][2]string, len(cases))
	for i, c := range cases {
		rows[i] = [2]string{c.Category, outcomes[c.ID]}
	}
	return outcomeTable("category", rows)
}

// outcomeTable is the markdown table of rows (a group and an outcome
// each) per group, sorted, with a last row of the totals.
func outcomeTable(group string, rows [][2]string) (string, map[string]int) {
	cols := []string{outCorrect, outTwoPlaces, outDiffers, outRefused, outWrong}
	per := map[string]map[string]int{}
	totals := map[string]int{}
	for _, o := range cols {
		totals[o] = 0
	}
	for _, r := range rows {
		if per[r[0]] == nil {
			per[r[0]] = map[string]int{}
		}
		per[r[0]][r[1]]++
		totals[r[1]]++
	}
	cats := make([]string, 0, len(per))
	for k := range per {
		cats = append(cats, k)
	}
	sort.Strings(cats)
	var b strings.Builder
	b.WriteString("| " + group + " | cases | " + strings.Join(cols, " | ") + " |\n|---|---|" + strings.Repeat("---|", len(cols)) + "\n")
	row := func(name string, m map[string]int) {
		n := 0
		for _, v := range m {
			n += v
		}
		fmt.Fprintf(&b, "| %s | %d |", name, n)
		for _, o := range cols {
			fmt.Fprintf(&b, " %d |", m[o])
		}
		b.WriteByte('\n')
	}
	for _, k := range cats {
		row(k, per[k])
	}
	row("**all**", totals)
	return b.String(), totals
}
