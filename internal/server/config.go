package server

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/console"
	"github.com/toolfs/toolfs-api/internal/diagnostics"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/handlers"
	"github.com/toolfs/toolfs-api/internal/identity"
	"github.com/toolfs/toolfs-api/internal/mcp"
	"github.com/toolfs/toolfs-api/internal/media"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/telemetry"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Config is every setting of a server, one field per flag of
// cmd/toolfs-api (README.md, "Configuration"): the builder's own flags
// here, and each subsystem's settings in a field of the type that package
// declares beside the code it configures, which registers its flags with
// their defaults, fills its zero fields and validates itself
// (docs/architecture.md, "Where each kind of change goes"; the Loki
// pattern of STYLE.md). RegisterFlags registers them all; DefaultConfig is
// their defaults.
//
// A field whose flag must be positive or non-empty takes its default when
// zero, so a test names only what it changes; Validate, which cmd runs on
// the parsed flags, refuses such a zero in the flag's words. Every other
// field means what its flag's value means, zero included: Policy.Enabled,
// Events.Enabled, Checkpoints.Enabled, Console.Enabled and MCP.Structured are off,
// Cache.Bytes 0 turns the caches off, Events.MaxWatches 0 reports no
// external change, Sessions.Default "" names no session
// (--require-session), Approvals.Deny is --approvals=false.
type Config struct {
	// The workspace.
	Root    string // --root (required)
	LockDir string // --lock-dir: "" = lock files in the root's private folder, "off" = in-process locks only

	// Who may call, and from where.
	Addr          string // --addr: where Listen listens; on loopback without Token, requests must name a loopback Host
	Token         string // --token: "" = no auth
	ApproverToken string // --approver-token
	// ApproveBy is --approve-by: elicitation, approvals or both; "" =
	// both, or approvals alone with ApproverToken (docs/sandbox.md).
	ApproveBy string
	// ElicitationKey is --elicitation-key: 64 hex digits, the AES-256 key
	// that seals an escalation's request state on /mcp; "" = one shared
	// through Redis by the replicas, else a random one of this process.
	ElicitationKey string
	MetricsToken   string // --metrics-token: accepted on GET /metrics alone
	AllowNoToken   bool   // --allow-no-token
	CORSOrigins    string // --cors-origins: comma-separated
	PublicURL      string // --public-url ("" = the request's scheme and Host)
	MaxBodyBytes   int64  // --max-body-bytes; not for uploads
	// Identities (docs/identity.md): an OAuth 2.1 resource server trusting
	// one authorization server.
	Identity identity.Settings

	// The tools' surface, the read window and the fence.
	Tools  tools.Settings
	Images media.ImageLimits // what an image read sends (docs/media.md)
	// The files endpoints (docs/files.md) and an upload's pace.
	Files  tools.FilesConfig
	Upload handlers.Pace
	Cache  tools.CacheConfig // the read caches (docs/performance.md, "Caches")

	// The read-before-write policy and its sessions (docs/api.md,
	// "Sessions"; docs/deployment.md).
	Policy   policy.Settings
	Sessions tools.SessionSettings
	// Where sessions' observations live, and the Redis that shares
	// approvals and the change feed between replicas.
	SessionStore     string // --session-store: memory or a redis:// URL
	SessionKeyPrefix string // --session-key-prefix

	Search      search.Settings      // glob and grep (docs/search.md)
	Approvals   approval.Settings    // the fence's escalations (docs/sandbox.md)
	Events      events.Settings      // the change feed (docs/events.md)
	Checkpoints checkpoint.Settings  // every session's change history (docs/checkpoints.md)
	MCP         mcp.Settings         // the MCP transport (docs/mcp.md)
	Console     console.Settings     // the web console at /ui/ (docs/console.md)
	Audit       audit.Settings       // the audit log (docs/audit.md)
	Diagnostics diagnostics.Settings // checkers after each write and edit (docs/diagnostics.md), confined under Search.Sandbox's mode

	// NoJournal is --journal=false: each checkpoint and audit record is
	// synced in its own file instead of one sync of the workspace's
	// journal per change (docs/journal.md). The builder's own flag: the
	// journal carries the records of two packages, the checkpoints' and
	// the audit log's.
	NoJournal bool

	// Stdio is --stdio: the server's one client speaks MCP on the
	// process's standard input and output (ServeMCP), and nothing listens
	// on Addr. With no HTTP, nobody could reach /approvals or /events, so
	// New turns the change feed off and denies every escalation at once
	// (docs/mcp.md, "Over stdio").
	Stdio bool

	// The process: cmd/toolfs-api builds its logger and its shutdown
	// deadline from these.
	LogFormat     string        // --log-format
	ShutdownGrace time.Duration // --shutdown-grace

	// Telemetry is the OpenTelemetry traces (docs/running.md, "Traces"):
	// no flags, the standard OTEL_* variables, which cmd/toolfs-api reads
	// into it (Settings.ReadEnv); the zero value is off.
	Telemetry telemetry.Settings

	// Version is the binary's version (cmd/toolfs-api's --version), in
	// toolfs_build_info and the MCP server's implementation ["devel"].
	Version string

	// No flag sets these: the binary keeps their defaults, tests shorten
	// them.
	StreamWriteWindow time.Duration // each streamed chunk must reach the client within this [30s]
	EventsQuiet       time.Duration // changes to one path within this are one event [100ms]
	MCPAnswerBudget   int64         // bytes of the answers of one /mcp request [docs/mcp.md, "Limits"]
	ReadTimeout       time.Duration // a whole request, headers and body, on every route but PUT /files [2m]
}

// The builder's own defaults.
const (
	defaultAddr         = "127.0.0.1:8080"
	defaultMaxBodyBytes = 32 << 20
	defaultSessionStore = "memory"
	defaultKeyPrefix    = "toolfs:"
	defaultLogFormat    = "text"
)

// RegisterFlags binds c to every flag of the server, each with its
// default, and each subsystem's through its own RegisterFlags.
func (c *Config) RegisterFlags(fl *flag.FlagSet) {
	fl.StringVar(&c.Root, "root", ".", "workspace root: the folder the tools may reach")
	fl.StringVar(&c.Addr, "addr", defaultAddr, "listen address")
	fl.StringVar(&c.Token, "token", "", "bearer token required on every endpoint but /healthz and /readyz")
	fl.StringVar(&c.CORSOrigins, "cors-origins", "", "comma-separated browser origins allowed by CORS")
	c.Tools.RegisterFlags(fl)
	c.Images.RegisterFlags(fl)
	c.Policy.RegisterFlags(fl)
	fl.Int64Var(&c.MaxBodyBytes, "max-body-bytes", defaultMaxBodyBytes, "request bodies above this get 413 (uploads: --max-upload-bytes)")
	c.Files.RegisterFlags(fl)
	c.Upload.RegisterFlags(fl)
	fl.StringVar(&c.LogFormat, "log-format", defaultLogFormat, "log format: text or json")
	fl.BoolVar(&c.AllowNoToken, "allow-no-token", false, "allow a non-loopback --addr without --token")
	c.Search.RegisterFlags(fl)
	c.Diagnostics.RegisterFlags(fl)
	fl.StringVar(&c.LockDir, "lock-dir", "", "cross-process locks: empty (default) = lock files in "+LockFiles+", shared by every process that sees the root; \"off\" = in-process locks only (two servers on one root can then lose updates)")
	fl.StringVar(&c.SessionStore, "session-store", defaultSessionStore, "where sessions' observations live: memory, or redis://[user:pass@]host:port/db (rediss:// for TLS), shared by every process behind a proxy")
	c.Sessions.RegisterFlags(fl)
	fl.StringVar(&c.SessionKeyPrefix, "session-key-prefix", defaultKeyPrefix, "prefix of every Redis key of the session store: one per workspace when several workspaces share one Redis")
	c.MCP.RegisterFlags(fl)
	fl.StringVar(&c.PublicURL, "public-url", "", "base URL clients reach this server at (e.g. https://tools.example.com/toolfs): the servers entry of /openapi.json (default: the request's scheme and Host; X-Forwarded-* headers are not trusted)")
	c.Cache.RegisterFlags(fl)
	c.Approvals.RegisterFlags(fl)
	fl.StringVar(&c.ApproverToken, "approver-token", "", "the only bearer token that may decide approvals (the agent's --token then cannot)")
	fl.StringVar(&c.ApproveBy, "approve-by", "", "who is asked about an escalation: elicitation (the MCP client's own user, where the client can be asked), approvals (a person at /approvals) or both, the first decision winning (default both; approvals with --approver-token; docs/sandbox.md)")
	fl.StringVar(&c.ElicitationKey, "elicitation-key", "", "64 hex digits: the AES-256 key sealing an escalation's request state on /mcp's sessionless revision (default: shared by the replicas through Redis, else random per process)")
	fl.DurationVar(&c.ShutdownGrace, "shutdown-grace", 30*time.Second, "how long SIGTERM waits for in-flight requests")
	c.Checkpoints.RegisterFlags(fl)
	c.NoJournal = false // the default, as the flag package's own Var functions set it
	fl.Var((*negated)(&c.NoJournal), "journal", "make a change's checkpoint and audit records durable with one sync of the workspace's journal, shared by concurrent changes (false: each record synced in its own file; docs/journal.md)")
	c.Events.RegisterFlags(fl)
	c.Identity.RegisterFlags(fl)
	c.Audit.RegisterFlags(fl)
	c.Console.RegisterFlags(fl)
	fl.BoolVar(&c.Stdio, "stdio", false, "serve MCP on standard input and output to the one client that started the process (Claude Desktop, claude mcp add, Cursor, VS Code), logging on stderr; nothing listens on --addr, so the change feed is off and escalations are denied (docs/mcp.md, \"Over stdio\")")
	fl.StringVar(&c.MetricsToken, "metrics-token", "", "bearer token accepted on GET /metrics alone, for a scraper (besides --token, or an access token with toolfs:read); set alone, it closes /metrics to everyone else")
}

// DefaultConfig is the flags' defaults: serve "." on 127.0.0.1:8080 with
// the policy on.
func DefaultConfig() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	return c.withDefaults()
}

// withDefaults gives every zero field whose flag must be positive or
// non-empty its default.
func (c Config) withDefaults() Config {
	c.Tools = c.Tools.WithDefaults()
	c.Images = c.Images.WithDefaults()
	c.Files = c.Files.WithDefaults()
	c.Upload = c.Upload.WithDefaults()
	c.Policy = c.Policy.WithDefaults()
	c.Search = c.Search.WithDefaults()
	c.Diagnostics = c.Diagnostics.WithDefaults()
	c.Approvals = c.Approvals.WithDefaults()
	c.Events = c.Events.WithDefaults()
	c.Checkpoints = c.Checkpoints.WithDefaults()
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	str := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	str(&c.SessionStore, defaultSessionStore)
	str(&c.SessionKeyPrefix, defaultKeyPrefix)
	str(&c.LogFormat, defaultLogFormat)
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
	if !isLoopback(host) && c.Token == "" && c.Identity.Issuer == "" && !c.AllowNoToken {
		return fmt.Errorf("--addr %q is not a loopback address: set --token or --oauth-issuer (or --allow-no-token to serve without auth)", c.Addr)
	}
	return nil
}

// validateSettings is Validate without the listening address, which only
// Listen uses; New runs it once the zero bounds took their defaults. Each
// subsystem validates its own settings; what spans two of them is checked
// here.
func (c Config) validateSettings() error {
	for _, v := range []interface{ Validate() error }{
		c.Tools, c.Images, c.Files, c.Upload, c.Cache, c.Policy, c.Sessions,
		c.Search, c.Diagnostics, c.Approvals, c.Events, c.Checkpoints, c.Identity, c.Telemetry,
	} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if c.MaxBodyBytes <= 0 {
		return errors.New("--max-body-bytes must be positive")
	}
	if c.LockDir != "" && c.LockDir != "off" {
		return fmt.Errorf("--lock-dir must be empty or off, not %q: lock files live in the workspace root's %s folder, so every process that sees the root shares them", c.LockDir, fs.PrivateDir)
	}
	if c.SessionStore != "memory" {
		if _, err := redisOptions(c.SessionStore); err != nil {
			return err
		}
	}
	if c.SessionKeyPrefix == "" {
		return errors.New("--session-key-prefix must not be empty")
	}
	if c.PublicURL != "" {
		if err := checkPublicURL(c.PublicURL); err != nil {
			return err
		}
	}
	if c.Identity.Issuer != "" && c.PublicURL == "" {
		return errors.New("--oauth-issuer needs --public-url: the URL clients reach this server at names it in every 401 and in its metadata, and is the default --oauth-audience")
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
	n := c.Cache.Bytes + memoryHeadroom
	if c.Policy.Enabled && c.SessionStore == "memory" {
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

// commaList is a comma-separated flag's values, trimmed, empty ones left
// out (--cors-origins, --oauth-audience).
func commaList(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// negated is a boolean flag bound to its negation (--journal over
// NoJournal), so the zero Config keeps the flag's default, true; it parses
// and fails as the flag package's own booleans do.
type negated bool

func (n *negated) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("parse error") // as the flag package's boolean flags say
	}
	*n = negated(!b)
	return nil
}

func (n *negated) String() string {
	if n == nil {
		return "true"
	}
	return strconv.FormatBool(!bool(*n))
}

func (n *negated) Get() any { return !bool(*n) }

// IsBoolFlag lets the flag stand alone, as a boolean flag.
func (n *negated) IsBoolFlag() bool { return true }

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
