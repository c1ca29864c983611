package search

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

const (
	grepRecovery  = "The complete result could not be saved; narrow pattern, path, or include to see more."
	lineTruncated = " (line truncated)"
	lineNotUTF8   = "(line is not valid UTF-8)"
	scanBufInit   = 64 << 10 // initial scanner buffer; it grows up to the raw budget
)

// grepArgs is the original tool-fs's argv after --no-config: rg's default filtering
// (.gitignore, hidden files skipped) applies, but only with ignore files
// inside the searched tree: none from the folders above it, the user's
// global one or .git/info/exclude (which a .git file may place anywhere).
// The server's private files are excluded after the include glob, so it
// cannot bring them back.
func grepArgs(private []string, pattern, include, root string) []string {
	args := []string{"--json", "--regexp=" + pattern, "--no-ignore-parent", "--no-ignore-global", "--no-ignore-exclude"}
	if include != "" {
		args = append(args, "--glob="+include)
	}
	args = append(args, private...)
	args = append(args, "--")
	if root != "" {
		args = append(args, root)
	}
	return args
}

// Grep searches file contents under path (a file or folder; default: the
// session cwd) for the ripgrep regex pattern, optionally only in files
// matching the include glob. cwd is the session cwd, already resolved by the
// caller through fsys. At most 250 matches are shown, grouped by file in the
// order rg reports them; every match is counted. Errors are *fault.Error: a search code, or the
// code of resolving path.
func (s *Searcher) Grep(ctx context.Context, fsys fs.FileSystem, cwd fs.Target, pattern string, path, include *string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	st, err := s.begin(ctx, "grep", fsys, cwd, pattern, path, include)
	if err != nil {
		return Result{}, err
	}
	acc := matchAccumulator{max: s.grepMax, lineMax: s.lineMax, cwd: st.at.display()}
	code := 1
	if !st.empty {
		code, err = s.run(ctx, "grep", st.at, grepArgs(privateGlobs(fsys), pattern, st.include, st.at.arg), acc.consume)
		if err != nil {
			return Result{}, err
		}
	}
	if code == 1 || acc.seen == 0 {
		return Result{Output: "No matches found", Metadata: MatchesMeta{Shape: "matches", Files: []FileMatches{}}}, nil
	}
	return s.grepResult(&acc), nil
}

// matchAccumulator keeps the first max matches of rg's --json stream,
// grouped by file, and counts all of them.
type matchAccumulator struct {
	max, lineMax int
	cwd          string
	files        []FileMatches
	index        map[string]int
	kept, seen   int
}

// rgRecord is one line of rg --json. Only match records are decoded further.
type rgRecord struct {
	Type json.RawMessage `json:"type"`
	Data json.RawMessage `json:"data"`
}

type rgMatch struct {
	Path       *rgText         `json:"path"`
	Lines      *rgText         `json:"lines"`
	LineNumber json.RawMessage `json:"line_number"`
}

// rgText is rg's arbitrary-data form: text when valid UTF-8, else base64
// bytes.
type rgText struct {
	Text  *string `json:"text"`
	Bytes *string `json:"bytes"`
}

var (
	matchType  = []byte(`"match"`)
	typePrefix = []byte(`{"type":"`)
)

func malformed(detail string) *fault.Error {
	return &fault.Error{Code: fault.CodeSearchFailed, Message: "grep received malformed ripgrep --json output (" + detail + ")"}
}

// consume parses the stream line by line; memory is bounded by the longest
// line and the kept matches, never by the whole output.
func (a *matchAccumulator) consume(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, scanBufInit), RawOutputMaxBytes+1)
	for sc.Scan() {
		if err := a.record(sc.Bytes()); err != nil {
			return err
		}
	}
	return scanErr(sc.Err())
}

func (a *matchAccumulator) record(line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	// rg writes "type" first: begin, end and context records (two thirds
	// of the stream) are skipped without decoding, and matches past the cap
	// are only counted.
	if kind, ok := leadingType(line); ok && line[len(line)-1] == '}' {
		if kind != "match" {
			return nil
		}
		if a.kept >= a.max {
			a.seen++
			return nil
		}
	}
	var rec rgRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		if line[0] != '{' && json.Valid(line) {
			return malformed("a record is not an object")
		}
		return malformed("a line is not JSON")
	}
	if !bytes.Equal(bytes.TrimSpace(rec.Type), matchType) {
		return nil
	}
	a.seen++
	var m rgMatch
	if len(rec.Data) == 0 || bytes.Equal(rec.Data, []byte("null")) || json.Unmarshal(rec.Data, &m) != nil {
		return malformed("a match record has no data")
	}
	if m.Path == nil || (m.Path.Text == nil && m.Path.Bytes == nil) {
		return malformed("a match record has no path text")
	}
	var n int
	if json.Unmarshal(m.LineNumber, &n) != nil || n < 1 {
		return malformed("a match record has no line number")
	}
	if m.Lines == nil {
		return malformed("a match record has no line content")
	}
	if m.Lines.Text == nil && m.Lines.Bytes == nil {
		return malformed("a match record has neither line text nor bytes")
	}
	if a.kept >= a.max {
		return nil
	}
	a.kept++
	// Files are told apart by the bytes of their names: two names that
	// differ only in invalid UTF-8 show alike but are distinct groups.
	name := cwdRelative(pathBytes(m.Path), a.cwd)
	preview := lineNotUTF8
	if m.Lines.Text != nil {
		preview = a.preview(*m.Lines.Text)
	}
	if a.index == nil {
		a.index = map[string]int{}
	}
	i, ok := a.index[name]
	if !ok {
		i = len(a.files)
		a.index[name] = i
		a.files = append(a.files, FileMatches{Path: strings.ToValidUTF8(name, "\uFFFD")})
	}
	a.files[i].Matches = append(a.files[i].Matches, Match{LineNumber: n, Line: preview})
	return nil
}

// leadingType reads the record type from a line that starts with
// {"type":"<name>", without decoding the rest.
func leadingType(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, typePrefix)
	if !ok {
		return "", false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// pathBytes is a path's bytes as rg reported them: its text, or its base64
// bytes for a name that is not UTF-8 (shown with replacement characters
// rather than failing the whole search).
func pathBytes(t *rgText) string {
	if t.Text != nil {
		return *t.Text
	}
	raw, err := base64.StdEncoding.DecodeString(*t.Bytes)
	if err != nil {
		return *t.Bytes
	}
	return string(raw)
}

// preview strips the line ending and cuts the line to lineMax bytes on a
// UTF-8 boundary.
func (a *matchAccumulator) preview(line string) string {
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	if len(line) <= a.lineMax {
		return line
	}
	cut := a.lineMax
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + lineTruncated
}

// grepResult renders the kept matches.
func (s *Searcher) grepResult(a *matchAccumulator) Result {
	var b strings.Builder
	b.WriteString("Found ")
	if a.seen > a.kept {
		b.WriteString(strconv.Itoa(a.kept))
		b.WriteString(" of ")
	}
	b.WriteString(strconv.Itoa(a.seen))
	if a.seen == 1 {
		b.WriteString(" match\n\n")
	} else {
		b.WriteString(" matches\n\n")
	}
	for i, f := range a.files {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(f.Path)
		for _, m := range f.Matches {
			b.WriteString("\nLine ")
			b.WriteString(strconv.Itoa(m.LineNumber))
			b.WriteString(": ")
			b.WriteString(m.Line)
		}
	}
	truncated := a.seen > a.kept
	if truncated {
		b.WriteString("\n\n(")
		b.WriteString(grepRecovery)
		b.WriteString(")")
	}
	return Result{
		Output:   b.String(),
		Metadata: s.boundMatches(MatchesMeta{Shape: "matches", Files: a.files, Truncated: truncated, Total: a.seen}),
	}
}
