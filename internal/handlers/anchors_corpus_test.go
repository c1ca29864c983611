package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// anchorsCase is one case of the anchors dialect's corpus
// (testdata/anchors-corpus.json): a peer's test of its own anchored-line
// tool, as the file, the edits by line number (the test turns each into
// the anchor an anchored read shows for that line; stale sends another
// tag, invalid a reference that is no anchor), and what the peer's test
// says.
type anchorsCase struct {
	ID       string `json:"id"`
	Source   string `json:"source"`
	Category string `json:"category"`
	File     string `json:"file"`
	Edits    []struct {
		Op      string `json:"op"`
		Start   int    `json:"start"`
		End     int    `json:"end"`
		At      int    `json:"at"`
		Text    string `json:"text"`
		Stale   bool   `json:"stale"`
		Invalid bool   `json:"invalid"`
	} `json:"edits"`
	Peer   string  `json:"peer"`
	Expect *string `json:"expect"`
}

// runAnchorsCorpus reads each case's file in the anchors dialect and
// sends its edits to edit_lines through h's server, answering each case's
// outcome; a case applied wrongly fails t.
func runAnchorsCorpus(t *testing.T, h *harness) ([]anchorsCase, map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("testdata/anchors-corpus.json")
	require.NoError(t, err)
	var cases []anchorsCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	outcomes := map[string]string{}
	for i, c := range cases {
		name := fmt.Sprintf("anchors-%03d.txt", i)
		session := "anchors-" + c.ID
		h.file(name, c.File)
		r := h.do(http.MethodPost, "/tools/read?dialect=anchors", `{"file_path":"`+name+`"}`, "X-Session-ID", session)
		require.Equal(t, 200, r.Status, r.Raw)
		var meta struct {
			Lines []struct {
				Number int    `json:"number"`
				Tag    string `json:"tag"`
			} `json:"lines"`
		}
		require.NoError(t, json.Unmarshal(r.Metadata, &meta))
		anchor := func(n int, stale, invalid bool) string {
			switch {
			case invalid:
				return "invalid"
			case n < 1 || n > len(meta.Lines):
				return fmt.Sprintf("%d#AA", n)
			}
			tag := meta.Lines[n-1].Tag
			if stale {
				tag = map[bool]string{true: "BB", false: "AA"}[tag == "AA"]
			}
			return fmt.Sprintf("%d#%s", n, tag)
		}
		var edits []obj
		for _, e := range c.Edits {
			item := obj{"op": e.Op, "text": e.Text}
			if e.At > 0 {
				item["at"] = anchor(e.At, e.Stale, e.Invalid)
			} else {
				item["start"] = anchor(e.Start, e.Stale, e.Invalid)
				if e.End > 0 {
					item["end"] = anchor(e.End, e.Stale, e.Invalid)
				}
			}
			edits = append(edits, item)
		}
		a := h.tool("edit_lines", session, obj{"file_path": name, "edits": edits})
		got := h.contents(name)
		var out string
		switch {
		case a.Status == 200 && (c.Peer == "refuse" || got != *c.Expect):
			out = outWrong
		case a.Status == 200:
			out = outCorrect
		case got != c.File:
			out = outWrong
		case c.Peer == "refuse":
			out = outCorrect
		default:
			out = outRefused
		}
		outcomes[c.ID] = out
		if out == outWrong {
			t.Errorf("%s (%s) applied wrongly: %d %s\ngot %q", c.ID, c.Source, a.Status, a.Output, got)
		}
	}
	return cases, outcomes
}
