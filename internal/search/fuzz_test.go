package search

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzGrepRecords feeds arbitrary rg --json streams to the parser: it must
// never panic, and what it keeps must respect the caps.
func FuzzGrepRecords(f *testing.F) {
	f.Add(`{"type":"match","data":{"path":{"text":"a"},"lines":{"text":"aéaéaéa\r\n"},"line_number":1}}`)
	f.Add(`{"type":"match","data":{"path":{"bytes":"/w=="},"lines":{"bytes":"6Q=="},"line_number":2}}`)
	f.Add(`{"type":"begin","data":{"path":{"text":"a"}}}` + "\n" + `{"data":{},"type":"summary"}`)
	f.Add(`{"type":"end"`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, stream string) {
		a := matchAccumulator{max: 3, lineMax: 8, cwd: "/w"}
		if err := a.consume(strings.NewReader(stream)); err != nil {
			return
		}
		if a.kept > 3 || a.kept > a.seen {
			t.Fatalf("kept %d of %d", a.kept, a.seen)
		}
		for _, f := range a.files {
			for _, m := range f.Matches {
				text := strings.TrimSuffix(m.Line, lineTruncated)
				if m.Line != lineNotUTF8 && len(text) > 8 {
					t.Fatalf("preview %q over the cap", m.Line)
				}
				if !utf8.ValidString(f.Path) {
					t.Fatalf("path %q is not UTF-8", f.Path)
				}
			}
		}
	})
}

// FuzzIncludeAndSampling checks the pure helpers never panic.
func FuzzIncludeAndSampling(f *testing.F) {
	f.Add("*.{ts,js}", "src", 3)
	f.Add("[", "", 1)
	f.Add(`\`, "/", 0)
	f.Fuzz(func(t *testing.T, s, root string, max int) {
		_ = hasTopLevelComma(s) // must not panic
		if max < 1 || max > 50 {
			max = 1
		}
		paths := strings.Split(s, "/")
		page, shown, groups := sampleAcrossTopLevel(paths, root, max)
		if len(page) > max || shown > groups {
			t.Fatalf("page %d (max %d), shown %d of %d", len(page), max, shown, groups)
		}
	})
}
