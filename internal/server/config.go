package server

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/diagnostics"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/media"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/sandbox"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Config is every setting of a server, one field per flag of
// cmd/toolfs-api (README.md, "Configuration"), as that flag's value: cmd parses the
// flags into it, New builds from it. DefaultConfig holds the flags'
// defaults.
//
// A field whose flag must be positive or non-empty takes its default when
// zero, so a test names only what it changes; Validate, which cmd runs on
// the parsed flags, refuses such a zero in the flag's words. Every other
// field means what its flag's value means, zero included: Policy, Events
// and MCPStructured are off, CacheBytes 0 turns the caches off,
// EventsMaxWatches 0 reports no external change, DefaultSession "" names no
// session (--require-session), NoApprovals is --approvals=false.
type Config struct {
	// The workspace.
	Root    string // --root (required)
	LockDir string // --lock-dir: "" = lock files in the root's private folder, "off" = in-process locks only

	// Who may call, and from where.
	Addr          string   // --addr: where Listen listens; on loopback without Token, requests must name a loopback Host
	Token         string   // --token: "" = no auth
	ApproverToken string   // --approver-token
	MetricsToken  string   // --metrics-token: accepted on GET /metrics alone
	AllowNoToken  bool     // --allow-no-token
	CORSOrigins   []string // --cors-origins
	PublicURL     string   // --public-url ("" = the request's scheme and Host)
	// Identities (docs/identity.md): an OAuth 2.1 resource server trusting
	// one authorization server. OAuthAudiences "" = the defaults of
	// PublicURL, which --oauth-issuer then needs.
	OAuthIssuer    string   // --oauth-issuer ("" = off)
	OAuthAudiences []string // --oauth-audience
	MaxBodyBytes   int64    // --max-body-bytes [32 MiB]; not for uploads

	// The files endpoints (docs/files.md).
	MaxUploadBytes int64 // --max-upload-bytes [1 GiB]
	// An upload's body must bring UploadMinRate bytes a second, counted
	// over each UploadRateWindow, or it is cut (408 BODY_TOO_SLOW); one
	// that keeps that pace is never cut for taking long.
	UploadMinRate    int64         // --upload-min-rate [1024]
	UploadRateWindow time.Duration // --upload-rate-window [1m]
	ListMaxEntries   int           // --list-max-entries [10000]

	// The tools' surface and the read window.
	Profile           string // --profile [extended]
	EditDialect       string // --edit-dialect [str_replace] (docs/edits.md, "Edit dialects")
	ReadLimit         int    // --read-limit [2000]
	ReadMaxLineLength int    // --read-max-line-length [2000]
	ReadMaxBytes      int    // --read-max-bytes [51200]
	ReadStreamMinSize int64  // --read-stream-min-size [10 MiB], accepted for compatibility only
	// What an image read sends (docs/media.md).
	ReadImageMaxPixels int   // --read-image-max-pixels [1568], the long side
	ReadImageMaxBytes  int64 // --read-image-max-bytes [5 MiB], encoded

	// The read-before-write policy and its sessions (docs/api.md,
	// "Sessions"; docs/deployment.md).
	Policy             bool          // --policy
	SessionStore       string        // --session-store: memory or a redis:// URL [memory]
	SessionKeyPrefix   string        // --session-key-prefix [toolfs:]
	SessionTTL         time.Duration // --session-ttl [30m], also the idle bound of an MCP session
	MaxSessions        int           // --max-sessions [10000], also the bound on MCP sessions
	MaxPathsPerSession int           // --max-paths-per-session [4096]
	SessionHeaders     []string      // --session-headers
	DefaultSession     string        // --default-session; "" = none (--require-session)

	// glob and grep (docs/search.md).
	RgPath        string        // --rg-path ("" = rg on PATH)
	SearchTimeout time.Duration // --search-timeout [30s]
	MaxSearches   int           // --max-searches [4]
	SearchSandbox string        // --search-sandbox [require]

	// The sandbox and its escalations (docs/sandbox.md).
	SandboxMode     string        // --sandbox-mode [off]
	NoApprovals     bool          // --approvals=false: every escalation is denied
	ApprovalTimeout time.Duration // --approval-timeout [5m]
	// ApproveBy is --approve-by: elicitation, approvals or both; "" =
	// both, or approvals alone with ApproverToken (docs/sandbox.md).
	ApproveBy string
	// ElicitationKey is --elicitation-key: 64 hex digits, the AES-256 key
	// that seals an escalation's request state on /mcp; "" = one shared
	// through Redis by the replicas, else a random one of this process.
	ElicitationKey string
	MaxApprovals   int // --max-approvals [32]

	// The read caches (docs/performance.md, "Caches").
	CacheBytes      int64         // --cache-bytes; 0 = off
	CacheRacyWindow time.Duration // --cache-racy-window

	// The change feed (docs/events.md).
	Events               bool          // --events
	EventsMaxSubscribers int           // --events-max-subscribers [64]
	EventsMaxWatches     int           // --events-max-watches; 0 = no external changes
	EventsHeartbeat      time.Duration // --events-heartbeat [15s]

	// The checkpoints: every session's change history, and its revert
	// (docs/checkpoints.md).
	Checkpoints            bool  // --checkpoints
	CheckpointBytes        int64 // --checkpoint-bytes [256 MiB]
	CheckpointMaxFileBytes int64 // --checkpoint-max-file-bytes [16 MiB]

	MCPStructured bool // --mcp-structured

	// The console at /ui/ (docs/console.md).
	UI         bool   // --ui
	UIClientID string // --ui-client-id: the OAuth client the console signs people in as

	// AuditLog is the file of one JSON line per mutation and approval
	// decision, on disk before the call is answered (--audit-log,
	// docs/audit.md); "" = none.
	AuditLog string
	// NoJournal is --journal=false: each checkpoint and audit record is
	// synced in its own file instead of one sync of the workspace's
	// journal per change (docs/journal.md).
	NoJournal bool

	// Checkers after each write and edit (docs/diagnostics.md); they run
	// confined as rg does, under SearchSandbox's mode.
	Diagnostics        string        // --diagnostics FILE ("" = none)
	DiagnosticsTimeout time.Duration // --diagnostics-timeout [5s]

	// Stdio is --stdio: the server's one client speaks MCP on the
	// process's standard input and output (ServeMCP), and nothing listens
	// on Addr. With no HTTP, nobody could reach /approvals or /events, so
	// New turns the change feed off and denies every escalation at once
	// (docs/mcp.md, "Over stdio").
	Stdio bool

	// The process: cmd/toolfs-api builds its logger and its shutdown
	// deadline from these.
	LogFormat     string        // --log-format [text]
	ShutdownGrace time.Duration // --shutdown-grace

	// Version is the binary's version (cmd/toolfs-api's --version), in
	// toolfs_build_info and the MCP server's implementation ["devel"].
	Version string

	// No flag sets these: the binary keeps their defaults, tests shorten
	// them.
	StreamWriteWindow time.Duration // each streamed chunk must reach the client within this [30s]
	EventsQuiet       time.Duration // changes to one path within this are one event [100ms]
	MCPAnswerBudget   int64         // bytes of the answers of one /mcp request [docs/mcp.md, "Limits"]
	OAuthLeeway       time.Duration // clock skew allowed on a token's exp and nbf [60s]
	OAuthMinRefresh   time.Duration // least time between two fetches of the issuer's keys [10s]
	ReadTimeout       time.Duration // a whole request, headers and body, on every route but PUT /files [2m]
}

// DefaultConfig is the flags' defaults: serve "." on 127.0.0.1:8080 with
// the policy on.
func DefaultConfig() Config {
	c := Config{
		Root:             ".",
		Addr:             "127.0.0.1:8080",
		Policy:           true,
		DefaultSession:   "default",
		Events:           true,
		Checkpoints:      true,
		UI:               true,
		CacheBytes:       64 << 20,
		CacheRacyWindow:  tools.DefaultCacheConfig().RacyWindow,
		EventsMaxWatches: 8192,
		ShutdownGrace:    30 * time.Second,
	}
	return c.withDefaults()
}

// withDefaults gives every zero field whose flag must be positive or
// non-empty its default.
func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	str := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	caps := render.DefaultCaps()
	def(&c.ReadLimit, caps.Limit)
	def(&c.ReadMaxLineLength, caps.MaxLineLength)
	def(&c.ReadMaxBytes, caps.MaxBytes)
	def64(&c.ReadStreamMinSize, 10<<20)
	def(&c.ReadImageMaxPixels, media.DefaultMaxSide)
	def64(&c.ReadImageMaxBytes, media.DefaultMaxBytes)
	def64(&c.MaxBodyBytes, 32<<20)
	def64(&c.MaxUploadBytes, tools.DefaultMaxUploadBytes)
	def(&c.ListMaxEntries, tools.DefaultListMaxEntries)
	def64(&c.UploadMinRate, 1024)
	dur(&c.UploadRateWindow, time.Minute)
	str(&c.Profile, string(render.ProfileExtended))
	str(&c.EditDialect, string(render.DialectStrReplace))
	str(&c.SessionStore, "memory")
	str(&c.SessionKeyPrefix, "toolfs:")
	dur(&c.SessionTTL, 30*time.Minute)
	def(&c.MaxSessions, 10000)
	def(&c.MaxPathsPerSession, 4096)
	dur(&c.SearchTimeout, 30*time.Second)
	dur(&c.DiagnosticsTimeout, diagnostics.DefaultTimeout)
	def(&c.MaxSearches, 4)
	str(&c.SearchSandbox, string(sandbox.Require))
	str(&c.SandboxMode, string(tools.FenceOff))
	dur(&c.ApprovalTimeout, 5*time.Minute)
	def(&c.MaxApprovals, 32)
	def(&c.EventsMaxSubscribers, 64)
	def64(&c.CheckpointBytes, checkpoint.DefaultBytes)
	def64(&c.CheckpointMaxFileBytes, min(checkpoint.DefaultMaxFileBytes, c.CheckpointBytes))
	dur(&c.EventsHeartbeat, 15*time.Second)
	str(&c.LogFormat, "text")
	str(&c.Version, "devel")
	dur(&c.StreamWriteWindow, 30*time.Second)
	dur(&c.ReadTimeout, 2*time.Minute)
	dur(&c.EventsQuiet, 100*time.Millisecond)
	return c
}

// Validate reports the first setting no server can run with, in the words
// of its flag (cmd/toolfs-api runs it on the parsed flags, so a zero its
// flag forbids is refused here, though New would take the default).
func (c Config) Validate() error {
	if err := c.validateSettings(); err != nil {
		return err
	}
	if c.Stdio {
		return nil // nothing listens on Addr
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", c.Addr, err)
	}
	if !isLoopback(host) && c.Token == "" && c.OAuthIssuer == "" && !c.AllowNoToken {
		return fmt.Errorf("--addr %q is not a loopback address: set --token or --oauth-issuer (or --allow-no-token to serve without auth)", c.Addr)
	}
	return nil
}

// The bounds of --read-image-max-pixels and --read-image-max-bytes: a
// side longer than any model takes, and too few bytes for any picture
// (docs/media.md).
const (
	MaxImageSide  = 16384
	MinImageBytes = 1024
)

// validateSettings is Validate without the listening address, which only
// Listen uses; New runs it once the zero bounds took their defaults.
func (c Config) validateSettings() error {
	positive := []struct {
		name string
		v    int64
	}{
		{"read-limit", int64(c.ReadLimit)},
		{"read-max-line-length", int64(c.ReadMaxLineLength)},
		{"read-max-bytes", int64(c.ReadMaxBytes)},
		{"read-stream-min-size", c.ReadStreamMinSize},
		{"max-sessions", int64(c.MaxSessions)},
		{"max-paths-per-session", int64(c.MaxPathsPerSession)},
		{"max-body-bytes", c.MaxBodyBytes},
		{"max-upload-bytes", c.MaxUploadBytes},
		{"list-max-entries", int64(c.ListMaxEntries)},
		{"upload-min-rate", c.UploadMinRate},
		{"upload-rate-window", int64(c.UploadRateWindow)},
		{"max-searches", int64(c.MaxSearches)},
		{"session-ttl", int64(c.SessionTTL)},
		{"search-timeout", int64(c.SearchTimeout)},
		{"diagnostics-timeout", int64(c.DiagnosticsTimeout)},
		{"events-max-subscribers", int64(c.EventsMaxSubscribers)},
		{"events-heartbeat", int64(c.EventsHeartbeat)},
		{"approval-timeout", int64(c.ApprovalTimeout)},
		{"max-approvals", int64(c.MaxApprovals)},
		{"checkpoint-bytes", c.CheckpointBytes},
		{"checkpoint-max-file-bytes", c.CheckpointMaxFileBytes},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("--%s must be positive", p.name)
		}
	}
	if c.UploadRateWindow < time.Second {
		return fmt.Errorf("--upload-rate-window must be at least 1s, not %v: a shorter window would cut uploads on an ordinary pause of the network", c.UploadRateWindow)
	}
	if c.ReadImageMaxPixels < 1 || c.ReadImageMaxPixels > MaxImageSide {
		return fmt.Errorf("--read-image-max-pixels must be between 1 and %d", MaxImageSide)
	}
	if c.ReadImageMaxBytes < MinImageBytes || c.ReadImageMaxBytes > media.MaxImageFileBytes {
		return fmt.Errorf("--read-image-max-bytes must be between %d and %d", MinImageBytes, media.MaxImageFileBytes)
	}
	if c.CheckpointMaxFileBytes > c.CheckpointBytes {
		return fmt.Errorf("--checkpoint-max-file-bytes (%d) must not exceed --checkpoint-bytes (%d): the largest kept file must fit in the bound of all of them", c.CheckpointMaxFileBytes, c.CheckpointBytes)
	}
	if c.CacheBytes < 0 {
		return errors.New("--cache-bytes must be 0 (off) or positive")
	}
	if c.CacheRacyWindow < 0 {
		return errors.New("--cache-racy-window must not be negative")
	}
	if c.LockDir != "" && c.LockDir != "off" {
		return fmt.Errorf("--lock-dir must be empty or off, not %q: lock files live in the workspace root's %s folder, so every process that sees the root shares them", c.LockDir, fs.PrivateDir)
	}
	if c.EventsMaxWatches < 0 {
		return fmt.Errorf("--events-max-watches must not be negative")
	}
	if c.SessionStore != "memory" {
		if _, err := redisOptions(c.SessionStore); err != nil {
			return err
		}
	}
	if c.SessionKeyPrefix == "" {
		return errors.New("--session-key-prefix must not be empty")
	}
	if c.DefaultSession != "" && !render.ValidSessionID(c.DefaultSession) {
		return fmt.Errorf("--default-session %q: it must be "+render.SessionIDRule, c.DefaultSession)
	}
	for _, h := range c.SessionHeaders {
		if !validHeaderName(h) {
			return fmt.Errorf("--session-headers: %q is not a header name", h)
		}
	}
	if _, ok := render.ParseProfile(c.Profile); !ok {
		return fmt.Errorf("--profile must be extended or original, not %q", c.Profile)
	}
	switch d, ok := render.ParseDialect(c.EditDialect); {
	case !ok:
		return fmt.Errorf("--edit-dialect must be %s, not %q", render.DialectNames(""), c.EditDialect)
	case d != render.DialectStrReplace && c.Profile == string(render.ProfileOriginal):
		return fmt.Errorf("--edit-dialect %s needs --profile extended: the original profile is the original's surface, whose one edit tool is edit", d)
	}
	if c.SearchSandbox != string(sandbox.Require) && c.SearchSandbox != string(sandbox.BestEffort) {
		return fmt.Errorf("--search-sandbox must be require or best-effort, not %q", c.SearchSandbox)
	}
	if c.PublicURL != "" {
		if err := checkPublicURL(c.PublicURL); err != nil {
			return err
		}
	}
	if c.OAuthIssuer != "" && c.PublicURL == "" {
		return errors.New("--oauth-issuer needs --public-url: the URL clients reach this server at names it in every 401 and in its metadata, and is the default --oauth-audience")
	}
	if c.OAuthIssuer == "" && len(c.OAuthAudiences) > 0 {
		return errors.New("--oauth-audience needs --oauth-issuer")
	}
	for _, a := range c.OAuthAudiences {
		if strings.TrimSpace(a) == "" {
			return errors.New("--oauth-audience: an audience must not be empty")
		}
	}
	if _, ok := tools.ParseFence(c.SandboxMode); !ok {
		return fmt.Errorf("--sandbox-mode must be off, read-only, workspace-write or danger-full-access, not %q", c.SandboxMode)
	}
	if _, ok := tools.ParseApproveBy(c.ApproveBy); c.ApproveBy != "" && !ok {
		return fmt.Errorf("--approve-by must be elicitation, approvals or both, not %q", c.ApproveBy)
	}
	if _, err := c.elicitationKey(); err != nil {
		return err
	}
	if c.ApproverToken != "" && c.ApproverToken == c.Token {
		return errors.New("--approver-token must differ from --token: the agent's token must not decide its own escalations")
	}
	if c.MetricsToken != "" && (c.MetricsToken == c.Token || c.MetricsToken == c.ApproverToken) {
		return errors.New("--metrics-token must differ from --token and --approver-token: it is given to whatever scrapes /metrics, and reaches nothing else")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat)
	}
	return nil
}

// memoryHeadroom is the Go memory the server may use besides its caches
// and its session store: requests in flight, the runtime, the collector's
// work.
const memoryHeadroom = 32 << 20

// MemoryLimit is the Go runtime's soft memory limit for a server of c
// (docs/decisions.md, "Memory"): the bounds of the read caches and of the
// memory session store, plus a headroom. The collector's default target is
// twice the live heap, so full caches alone would double; under this limit
// it collects sooner instead. cmd/toolfs-api sets it unless GOMEMLIMIT is.
func (c Config) MemoryLimit() int64 {
	c = c.withDefaults()
	n := c.CacheBytes + memoryHeadroom
	if c.Policy && c.SessionStore == "memory" {
		n += policy.DefaultMaxBytes
	}
	return n
}

// loopback reports whether Addr is a loopback address.
func (c Config) loopback() bool {
	host, _, err := net.SplitHostPort(c.Addr)
	return err == nil && isLoopback(host)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// redisOptions parses --session-store's Redis URL, with timeouts short
// enough that a write waits about a second, not half a minute, before it
// answers SESSION_STORE_UNAVAILABLE (the URL's own dial_timeout,
// read_timeout, write_timeout and max_retries win). Errors never echo the
// password.
func redisOptions(raw string) (*redis.Options, error) {
	if !strings.HasPrefix(raw, "redis://") && !strings.HasPrefix(raw, "rediss://") {
		return nil, fmt.Errorf("--session-store must be memory, redis://host:port/db or rediss://host:port/db, not %q", redactURL(raw))
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), raw, redactURL(raw))
		if u, perr := url.Parse(raw); perr == nil {
			if p, ok := u.User.Password(); ok && p != "" {
				msg = strings.ReplaceAll(msg, p, "xxxxx")
			}
		}
		return nil, fmt.Errorf("--session-store %q: %s", redactURL(raw), msg)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = time.Second
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = time.Second
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = time.Second
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 1
	}
	// One dial per attempt: a refused connection answers at once, not after
	// the client's default five dials 100 ms apart.
	opts.DialerRetries = 1
	return opts, nil
}

// redactURL hides the user information of a URL, for logs and errors.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i {
		return raw[:i+3] + "xxxxx" + raw[j:]
	}
	return raw
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

// checkPublicURL accepts an absolute http or https URL with a host, and
// optionally a path (a proxy's prefix), nothing else: importers join it
// with the view's paths.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("--public-url %q: %v", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#") {
		return fmt.Errorf("--public-url %q: it must be an absolute http:// or https:// URL with a host and an optional path, no user, query or fragment (e.g. https://tools.example.com/toolfs)", raw)
	}
	return nil
}

// approveBy is --approve-by with its default: both, or approvals alone
// with --approver-token, since an elicitation's answer comes from the
// client's own user, not from the approver the operator named
// (docs/sandbox.md).
func (c Config) approveBy() tools.ApproveBy {
	if b, ok := tools.ParseApproveBy(c.ApproveBy); ok {
		return b
	}
	if c.ApproverToken != "" {
		return tools.ApproveByApprovals
	}
	return tools.ApproveByBoth
}

// elicitationKey is --elicitation-key's 32 bytes (nil when not given).
func (c Config) elicitationKey() ([]byte, error) {
	if c.ElicitationKey == "" {
		return nil, nil
	}
	k, err := hex.DecodeString(c.ElicitationKey)
	if err != nil || len(k) != 32 {
		return nil, errors.New("--elicitation-key must be 64 hex digits (32 bytes), e.g. from: openssl rand -hex 32")
	}
	return k, nil
}
