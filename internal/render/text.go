package render

import (
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Argument messages, byte for byte as the original tool-fs's (docs/api.md, "Argument messages").
const (
	MsgFilePath     = "file_path must be a non-empty string"
	MsgOffset       = "offset must be a positive integer"
	MsgLimit        = "limit must be a positive integer"
	MsgOldString    = "old_string must be a non-empty string"
	MsgStringsEqual = "old_string and new_string must differ"
)

// MsgLimitMax is the message for a limit above the configured maximum.
func MsgLimitMax(max int) string {
	return "limit must be less than or equal to " + strconv.Itoa(max)
}

// MsgReadNotFound is the read message for a missing file.
func MsgReadNotFound(display string) string { return `cannot read "` + display + `": not found` }

// MsgReadNotRegular is the read message for a folder, FIFO, socket or device.
func MsgReadNotRegular(display string) string {
	return `cannot read "` + display + `": not a regular file`
}

// MsgReadBinary is the read message for ErrBinary.
func MsgReadBinary(display string) string { return `cannot read "` + display + `": binary file` }

// MsgReadInvalidUTF8 is the read message for ErrInvalidUTF8.
func MsgReadInvalidUTF8(display string) string {
	return `cannot read "` + display + `": invalid UTF-8 text`
}

// MsgOffsetOutOfRange is the read message for *OffsetOutOfRangeError.
func MsgOffsetOutOfRange(offset int, display string, total int) string {
	return "offset " + strconv.Itoa(offset) + ` is out of range for "` + display + `" (` + strconv.Itoa(total) + " lines)"
}

// ReadHeader opens a read output: the path and type elements and <content>.
func ReadHeader(display string) string {
	return "<path>" + display + "</path>\n<type>file</type>\n<content>\n"
}

// FooterText is the window's one footer line, without a newline.
func FooterText(w Window) string {
	end := w.Offset - 1
	if n := len(w.Lines); n > 0 {
		end = w.Lines[n-1].Number
	}
	a, b, next := strconv.Itoa(w.Offset), strconv.Itoa(end), strconv.Itoa(end+1)
	switch w.Footer {
	case FooterCapped:
		return "(Output capped. Showing lines " + a + "-" + b + ". Use offset=" + next + " to continue.)"
	case FooterLimit:
		return "(Showing lines " + a + "-" + b + " of " + strconv.Itoa(w.TotalLines) + ". Use offset=" + next + " to continue.)"
	}
	return "(End of file - total " + strconv.Itoa(w.TotalLines) + " lines)"
}

// ReadTail closes a read output: a blank line when lines were shown, the
// footer, and </content>.
func ReadTail(w Window) string {
	if len(w.Lines) == 0 {
		return FooterText(w) + "\n</content>"
	}
	return "\n" + FooterText(w) + "\n</content>"
}

// ReadOutput is the whole read output: ReadHeader, each line as
// "<number>: <text>\n" (or "<number>#<tag>: <text>\n" in an anchored
// window), ReadTail. The transports write the same bytes
// straight into their bodies (internal/handlers: the JSON answer and the
// streamed one).
func ReadOutput(display string, w Window) string {
	size := len(display) + 160 // header, footer and tail
	for _, l := range w.Lines {
		size += len(l.Text) + 15 // number, "#<tag>: ", newline
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(ReadHeader(display))
	var num [24]byte
	for _, l := range w.Lines {
		b.Write(AppendLinePrefix(num[:0], l))
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	b.WriteString(ReadTail(w))
	return b.String()
}

// WriteOutput is the write success text; created chooses "Created file" over
// "Updated file".
func WriteOutput(display string, created bool) string {
	what := "Updated file"
	if created {
		what = "Created file"
	}
	return "<path>" + display + "</path>\n<type>file</type>\n<content>\n" + what + "\n</content>"
}

// EditOutput is the edit success text. Its wording follows the replace_all
// argument, not the number of replacements (as the original tool-fs).
func EditOutput(display string, replaceAll bool) string {
	if replaceAll {
		return "The file " + display + " has been updated. All occurrences were successfully replaced."
	}
	return "The file " + display + " has been updated successfully."
}

// Quote puts a value the caller sent (a key, a tool name, a header) in
// double quotes for a message, cut to its first 256 bytes and "..." so a
// huge value cannot make the message huge. The bytes are as sent: nothing
// is escaped.
func Quote(s string) string {
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return `"` + s + `"`
}

// ErrorOutput is the model text of any failure.
func ErrorOutput(message string) string { return "Error: " + message }

// Remedy is what write and edit append to the message of an error with the
// given code (space, em dash, space, instruction), or "" for other codes.
func Remedy(code fault.Code) string {
	switch code {
	case fault.CodeStaleVersion:
		return " \u2014 re-read the file, then retry"
	case fault.CodeNotObserved:
		return " \u2014 read the file, then retry"
	}
	return ""
}

// langByExt is the original tool-fs's extension map (read-render.ts).
var langByExt = map[string]string{
	"ts": "ts", "tsx": "tsx", "mts": "ts", "cts": "ts",
	"js": "js", "jsx": "jsx", "mjs": "js", "cjs": "js",
	"json": "json", "jsonc": "json",
	"py": "py", "rb": "rb", "go": "go", "rs": "rs", "java": "java",
	"c": "c", "h": "c", "cc": "cpp", "cpp": "cpp", "hpp": "cpp", "cxx": "cpp",
	"cs": "cs", "kt": "kotlin", "swift": "swift", "php": "php",
	"sh": "sh", "bash": "sh", "zsh": "sh",
	"yaml": "yaml", "yml": "yaml", "toml": "toml", "ini": "ini",
	"md": "md", "markdown": "md", "mdx": "mdx",
	"html": "html", "htm": "html", "css": "css", "scss": "scss", "less": "less",
	"sql": "sql", "xml": "xml", "lua": "lua",
}

// Lang is the syntax-highlighting hint for path's extension, or "" when it
// is unknown. The extension is case-insensitive and a dotfile (".bashrc")
// has none; both '/' and '\' separate folders, as in the original tool-fs.
func Lang(path string) string {
	base := path[strings.LastIndexAny(path, `/\`)+1:]
	dot := strings.LastIndexByte(base, '.')
	if dot <= 0 {
		return ""
	}
	return langByExt[strings.ToLower(base[dot+1:])]
}
