package diagnostics

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem is one diagnostic of a file: its 1-based line (0 when the
// checker named none), its 1-based column (0 when it named none) and its
// message on one line.
type Problem struct {
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

// MarshalJSON writes a missing column as null.
func (p Problem) MarshalJSON() ([]byte, error) {
	var col any
	if p.Col > 0 {
		col = p.Col
	}
	return json.Marshal(struct {
		Line    int    `json:"line"`
		Col     any    `json:"col"`
		Message string `json:"message"`
	}{p.Line, col, p.Message})
}

// Limits of what one run's output can hold.
const (
	maxProblemsPerRun = 20000
	maxMessageBytes   = 500
	maxLineNumber     = 1 << 30
)

// subject is what a run checked: the file as the checker was told ({file}),
// the file's real path (checkers given an overlay name it), the working
// folder relative paths are resolved against, and the version's content.
type subject struct {
	file, real, dir string
	content         []byte
	// stdin: the checker read the version on stdin, and may call it so.
	stdin bool
}

// stdinNames are how tools name what they read on stdin.
var stdinNames = []string{"-", "<stdin>", "<standard input>", "stdin"}

// names reports whether p, as a checker printed it, is the checked file.
func (s subject) names(p string) bool {
	if p == "" {
		return false
	}
	if s.stdin && contains(stdinNames, p) {
		return true
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.dir, p)
	}
	p = filepath.Clean(p)
	return p == s.file || p == s.real
}

// parsed is a run's output read in its format: the problems about the
// checked file, and whether anything at all was in the format.
type parsed struct {
	problems  []Problem
	parsable  bool
	truncated bool
}

func (p *parsed) add(line, col int, msg string) {
	msg = cleanMessage(msg)
	if msg == "" {
		return
	}
	if len(p.problems) >= maxProblemsPerRun {
		p.truncated = true
		return
	}
	if line < 0 || line > maxLineNumber {
		line = 0
	}
	if col < 0 || col > maxLineNumber {
		col = 0
	}
	p.problems = append(p.problems, Problem{Line: line, Col: col, Message: msg})
}

// parse reads a run's stdout and stderr in format.
func parse(format string, stdout, stderr []byte, s subject) parsed {
	var p parsed
	switch format {
	case FormatShellcheckJSON1:
		parseShellcheckJSON1(stdout, s, &p)
	case FormatESLintJSON:
		parseESLintJSON(stdout, s, &p)
	case FormatPython:
		parsePython(stdout, s, &p)
		parsePython(stderr, s, &p)
	default:
		parseLines(stdout, s, &p)
		parseLines(stderr, s, &p)
	}
	return p
}

// lineRe is one "<path>:<line>[:<col>]: <message>" line. The path starts
// with no blank and holds no quote, parenthesis or tab, so a line of source
// code (gofmt prints the formatted file) is not taken for one.
var lineRe = regexp.MustCompile(`^([^\s"'()][^"'()\t]*?):([0-9]+)(?::([0-9]+))?: ?(.*)$`)

// toolPrefixRe is a tool's name before the path, as go vet prints type
// errors ("vet: ./a.go:3:2: undefined: x").
var toolPrefixRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*: `)

func parseLines(out []byte, s subject, p *parsed) {
	for _, raw := range bytes.Split(out, []byte("\n")) {
		line := strings.TrimRight(string(raw), "\r")
		m := lineRe.FindStringSubmatch(line)
		if m == nil || strings.TrimSpace(m[4]) == "" {
			continue
		}
		p.parsable = true
		file := m[1]
		if !s.names(file) {
			rest, ok := strings.CutPrefix(file, toolPrefixRe.FindString(file))
			if !ok || rest == file || !s.names(rest) {
				continue
			}
		}
		p.add(atoi(m[2]), atoi(m[3]), m[4])
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// parseShellcheckJSON1 reads `shellcheck -f json1`: {"comments": [{file,
// line, column, level, code, message}]}. A message reads as shellcheck's
// own gcc format does: "<level>: <message> [SC<code>]".
func parseShellcheckJSON1(out []byte, s subject, p *parsed) {
	var doc struct {
		Comments *[]struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Column  int    `json:"column"`
			Level   string `json:"level"`
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"comments"`
	}
	if json.Unmarshal(bytes.TrimSpace(out), &doc) != nil || doc.Comments == nil {
		return
	}
	p.parsable = true
	for _, c := range *doc.Comments {
		if !s.names(c.File) {
			continue
		}
		msg := c.Message
		if c.Level != "" {
			msg = c.Level + ": " + msg
		}
		if c.Code > 0 {
			msg += " [SC" + strconv.Itoa(c.Code) + "]"
		}
		p.add(c.Line, c.Column, msg)
	}
}

// parseESLintJSON reads `eslint -f json`: [{filePath, messages: [{ruleId,
// severity, message, line, column}]}]. A message reads "<error|warning>:
// <message> [<ruleId>]" (no rule for a parsing error).
func parseESLintJSON(out []byte, s subject, p *parsed) {
	var doc []struct {
		FilePath string `json:"filePath"`
		Messages []struct {
			RuleID   *string `json:"ruleId"`
			Severity int     `json:"severity"`
			Message  string  `json:"message"`
			Line     int     `json:"line"`
			Column   int     `json:"column"`
		} `json:"messages"`
	}
	trimmed := bytes.TrimSpace(out)
	if !bytes.HasPrefix(trimmed, []byte("[")) || json.Unmarshal(trimmed, &doc) != nil {
		return
	}
	p.parsable = true
	for _, f := range doc {
		if !s.names(f.FilePath) {
			continue
		}
		for _, m := range f.Messages {
			msg := m.Message
			switch m.Severity {
			case 2:
				msg = "error: " + msg
			case 1:
				msg = "warning: " + msg
			}
			if m.RuleID != nil && *m.RuleID != "" {
				msg += " [" + *m.RuleID + "]"
			}
			p.add(m.Line, m.Column, msg)
		}
	}
}

var (
	// pyFileRe is a traceback's location line.
	pyFileRe = regexp.MustCompile(`^\s*File "(.+)", line ([0-9]+)`)
	// pyErrorRe is the exception line that ends an error report.
	pyErrorRe = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Warning)): ?(.*)$`)
	// pySorryRe is py_compile's report of a SyntaxError subclass
	// (IndentationError, TabError): "Sorry: <Type>: <message> (<base
	// name>, line <n>)", without a column.
	pySorryRe = regexp.MustCompile(`^Sorry: ([A-Za-z_][A-Za-z0-9_.]*): (.*) \(([^()]*), line ([0-9]+)\)$`)
	// pyCaretRe is the caret line under the shown source line.
	pyCaretRe = regexp.MustCompile(`^([ \t\f\v]*)\^+ *$`)
)

// parsePython reads Python's error reports (`python3 -m py_compile`, a
// traceback): a `File "<path>", line <n>` line, the source line, a caret
// line, then "<Type>: <message>"; or py_compile's one line for an
// IndentationError or TabError, "Sorry: <Type>: <message> (<base name>,
// line <n>)". The column comes from the caret: Python
// shows the source line without its leading spaces and form feeds,
// indented by 4, so those are counted in the checked version's own line.
func parsePython(out []byte, s subject, p *parsed) {
	lines := strings.Split(string(out), "\n")
	var file string
	line, caret := 0, -1
	for _, l := range lines {
		l = strings.TrimRight(l, "\r")
		if m := pySorryRe.FindStringSubmatch(l); m != nil {
			p.parsable = true
			if m[3] == filepath.Base(s.file) || m[3] == filepath.Base(s.real) {
				p.add(atoi(m[4]), 0, m[1]+": "+m[2])
			}
			file = ""
			continue
		}
		if m := pyFileRe.FindStringSubmatch(l); m != nil {
			file, line, caret = m[1], atoi(m[2]), -1
			continue
		}
		if file == "" {
			continue
		}
		if m := pyCaretRe.FindStringSubmatch(l); m != nil {
			caret = len(m[1])
			continue
		}
		m := pyErrorRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		p.parsable = true
		if s.names(file) {
			col := 0
			if caret >= 4 {
				col = caret - 4 + leadingBlanks(s.content, line) + 1
			}
			msg := m[1]
			if m[2] != "" {
				msg += ": " + m[2]
			}
			p.add(line, col, msg)
		}
		file, line, caret = "", 0, -1
	}
}

// leadingBlanks counts the spaces and form feeds that start the 1-based
// line n of content (Python strips them from the line it shows, keeping
// tabs).
func leadingBlanks(content []byte, n int) int {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(content, '\n')
		if j < 0 {
			return 0
		}
		content = content[j+1:]
	}
	k := 0
	for k < len(content) && (content[k] == ' ' || content[k] == '\f') {
		k++
	}
	return k
}

// cleanMessage makes a message one line of valid UTF-8: each run of
// control characters and blanks is one space, and past maxMessageBytes it
// is cut at a character boundary and ends with "…".
func cleanMessage(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range msg {
		if r < 0x20 || r == 0x7f || r == ' ' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	out := b.String()
	if len(out) > maxMessageBytes {
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "…"
	}
	return out
}
