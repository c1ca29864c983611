package tools

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/toolfs/toolfs-api/internal/render"
)

// The executor's flags (docs/architecture.md, "Where each kind of change
// goes"): each type here registers its flags with their defaults, the one
// place each is written (RegisterFlags), gives a zero field that must be
// positive its default (WithDefaults), and refuses what no executor can
// run with in its flag's words (Validate).

// DefaultReadStreamMinSize is --read-stream-min-size's default, a setting
// of the original kept for compatibility.
const DefaultReadStreamMinSize = 10 << 20

// Settings are the tools' surface, the read window and the fence.
type Settings struct {
	Profile           string // --profile: extended or original
	EditDialect       string // --edit-dialect (docs/edits.md, "Edit dialects")
	ReadLimit         int    // --read-limit
	ReadMaxLineLength int    // --read-max-line-length
	ReadMaxBytes      int    // --read-max-bytes
	ReadStreamMinSize int64  // --read-stream-min-size, accepted for compatibility only
	SandboxMode       string // --sandbox-mode: the fence (docs/sandbox.md)
}

// RegisterFlags binds s to the tools' flags.
func (s *Settings) RegisterFlags(fl *flag.FlagSet) {
	caps := render.DefaultCaps()
	fl.IntVar(&s.ReadLimit, "read-limit", caps.Limit, "default and maximum lines per read")
	fl.IntVar(&s.ReadMaxLineLength, "read-max-line-length", caps.MaxLineLength, "characters kept per line before truncation")
	fl.IntVar(&s.ReadMaxBytes, "read-max-bytes", caps.MaxBytes, "byte cap on one read window")
	fl.Int64Var(&s.ReadStreamMinSize, "read-stream-min-size", DefaultReadStreamMinSize, "accepted for compatibility with the original: every read is chunked, so memory is bounded for any size")
	fl.StringVar(&s.Profile, "profile", string(render.ProfileExtended), "tool surface: extended (adds edits and dry_run, and hints on edit misses) or original (the original's exact surface)")
	fl.StringVar(&s.EditDialect, "edit-dialect", string(render.DialectStrReplace), "the edit tool offered to models, unless a client's URL asks for another with ?dialect=: str_replace (edit), apply_patch, anchors (edit_lines, and read shows <n>#<tag> anchors) or all (docs/edits.md)")
	fl.StringVar(&s.SandboxMode, "sandbox-mode", string(FenceOff), "fence on writes and edits inside the root: off, read-only, workspace-write (under the session's cwd only) or danger-full-access; a fenced call may ask a person for a wider mode (docs/sandbox.md)")
}

// WithDefaults gives each zero field its default.
func (s Settings) WithDefaults() Settings {
	caps := render.DefaultCaps()
	zero(&s.ReadLimit, caps.Limit)
	zero(&s.ReadMaxLineLength, caps.MaxLineLength)
	zero(&s.ReadMaxBytes, caps.MaxBytes)
	zero(&s.ReadStreamMinSize, DefaultReadStreamMinSize)
	zero(&s.Profile, string(render.ProfileExtended))
	zero(&s.EditDialect, string(render.DialectStrReplace))
	zero(&s.SandboxMode, string(FenceOff))
	return s
}

// Validate reports the first setting no executor can run with.
func (s Settings) Validate() error {
	for _, p := range []struct {
		flag string
		v    int64
	}{
		{"read-limit", int64(s.ReadLimit)},
		{"read-max-line-length", int64(s.ReadMaxLineLength)},
		{"read-max-bytes", int64(s.ReadMaxBytes)},
		{"read-stream-min-size", s.ReadStreamMinSize},
	} {
		if p.v <= 0 {
			return fmt.Errorf("--%s must be positive", p.flag)
		}
	}
	if _, ok := render.ParseProfile(s.Profile); !ok {
		return fmt.Errorf("--profile must be extended or original, not %q", s.Profile)
	}
	switch d, ok := render.ParseDialect(s.EditDialect); {
	case !ok:
		return fmt.Errorf("--edit-dialect must be %s, not %q", render.DialectNames(""), s.EditDialect)
	case d != render.DialectStrReplace && s.Profile == string(render.ProfileOriginal):
		return fmt.Errorf("--edit-dialect %s needs --profile extended: the original profile is the original's surface, whose one edit tool is edit", d)
	}
	if _, ok := ParseFence(s.SandboxMode); !ok {
		return fmt.Errorf("--sandbox-mode must be off, read-only, workspace-write or danger-full-access, not %q", s.SandboxMode)
	}
	return nil
}

// Caps are the read window's caps of these settings.
func (s Settings) Caps() render.Caps {
	return render.Caps{Limit: s.ReadLimit, MaxLineLength: s.ReadMaxLineLength, MaxBytes: s.ReadMaxBytes}
}

// SessionSettings name the session of a call (docs/api.md, "Sessions"):
// the flags that Sessions resolves by. Default "" names none
// (--require-session).
type SessionSettings struct {
	Default string // --default-session
	Require bool   // --require-session: a call that names no session has none
	Headers string // --session-headers as given: comma-separated header names
}

// DefaultSession is --default-session's default.
const DefaultSession = "default"

// RegisterFlags binds s to the sessions' flags.
func (s *SessionSettings) RegisterFlags(fl *flag.FlagSet) {
	fl.StringVar(&s.Headers, "session-headers", "", "comma-separated header names tried after X-Session-ID for the session id (e.g. X-OpenWebUI-Chat-Id)")
	fl.StringVar(&s.Default, "default-session", DefaultSession, "session id of a request that names none (a sessionless MCP client, an importer without a chat id, a curl script), so it reads and then edits with no set-up")
	fl.BoolVar(&s.Require, "require-session", false, "serve a request that names no session without one: it reads but cannot write or edit while the policy is on (400 INVALID_SESSION)")
}

// Validate reports a session id or header name that cannot be one. Which
// of --default-session and --require-session was given is the command
// line's to judge (cmd/toolfs-api).
func (s SessionSettings) Validate() error {
	if s.Default != "" && !s.Require && !render.ValidSessionID(s.Default) {
		return fmt.Errorf("--default-session %q: it must be "+render.SessionIDRule, s.Default)
	}
	for _, h := range s.aliases() {
		if !validHeaderName(h) {
			return fmt.Errorf("--session-headers: %q is not a header name", h)
		}
	}
	return nil
}

// Sessions is the resolver of these settings.
func (s SessionSettings) Sessions() Sessions {
	out := Sessions{Aliases: s.aliases(), Default: s.Default}
	if s.Require {
		out.Default = ""
	}
	return out
}

func (s SessionSettings) aliases() []string {
	var out []string
	for _, h := range strings.Split(s.Headers, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 §5.1:
// a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// DefaultCacheBytes is --cache-bytes's default: every read cache together.
const DefaultCacheBytes = 64 << 20

// RegisterFlags binds c to the read caches' flags (docs/performance.md,
// "Caches"). The racy window's default is read from the kernel now.
func (c *CacheConfig) RegisterFlags(fl *flag.FlagSet) {
	fl.Int64Var(&c.Bytes, "cache-bytes", DefaultCacheBytes, "bytes of the read caches (rendered windows, line indexes of large files), least recently used evicted first; 0 = off")
	fl.DurationVar(&c.RacyWindow, "cache-racy-window", DefaultRacyWindow(), "a file whose change time is more recent than this is never cached; by default the kernel's dirty-page expiry plus its writeback interval (vm.dirty_expire_centisecs + vm.dirty_writeback_centisecs, read at start-up; 35s when unreadable), since a write through a shared memory map leaves the stat unchanged until its pages are written back")
}

// Validate refuses a negative bound, in its flag's words; zero is off.
func (c CacheConfig) Validate() error {
	if c.Bytes < 0 {
		return errors.New("--cache-bytes must be 0 (off) or positive")
	}
	if c.RacyWindow < 0 {
		return errors.New("--cache-racy-window must not be negative")
	}
	return nil
}

// RegisterFlags binds c to the files endpoints' bounds (docs/files.md).
func (c *FilesConfig) RegisterFlags(fl *flag.FlagSet) {
	fl.Int64Var(&c.MaxUploadBytes, "max-upload-bytes", DefaultMaxUploadBytes, "PUT /files bodies above this get 413, and nothing is kept")
	fl.IntVar(&c.ListMaxEntries, "list-max-entries", DefaultListMaxEntries, "entries of one GET /files listing at most (past it: truncated)")
}

// WithDefaults gives each zero bound its default.
func (c FilesConfig) WithDefaults() FilesConfig {
	zero(&c.MaxUploadBytes, DefaultMaxUploadBytes)
	zero(&c.ListMaxEntries, DefaultListMaxEntries)
	return c
}

// Validate refuses a bound that is not positive, in its flag's words.
func (c FilesConfig) Validate() error {
	if c.MaxUploadBytes <= 0 {
		return errors.New("--max-upload-bytes must be positive")
	}
	if c.ListMaxEntries <= 0 {
		return errors.New("--list-max-entries must be positive")
	}
	return nil
}

// zero sets *v to d when it is the zero value.
func zero[T comparable](v *T, d T) {
	var z T
	if *v == z {
		*v = d
	}
}
