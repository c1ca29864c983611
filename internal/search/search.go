// Package search implements the discovery tools glob and grep on top of the
// real ripgrep binary, run as a confined child process.
//
// Search adds no method to the fs provider seam (as the original tool-fs did not)
// and knows the disk only through it: Resolve confines the optional path
// argument to the workspace root, and the provider's Workspace says where
// targets lie, which names are its own (left out of every result) and opens
// the root and the session cwd that rg starts in. Results are the
// model-facing text plus JSON-ready card metadata.
package search

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// The caps of the original tool-fs (DH tool-fs-search defaults).
const (
	// GlobMaxResults is how many paths glob shows.
	GlobMaxResults = 100
	// GrepMaxMatches is how many matches grep shows.
	GrepMaxMatches = 250
	// GrepMaxLineBytes bounds one grep line preview, in UTF-8 bytes.
	GrepMaxLineBytes = 2000
	// MetaMaxBytes bounds the serialized card metadata.
	MetaMaxBytes = 64 << 10
	// RawOutputMaxBytes is the budget of rg's stdout; past it the search fails.
	RawOutputMaxBytes = 20_000_000
	// StderrMaxBytes is how much of rg's stderr is kept for messages.
	StderrMaxBytes = 64 << 10
)

// The defaults of --search-timeout and --max-searches, and of a zero
// Config.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultMaxConcurrent = 4
)

const (
	// killGrace is how long a cancelled rg gets between SIGTERM and SIGKILL.
	killGrace = 500 * time.Millisecond
)

// Config configures a Searcher. Zero values take the defaults.
type Config struct {
	// RgPath is the ripgrep binary; "" looks up "rg" on PATH once, at New.
	RgPath string
	// Timeout bounds one call, including the wait for a free slot; default 30s.
	Timeout time.Duration
	// MaxConcurrent bounds how many rg processes run at once (default 4), so
	// a burst of calls cannot fork-bomb the host; excess callers wait,
	// honouring their context.
	MaxConcurrent int
	// Sandbox says what to do where the kernel has no Landlock to confine
	// rg with; "" is sandbox.Require.
	Sandbox sandbox.Requirement
}

// Searcher runs glob and grep. It is safe for concurrent use.
type Searcher struct {
	rg      string // absolute path of rg, "" when not found
	timeout time.Duration
	sem     chan struct{}

	// confined: rg runs in the Landlock sandbox, started from exe and
	// allowed rgFiles. unavailable is why glob and grep cannot run ("" when
	// they can).
	confined    bool
	exe         string
	rgFiles     []string
	unavailable string

	// Limits, fixed at New; tests in this package shrink them.
	globMax, grepMax, lineMax, metaMax int
	rawMax                             int64

	onStart func(pid int) // test hook: called with rg's pid (= its process group)
}

// New returns a Searcher. It never fails: when ripgrep cannot be found, or
// the sandbox is required and cannot confine it, Available reports false,
// UnavailableReason says why, and every search fails with SEARCH_FAILED.
// With Landlock present, New relies on the sandbox's proof (once per
// process) and starts rg confined once per rg binary.
func New(cfg Config) *Searcher {
	s := newSearcher(cfg)
	if s.rg == "" {
		return s
	}
	p := proveSandbox(s.rg)
	s.confined, s.exe, s.rgFiles = p.ok, p.exe, p.files
	if p.why != "" && cfg.Sandbox != sandbox.BestEffort {
		s.unavailable = "the search sandbox cannot confine ripgrep (" + p.why + "); glob and grep need it (--search-sandbox require)"
	}
	return s
}

// newSearcher is New without ripgrep's sandbox: rg runs unconfined. Tests use
// it for fake rg scripts, which the sandbox would not let start.
func newSearcher(cfg Config) *Searcher {
	s := &Searcher{
		timeout: cfg.Timeout,
		globMax: GlobMaxResults,
		grepMax: GrepMaxMatches,
		lineMax: GrepMaxLineBytes,
		metaMax: MetaMaxBytes,
		rawMax:  RawOutputMaxBytes,
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	n := cfg.MaxConcurrent
	if n <= 0 {
		n = DefaultMaxConcurrent
	}
	s.sem = make(chan struct{}, n)
	name := cfg.RgPath
	if name == "" {
		name = "rg"
	}
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			s.rg = abs
		}
	}
	if s.rg == "" {
		s.unavailable = "ripgrep (rg) was not found at start-up; install it or set --rg-path"
	}
	return s
}

// Available reports whether glob and grep can run: ripgrep was found at New,
// and confined unless the sandbox mode is best-effort.
func (s *Searcher) Available() bool { return s.unavailable == "" }

// UnavailableReason says why glob and grep cannot run, for the catalog and
// the start-up log; "" when they can.
func (s *Searcher) UnavailableReason() string { return s.unavailable }

// Sandboxed reports whether rg runs confined by Landlock
// (toolfs_search_sandboxed).
func (s *Searcher) Sandboxed() bool { return s.confined }

// Result is a successful search: Output is the exact model-facing text and
// Metadata is a PathsMeta (glob) or MatchesMeta (grep), ready for JSON.
type Result struct {
	Output   string
	Metadata any
}

// PathsMeta is glob's card metadata. Paths are the paths shown; Truncated
// says the cap cut the result; Total counts every path rg found. Trailing
// paths are dropped to keep the JSON within 64 KiB.
type PathsMeta struct {
	Shape     string   `json:"shape"` // "paths"
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated"`
	Total     int      `json:"total"`
}

// MatchesMeta is grep's card metadata. Files hold the matches shown, grouped
// by file in first-seen order; Truncated says the cap cut the result; Total
// counts every match rg reported. Trailing files are dropped to keep the
// JSON within 64 KiB (a single oversized file is kept).
type MatchesMeta struct {
	Shape     string        `json:"shape"` // "matches"
	Files     []FileMatches `json:"files"`
	Truncated bool          `json:"truncated"`
	Total     int           `json:"total"`
}

// FileMatches is the matches shown for one file, Path relative to the
// session cwd.
type FileMatches struct {
	Path    string  `json:"path"`
	Matches []Match `json:"matches"`
}

// Match is one matching line: its 1-based number and its preview (line
// ending stripped, cut to 2000 bytes).
type Match struct {
	LineNumber int    `json:"lineNumber"`
	Line       string `json:"line"`
}

func argError(msg string) *fault.Error {
	return &fault.Error{Code: fault.CodeInvalidArgument, Message: msg}
}

func abortedError(tool string, cause error) *fault.Error {
	return &fault.Error{Code: fault.CodeSearchAborted, Message: tool + " was aborted before completion (tool timeout or caller cancellation)", Err: cause}
}

// Argument messages, verbatim from the original tool-fs.
const (
	msgPattern         = "pattern must be a non-empty string"
	msgPath            = "path must be a non-empty string when given"
	msgInclude         = "include must be a non-empty glob when given"
	msgIncludeNegation = `include must be a positive glob filter; negated patterns ("!…") are not supported`
	msgIncludeList     = "include must be one glob, not a comma-separated list (use {a,b} alternation instead)"
)

// start is what a glob or grep found before rg runs.
type start struct {
	at      place  // where rg runs; at.arg is its path argument, "" for none
	empty   bool   // the path argument holds nothing rg can list: no result
	include string // grep's include filter, trimmed; "" for none
}

// begin is the start both glob and grep make, in this order: the pattern,
// path and include arguments checked (400 before anything else), ripgrep's
// availability, the place rg runs in, and the path argument resolved
// within the root. ctx is already bounded by the timeout.
func (s *Searcher) begin(ctx context.Context, tool string, fsys fs.FileSystem, cwd fs.Target, pattern string, path, include *string) (start, error) {
	if err := validatePattern(pattern); err != nil {
		return start{}, err
	}
	if err := validatePath(path); err != nil {
		return start{}, err
	}
	glob, err := validateInclude(include)
	if err != nil {
		return start{}, err
	}
	if !s.Available() {
		return start{}, launchError(tool, errors.New(s.unavailable))
	}
	at, err := newPlace(ctx, tool, fsys, cwd)
	if err != nil {
		return start{}, err
	}
	arg, empty, err := at.searchArg(ctx, fsys, path)
	if err != nil {
		return start{}, err
	}
	at.arg = arg
	return start{at: at, empty: empty, include: glob}, nil
}

// validatePath checks the optional path argument. A NUL byte can never reach
// rg's argv, so it is an argument error rather than a launch failure.
func validatePath(path *string) error {
	if path == nil {
		return nil
	}
	if strings.TrimSpace(*path) == "" {
		return argError(msgPath)
	}
	if strings.IndexByte(*path, 0) >= 0 {
		return argError("path must not contain a NUL byte")
	}
	return nil
}

func validatePattern(pattern string) error {
	if pattern == "" {
		return argError(msgPattern)
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return argError("pattern must not contain a NUL byte")
	}
	return nil
}

// validateInclude checks grep's include filter and returns it trimmed.
func validateInclude(include *string) (string, error) {
	if include == nil {
		return "", nil
	}
	g := strings.TrimSpace(*include)
	switch {
	case g == "":
		return "", argError(msgInclude)
	case strings.IndexByte(g, 0) >= 0:
		return "", argError("include must not contain a NUL byte")
	case g[0] == '!':
		return "", argError(msgIncludeNegation)
	case hasTopLevelComma(g):
		return "", argError(msgIncludeList)
	}
	return g, nil
}

// hasTopLevelComma reports a comma outside {} alternation, [] classes and
// backslash escapes: rg would read it as a literal, which is never what a
// model writing "*.ts,*.js" meant.
func hasTopLevelComma(g string) bool {
	depth := 0
	for i := 0; i < len(g); i++ {
		switch g[i] {
		case '\\':
			i++
		case '[':
			// Skip the class; a ']' right after '[' or '[!' is literal.
			j := i + 1
			if j < len(g) && (g[j] == '!' || g[j] == '^') {
				j++
			}
			if j < len(g) && g[j] == ']' {
				j++
			}
			for j < len(g) && g[j] != ']' {
				j++
			}
			if j < len(g) {
				i = j
			}
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				return true
			}
		}
	}
	return false
}

// cwdRelative makes an absolute path inside cwd relative to it (cwd itself
// becomes "."); anything else is returned unchanged, as the original tool-fs did.
func cwdRelative(p, cwd string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if p == cwd {
		return "."
	}
	prefix := cwd
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if rest, ok := strings.CutPrefix(p, prefix); ok {
		return rest
	}
	return p
}
