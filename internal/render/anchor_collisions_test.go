package render

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relocationWindow is how far edit_lines looks for anchors that moved.
const relocationWindow = 20

// TestAnchorCollisionsInThisRepo measures the tags on real code: this
// repository's own Go files (docs/edits.md, "Anchored lines", where the
// numbers are kept; go test -v -run TestAnchorCollisionsInThisRepo
// ./internal/render/ prints them). It holds the numbers near what 256 tags
// predict, so a change of hash or alphabet that clusters them fails.
func TestAnchorCollisionsInThisRepo(t *testing.T) {
	var files [][]string
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && strings.HasSuffix(p, ".go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, strings.Split(strings.TrimSuffix(string(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))), "\n"), "\n"))
		}
		return nil
	})
	require.NoError(t, err)
	var (
		lines, adjacent, adjacentSame, adjacentDistinct int
		near, nearSame, nearDistinct                    int
		alone, spurious1, spurious2, pairs              int
		spurious2u, pairAlone, pairAloneU               int
	)
	for _, f := range files {
		tg := make([]string, len(f))
		for i, l := range f {
			tg[i] = TagString(l)
		}
		lines += len(f)
		for i := range f {
			if i+1 < len(f) {
				adjacent++
				if tg[i] == tg[i+1] {
					if f[i] == f[i+1] {
						adjacentSame++
					} else {
						adjacentDistinct++
					}
				}
			}
			// Lines within the relocation window that share line i's tag.
			matches := 0
			for d := -relocationWindow; d <= relocationWindow; d++ {
				j := i + d
				if d == 0 || j < 0 || j >= len(f) {
					continue
				}
				if d > 0 {
					near++
					if tg[i] == tg[j] {
						if f[i] == f[j] {
							nearSame++
						} else {
							nearDistinct++
						}
					}
				}
				if tg[i] == tg[j] {
					matches++
				}
			}
			if matches == 0 {
				alone++ // a single anchor that moved is found, unambiguously
			}
			if matches == 1 {
				spurious1++ // a single anchor whose line changed would be "found" elsewhere
			}
			// Two anchors two lines apart (a three-line replace) that both
			// changed in place: found together at exactly one other offset.
			if k := i + 2; k < len(f) {
				pairs++
				found := 0
				for d := -relocationWindow; d <= relocationWindow; d++ {
					a, b := i+d, k+d
					if d != 0 && a >= 0 && b < len(f) && tg[a] == tg[i] && tg[b] == tg[k] {
						found++
					}
				}
				if found == 1 {
					spurious2++
					if count(tg, i, tg[i]) == 1 || count(tg, k, tg[k]) == 1 {
						spurious2u++
					}
				}
				if found == 0 {
					pairAlone++
					if count(tg, i, tg[i]) == 0 || count(tg, k, tg[k]) == 0 {
						pairAloneU++
					}
				}
			}
		}
	}
	pct := func(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }
	t.Logf("%d Go files, %d lines", len(files), lines)
	t.Logf("adjacent lines sharing a tag: %.2f%% (equal text %.2f%%, different text %.2f%%; 256 tags predict 0.39%% for different text)",
		pct(adjacentSame+adjacentDistinct, adjacent), pct(adjacentSame, adjacent), pct(adjacentDistinct, adjacent))
	t.Logf("pairs of lines at most %d apart sharing a tag: %.2f%% (equal text %.2f%%, different text %.2f%%)",
		relocationWindow, pct(nearSame+nearDistinct, near), pct(nearSame, near), pct(nearDistinct, near))
	t.Logf("lines whose tag no other line within ±%d has: %.1f%%", relocationWindow, pct(alone, lines))
	t.Logf("lines whose tag exactly one other line within ±%d has (one anchor would be relocated wrongly if its line changed): %.1f%%", relocationWindow, pct(spurious1, lines))
	t.Logf("two anchors two lines apart found together at exactly one other offset: %.3f%%", pct(spurious2, pairs))
	t.Logf("  ... of which one of the two tags is carried by no other line within ±%d: %.3f%%", relocationWindow, pct(spurious2u, pairs))
	t.Logf("two anchors two lines apart found nowhere else (a moved pair is found): %.1f%%, and one of them unique too: %.1f%%", pct(pairAlone, pairs), pct(pairAloneU, pairs))
	require.Greater(t, lines, 10000)
	assert.Less(t, pct(adjacentDistinct, adjacent), 0.8)
	assert.Less(t, pct(nearDistinct, near), 0.8)
	assert.Less(t, pct(spurious1, lines), 20.0)
	assert.Less(t, pct(spurious2, pairs), 4.0)
}

// count is how many lines within the relocation window of line i, i
// itself left out, carry tag.
func count(tg []string, i int, tag string) int {
	n := 0
	for d := -relocationWindow; d <= relocationWindow; d++ {
		if j := i + d; d != 0 && j >= 0 && j < len(tg) && tg[j] == tag {
			n++
		}
	}
	return n
}
