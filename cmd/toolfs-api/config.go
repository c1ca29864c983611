package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// config is every setting of the server, from flags and their TOOLFS_*
// environment twins (a flag on the command line wins).
type config struct {
	root              string
	addr              string
	token             string
	corsOrigins       string
	readLimit         int
	readMaxLineLength int
	readMaxBytes      int
	readStreamMinSize int64
	policy            bool
	sessionTTL        time.Duration
	maxSessions       int
	maxPaths          int
	maxBodyBytes      int64
	logFormat         string
	allowNoToken      bool
	rgPath            string
	searchTimeout     time.Duration
	maxSearches       int
	searchSandbox     string
	lockDir           string
	sessionStore      string
	sessionKeyPrefix  string
	shutdownGrace     time.Duration
	sessionHeaders    string
	defaultSession    string
	requireSession    bool
	defaultSessionSet bool // named by the flag or its twin, not the default
	mcpStructured     bool
	sandboxMode       string
	approvals         bool
	approvalTimeout   time.Duration
	maxApprovals      int
	approverToken     string
	profile           string
	events            bool
	eventsMaxSubs     int
	eventsMaxWatches  int
	eventsHeartbeat   time.Duration
	publicURL         string
	cacheBytes        int64
	cacheRacyWindow   time.Duration
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fl := flag.NewFlagSet("toolfs-api", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&c.root, "root", ".", "workspace root: the folder the tools may reach")
	fl.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&c.token, "token", "", "bearer token required on every endpoint but /healthz")
	fl.StringVar(&c.corsOrigins, "cors-origins", "", "comma-separated browser origins allowed by CORS")
	fl.IntVar(&c.readLimit, "read-limit", 2000, "default and maximum lines per read")
	fl.IntVar(&c.readMaxLineLength, "read-max-line-length", 2000, "characters kept per line before truncation")
	fl.IntVar(&c.readMaxBytes, "read-max-bytes", 51200, "byte cap on one read window")
	fl.Int64Var(&c.readStreamMinSize, "read-stream-min-size", 10<<20, "accepted for compatibility with the original: every read is chunked, so memory is bounded for any size")
	fl.BoolVar(&c.policy, "policy", true, "read-before-write policy (false = bare provider)")
	fl.DurationVar(&c.sessionTTL, "session-ttl", 30*time.Minute, "idle time after which a session's observations are forgotten")
	fl.IntVar(&c.maxSessions, "max-sessions", 10000, "sessions kept at once (least recently used go first)")
	fl.IntVar(&c.maxPaths, "max-paths-per-session", 4096, "observations kept per session (least recently used go first)")
	fl.Int64Var(&c.maxBodyBytes, "max-body-bytes", 32<<20, "request bodies above this get 413")
	fl.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fl.BoolVar(&c.allowNoToken, "allow-no-token", false, "allow a non-loopback --addr without --token")
	fl.StringVar(&c.rgPath, "rg-path", "", "ripgrep binary for glob and grep (default: rg on PATH)")
	fl.DurationVar(&c.searchTimeout, "search-timeout", 30*time.Second, "glob and grep time limit")
	fl.IntVar(&c.maxSearches, "max-searches", 4, "glob and grep calls running at once")
	fl.StringVar(&c.searchSandbox, "search-sandbox", "require", "confinement of rg by Landlock: require (glob and grep are unavailable without it) or best-effort (run rg unconfined without it)")
	fl.StringVar(&c.lockDir, "lock-dir", "", "cross-process locks: empty (default) = lock files in <root>/"+fs.PrivateDir+"/locks, shared by every process that sees the root; \"off\" = in-process locks only (two servers on one root can then lose updates)")
	fl.StringVar(&c.sessionStore, "session-store", "memory", "where sessions' observations live: memory, or redis://[user:pass@]host:port/db (rediss:// for TLS), shared by every process behind a proxy")
	fl.StringVar(&c.sessionHeaders, "session-headers", "", "comma-separated header names tried after X-Session-ID for the session id (e.g. X-OpenWebUI-Chat-Id)")
	fl.StringVar(&c.defaultSession, "default-session", "default", "session id of a request that names none (a sessionless MCP client, an importer without a chat id, a curl script), so it reads and then edits with no set-up")
	fl.BoolVar(&c.requireSession, "require-session", false, "serve a request that names no session without one: it reads but cannot write or edit while the policy is on (400 INVALID_SESSION)")
	fl.StringVar(&c.sessionKeyPrefix, "session-key-prefix", "toolfs:", "prefix of every Redis key of the session store: one per workspace when several workspaces share one Redis")
	fl.BoolVar(&c.mcpStructured, "mcp-structured", false, "add each tool's metadata to its MCP result as structuredContent (Claude Code and Codex were seen to show the model that JSON instead of the text, so the model loses the exact text; docs/mcp.md)")
	fl.StringVar(&c.profile, "profile", "extended", "tool surface: extended (adds edits and dry_run, and hints on edit misses) or original (the original's exact surface)")
	fl.StringVar(&c.publicURL, "public-url", "", "base URL clients reach this server at (e.g. https://tools.example.com/toolfs): the servers entry of /openapi.json (default: the request's scheme and Host; X-Forwarded-* headers are not trusted)")
	fl.Int64Var(&c.cacheBytes, "cache-bytes", 64<<20, "bytes of the read caches (rendered windows, line indexes of large files), least recently used evicted first; 0 = off")
	fl.DurationVar(&c.cacheRacyWindow, "cache-racy-window", tools.DefaultRacyWindow(), "a file whose change time is more recent than this is never cached; by default the kernel's dirty-page expiry plus its writeback interval (vm.dirty_expire_centisecs + vm.dirty_writeback_centisecs, read at start-up; 35s when unreadable), since a write through a shared memory map leaves the stat unchanged until its pages are written back")
	fl.StringVar(&c.sandboxMode, "sandbox-mode", "off", "fence on writes and edits inside the root: off, read-only, workspace-write (under the session's cwd only) or danger-full-access; a fenced call may ask a person for a wider mode (docs/sandbox.md)")
	fl.BoolVar(&c.approvals, "approvals", true, "let escalations ask a person through GET/POST /approvals (false: every escalation is denied)")
	fl.DurationVar(&c.approvalTimeout, "approval-timeout", 5*time.Minute, "how long an escalated call waits for a person's decision")
	fl.IntVar(&c.maxApprovals, "max-approvals", 32, "approvals pending at once; past it an escalation answers 503 TOO_MANY_APPROVALS")
	fl.StringVar(&c.approverToken, "approver-token", "", "the only bearer token that may decide approvals (the agent's --token then cannot)")
	fl.DurationVar(&c.shutdownGrace, "shutdown-grace", 30*time.Second, "how long SIGTERM waits for in-flight requests")
	fl.BoolVar(&c.events, "events", true, "serve the change feed GET /events (docs/events.md)")
	fl.IntVar(&c.eventsMaxSubs, "events-max-subscribers", 64, "GET /events streams open at once (more get 503 TOO_MANY_SUBSCRIBERS)")
	fl.IntVar(&c.eventsMaxWatches, "events-max-watches", 8192, "folders watched for external changes (0 = report no external changes)")
	fl.DurationVar(&c.eventsHeartbeat, "events-heartbeat", 15*time.Second, "comment sent on an idle GET /events stream")

	if err := fl.Parse(args); err != nil {
		return c, err
	}
	if fl.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags only; see --help)", fl.Arg(0))
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fl.VisitAll(func(f *flag.Flag) {
		env := "TOOLFS_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v := getenv(env)
		if set[f.Name] || v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("invalid value %q for %s (--%s): %v", v, env, f.Name, err))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	c.defaultSessionSet = set["default-session"] || getenv("TOOLFS_DEFAULT_SESSION") != ""
	return c, c.validate()
}

func (c config) validate() error {
	positive := []struct {
		name string
		v    int64
	}{
		{"read-limit", int64(c.readLimit)},
		{"read-max-line-length", int64(c.readMaxLineLength)},
		{"read-max-bytes", int64(c.readMaxBytes)},
		{"read-stream-min-size", c.readStreamMinSize},
		{"max-sessions", int64(c.maxSessions)},
		{"max-paths-per-session", int64(c.maxPaths)},
		{"max-body-bytes", c.maxBodyBytes},
		{"max-searches", int64(c.maxSearches)},
		{"session-ttl", int64(c.sessionTTL)},
		{"search-timeout", int64(c.searchTimeout)},
		{"events-max-subscribers", int64(c.eventsMaxSubs)},
		{"events-heartbeat", int64(c.eventsHeartbeat)},
		{"approval-timeout", int64(c.approvalTimeout)},
		{"max-approvals", int64(c.maxApprovals)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("--%s must be positive", p.name)
		}
	}
	if c.cacheBytes < 0 {
		return errors.New("--cache-bytes must be 0 (off) or positive")
	}
	if c.cacheRacyWindow < 0 {
		return errors.New("--cache-racy-window must not be negative")
	}
	if c.lockDir != "" && c.lockDir != "off" {
		return fmt.Errorf("--lock-dir must be empty or off, not %q: lock files live in the workspace root's %s folder, so every process that sees the root shares them", c.lockDir, fs.PrivateDir)
	}
	if c.eventsMaxWatches < 0 {
		return fmt.Errorf("--events-max-watches must not be negative")
	}
	if c.sessionStore != "memory" {
		if _, err := redisOptions(c.sessionStore); err != nil {
			return err
		}
	}
	if c.sessionKeyPrefix == "" {
		return errors.New("--session-key-prefix must not be empty")
	}
	if c.requireSession && c.defaultSessionSet {
		return errors.New("--require-session and --default-session contradict each other: with --require-session a request that names no session has none")
	}
	if c.defaultSession == "" {
		return errors.New("--default-session must not be empty: use --require-session to serve requests that name no session without one")
	}
	if !tools.ValidSessionID(c.defaultSession) {
		return fmt.Errorf("--default-session %q: it must be 1-128 characters of A-Za-z0-9._:-", c.defaultSession)
	}
	for _, h := range c.sessionAliases() {
		if !validHeaderName(h) {
			return fmt.Errorf("--session-headers: %q is not a header name", h)
		}
	}
	if _, ok := render.ParseProfile(c.profile); !ok {
		return fmt.Errorf("--profile must be extended or original, not %q", c.profile)
	}
	if c.searchSandbox != string(search.SandboxRequire) && c.searchSandbox != string(search.SandboxBestEffort) {
		return fmt.Errorf("--search-sandbox must be require or best-effort, not %q", c.searchSandbox)
	}
	if c.publicURL != "" {
		if err := checkPublicURL(c.publicURL); err != nil {
			return err
		}
	}
	if _, ok := tools.ParseSandboxMode(c.sandboxMode); !ok {
		return fmt.Errorf("--sandbox-mode must be off, read-only, workspace-write or danger-full-access, not %q", c.sandboxMode)
	}
	if c.approverToken != "" && c.approverToken == c.token {
		return errors.New("--approver-token must differ from --token: the agent's token must not decide its own escalations")
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", c.addr, err)
	}
	if !isLoopback(host) && c.token == "" && !c.allowNoToken {
		return fmt.Errorf("--addr %q is not a loopback address: set --token (or --allow-no-token to serve without auth)", c.addr)
	}
	return nil
}

// loopback reports whether --addr is a loopback address.
func (c config) loopback() bool {
	host, _, err := net.SplitHostPort(c.addr)
	return err == nil && isLoopback(host)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (c config) origins() []string { return commaList(c.corsOrigins) }

func (c config) sessionAliases() []string { return commaList(c.sessionHeaders) }

// sessions is how a request's session is found (docs/api.md, "Sessions"):
// with --require-session a request that names none has none.
func (c config) sessions() tools.Sessions {
	s := tools.Sessions{Aliases: c.sessionAliases(), Default: c.defaultSession}
	if c.requireSession {
		s.Default = ""
	}
	return s
}

func commaList(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
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

// publicBase is --public-url without trailing slashes, so the view's paths
// (/model/<tool>) join it with one.
func (c config) publicBase() string { return strings.TrimRight(c.publicURL, "/") }
