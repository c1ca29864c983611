package render

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolfs/toolfs-api/internal/fault"
)

func TestMessages(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"file_path", MsgFilePath, "file_path must be a non-empty string"},
		{"offset", MsgOffset, "offset must be a positive integer"},
		{"limit", MsgLimit, "limit must be a positive integer"},
		{"limit max", MsgLimitMax(2000), "limit must be less than or equal to 2000"},
		{"old_string", MsgOldString, "old_string must be a non-empty string"},
		{"strings equal", MsgStringsEqual, "old_string and new_string must differ"},
		{"not found", MsgReadNotFound("/w/a.txt"), `cannot read "/w/a.txt": not found`},
		{"not regular", MsgReadNotRegular("/w/dir"), `cannot read "/w/dir": not a regular file`},
		{"binary", MsgReadBinary("/w/a.bin"), `cannot read "/w/a.bin": binary file`},
		{"invalid UTF-8", MsgReadInvalidUTF8("/w/a.txt"), `cannot read "/w/a.txt": invalid UTF-8 text`},
		{"offset out of range", MsgOffsetOutOfRange(9, "/w/a.txt", 2), `offset 9 is out of range for "/w/a.txt" (2 lines)`},
		{"offset out of range, empty", MsgOffsetOutOfRange(2, "/w/e.txt", 0), `offset 2 is out of range for "/w/e.txt" (0 lines)`},
		{"error output", ErrorOutput(MsgReadNotFound("/w/a.txt")), `Error: cannot read "/w/a.txt": not found`},
		{"write created", WriteOutput("/w/a.txt", true), "<path>/w/a.txt</path>\n<type>file</type>\n<content>\nCreated file\n</content>"},
		{"write updated", WriteOutput("/w/a.txt", false), "<path>/w/a.txt</path>\n<type>file</type>\n<content>\nUpdated file\n</content>"},
		{"edit", EditOutput("/w/a.txt", false), "The file /w/a.txt has been updated successfully."},
		{"edit replace_all", EditOutput("/w/a.txt", true), "The file /w/a.txt has been updated. All occurrences were successfully replaced."},
		{"stale remedy", ErrorOutput(`cannot write "/w/a.txt": file changed since it was read` + Remedy(fault.CodeStaleVersion)),
			`Error: cannot write "/w/a.txt": file changed since it was read — re-read the file, then retry`},
		{"not observed remedy", ErrorOutput(`edit requires reading "/w/a.txt" first` + Remedy(fault.CodeNotObserved)),
			`Error: edit requires reading "/w/a.txt" first — read the file, then retry`},
		{"no remedy for not found", Remedy(fault.CodeNotFound), ""},
		{"no remedy for empty code", Remedy(""), ""},
		{"read header", ReadHeader("/w/a.txt"), "<path>/w/a.txt</path>\n<type>file</type>\n<content>\n"},
		{"line text", LineText(Line{Number: 12, Text: "x := 1"}), "12: x := 1\n"},
		{"empty line text", LineText(Line{Number: 3}), "3: \n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestFooterAndTail(t *testing.T) {
	lines := []Line{{Number: 5, Text: "five"}, {Number: 6, Text: "six"}}
	tests := []struct {
		name   string
		win    Window
		footer string
		tail   string
	}{
		{"eof", Window{Offset: 5, Lines: lines, TotalLines: 6, Footer: FooterEOF},
			"(End of file - total 6 lines)", "\n(End of file - total 6 lines)\n</content>"},
		{"one line", Window{Offset: 1, Lines: []Line{{Number: 1, Text: "a"}}, TotalLines: 1, Footer: FooterEOF},
			"(End of file - total 1 lines)", "\n(End of file - total 1 lines)\n</content>"},
		{"limit", Window{Offset: 5, Lines: lines, TotalLines: 10, Footer: FooterLimit},
			"(Showing lines 5-6 of 10. Use offset=7 to continue.)", "\n(Showing lines 5-6 of 10. Use offset=7 to continue.)\n</content>"},
		{"capped", Window{Offset: 5, Lines: lines, TotalLines: 10, Footer: FooterCapped},
			"(Output capped. Showing lines 5-6. Use offset=7 to continue.)", "\n(Output capped. Showing lines 5-6. Use offset=7 to continue.)\n</content>"},
		{"empty", Window{Offset: 1, TotalLines: 0},
			"(End of file - total 0 lines)", "(End of file - total 0 lines)\n</content>"},
		{"empty capped window at an offset", Window{Offset: 4, TotalLines: 9, Footer: FooterCapped},
			"(Output capped. Showing lines 4-3. Use offset=4 to continue.)", "(Output capped. Showing lines 4-3. Use offset=4 to continue.)\n</content>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.footer, FooterText(tt.win))
			assert.Equal(t, tt.tail, ReadTail(tt.win))
		})
	}
}

func TestLang(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/w/main.go", "go"},
		{"/w/App.TSX", "tsx"},
		{"/w/README.MD", "md"},
		{"a.mts", "ts"},
		{"lib.hpp", "cpp"},
		{"Main.kt", "kotlin"},
		{"run.zsh", "sh"},
		{"conf.yml", "yaml"},
		{"x.jsonc", "json"},
		{"archive.tar.gz", ""},
		{"/w/.bashrc", ""},
		{"/w/.eslintrc.json", "json"},
		{"/w/Makefile", ""},
		{"/w/file.", ""},
		{"/w/src.d/noext", ""},
		{`C:\w\main.py`, "py"},
		{`C:\w.go\noext`, ""},
		{"foo.__proto__", ""},
		{"foo.constructor", ""},
		{"foo.toString", ""},
		{"__proto__", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			assert.Equal(t, tt.want, Lang(tt.path))
		})
	}
}

// LineText is one numbered line of a read output, newline included: the
// form ReadOutput and the transports write without building it.
func LineText(l Line) string { return strconv.Itoa(l.Number) + ": " + l.Text + "\n" }

// A value quoted in a message keeps its bytes and stops after 256 of them.
func TestQuote(t *testing.T) {
	assert.Equal(t, `"edit"`, Quote("edit"))
	assert.Equal(t, `""`, Quote(""))
	assert.Equal(t, `"a\"b"`, Quote(`a\"b`), "nothing is escaped")
	long := strings.Repeat("k", 256)
	assert.Equal(t, `"`+long+`"`, Quote(long))
	assert.Equal(t, `"`+long+`..."`, Quote(long+"kk"))
}
