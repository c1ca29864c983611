package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/toolfs/toolfs-api/internal/server"
)

// options is what the command line asks of the process: the server's
// settings, and what the binary does with them.
type options struct {
	server.Config
	// printVersion is --version: print the version and exit.
	printVersion bool

	// The flags whose values parseConfig turns into Config's fields.
	corsOrigins, sessionHeaders, oauthAudiences string
	requireSession, approvals, journal          bool
}

// parseConfig reads every setting of the server from flags and their
// TOOLFS_* environment twins (a flag on the command line wins) into a
// server.Config, and checks it (server.Config.Validate). --version has no
// twin: it is a question, not a setting, and is answered before anything
// else is checked. --help (or -h) is flag.ErrHelp: run prints the help on
// stdout (writeHelp). A flag the set does not define, or a value it
// cannot parse, is an error naming it.
func parseConfig(args []string, getenv func(string) string) (options, error) {
	var o options
	c := &o.Config
	fl := o.flagSet()
	// The help goes to stdout (run), an error once to stderr (main).
	fl.SetOutput(io.Discard)
	fl.Usage = func() {}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w (see --help)", err)
	}
	if fl.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (flags only; see --help)", fl.Arg(0))
	}
	if o.printVersion {
		return o, nil
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fl.VisitAll(func(f *flag.Flag) {
		env := envTwin(f.Name)
		v := getenv(env)
		if env == "" || set[f.Name] || v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("invalid value %q for %s (--%s): %v", v, env, f.Name, err))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	c.CORSOrigins, c.SessionHeaders, c.NoApprovals = commaList(o.corsOrigins), commaList(o.sessionHeaders), !o.approvals
	c.NoJournal = !o.journal
	c.OAuthAudiences = commaList(o.oauthAudiences)
	// With --require-session a request that names no session has none
	// (docs/api.md, "Sessions"): the two flags must not both be given.
	switch {
	case o.requireSession && (set["default-session"] || getenv("TOOLFS_DEFAULT_SESSION") != ""):
		return o, errors.New("--require-session and --default-session contradict each other: with --require-session a request that names no session has none")
	case o.requireSession:
		c.DefaultSession = ""
	case c.DefaultSession == "":
		return o, errors.New("--default-session must not be empty: use --require-session to serve requests that name no session without one")
	}
	return o, c.Validate()
}

// flagSet registers every flag of the binary, bound to o, with its default
// (server.DefaultConfig). Each belongs to one group of helpGroups.
func (o *options) flagSet() *flag.FlagSet {
	d := server.DefaultConfig()
	c := &o.Config
	fl := flag.NewFlagSet("toolfs-api", flag.ContinueOnError)
	fl.StringVar(&c.Root, "root", d.Root, "workspace root: the folder the tools may reach")
	fl.StringVar(&c.Addr, "addr", d.Addr, "listen address")
	fl.StringVar(&c.Token, "token", d.Token, "bearer token required on every endpoint but /healthz and /readyz")
	fl.StringVar(&o.corsOrigins, "cors-origins", "", "comma-separated browser origins allowed by CORS")
	fl.IntVar(&c.ReadLimit, "read-limit", d.ReadLimit, "default and maximum lines per read")
	fl.IntVar(&c.ReadMaxLineLength, "read-max-line-length", d.ReadMaxLineLength, "characters kept per line before truncation")
	fl.IntVar(&c.ReadMaxBytes, "read-max-bytes", d.ReadMaxBytes, "byte cap on one read window")
	fl.Int64Var(&c.ReadStreamMinSize, "read-stream-min-size", d.ReadStreamMinSize, "accepted for compatibility with the original: every read is chunked, so memory is bounded for any size")
	fl.IntVar(&c.ReadImageMaxPixels, "read-image-max-pixels", d.ReadImageMaxPixels, "long side, in pixels, of the picture an image read sends (larger images are scaled down; docs/media.md)")
	fl.Int64Var(&c.ReadImageMaxBytes, "read-image-max-bytes", d.ReadImageMaxBytes, "encoded bytes of the picture an image read sends at most (larger ones are re-encoded or scaled down)")
	fl.BoolVar(&c.Policy, "policy", d.Policy, "read-before-write policy (false = bare provider)")
	fl.DurationVar(&c.SessionTTL, "session-ttl", d.SessionTTL, "idle time after which a session's observations are forgotten")
	fl.IntVar(&c.MaxSessions, "max-sessions", d.MaxSessions, "sessions kept at once (least recently used go first)")
	fl.IntVar(&c.MaxPathsPerSession, "max-paths-per-session", d.MaxPathsPerSession, "observations kept per session (least recently used go first)")
	fl.Int64Var(&c.MaxBodyBytes, "max-body-bytes", d.MaxBodyBytes, "request bodies above this get 413 (uploads: --max-upload-bytes)")
	fl.Int64Var(&c.MaxUploadBytes, "max-upload-bytes", d.MaxUploadBytes, "PUT /files bodies above this get 413, and nothing is kept")
	fl.Int64Var(&c.UploadMinRate, "upload-min-rate", d.UploadMinRate, "bytes per second a PUT /files body must bring, counted over each --upload-rate-window; a slower or stalled body gets 408 BODY_TOO_SLOW and nothing is kept, a steady one is never cut for taking long")
	fl.DurationVar(&c.UploadRateWindow, "upload-rate-window", d.UploadRateWindow, "the window --upload-min-rate is counted over (at least 1s): a stalled upload is cut within it")
	fl.IntVar(&c.ListMaxEntries, "list-max-entries", d.ListMaxEntries, "entries of one GET /files listing at most (past it: truncated)")
	fl.StringVar(&c.LogFormat, "log-format", d.LogFormat, "log format: text or json")
	fl.BoolVar(&c.AllowNoToken, "allow-no-token", d.AllowNoToken, "allow a non-loopback --addr without --token")
	fl.StringVar(&c.RgPath, "rg-path", d.RgPath, "ripgrep binary for glob and grep (default: rg on PATH)")
	fl.DurationVar(&c.SearchTimeout, "search-timeout", d.SearchTimeout, "glob and grep time limit")
	fl.IntVar(&c.MaxSearches, "max-searches", d.MaxSearches, "glob and grep calls running at once")
	fl.StringVar(&c.SearchSandbox, "search-sandbox", d.SearchSandbox, "confinement of rg by Landlock: require (glob and grep are unavailable without it) or best-effort (run rg unconfined without it)")
	fl.StringVar(&c.Diagnostics, "diagnostics", d.Diagnostics, "JSON file of checkers (gofmt, shellcheck, a compiler) run after each write and edit of the extended profile; the answer lists only the problems the change introduced (docs/diagnostics.md)")
	fl.DurationVar(&c.DiagnosticsTimeout, "diagnostics-timeout", d.DiagnosticsTimeout, "time limit of the checkers of one write or edit, all together")
	fl.StringVar(&c.LockDir, "lock-dir", d.LockDir, "cross-process locks: empty (default) = lock files in "+server.LockFiles+", shared by every process that sees the root; \"off\" = in-process locks only (two servers on one root can then lose updates)")
	fl.StringVar(&c.SessionStore, "session-store", d.SessionStore, "where sessions' observations live: memory, or redis://[user:pass@]host:port/db (rediss:// for TLS), shared by every process behind a proxy")
	fl.StringVar(&o.sessionHeaders, "session-headers", "", "comma-separated header names tried after X-Session-ID for the session id (e.g. X-OpenWebUI-Chat-Id)")
	fl.StringVar(&c.DefaultSession, "default-session", d.DefaultSession, "session id of a request that names none (a sessionless MCP client, an importer without a chat id, a curl script), so it reads and then edits with no set-up")
	fl.BoolVar(&o.requireSession, "require-session", false, "serve a request that names no session without one: it reads but cannot write or edit while the policy is on (400 INVALID_SESSION)")
	fl.StringVar(&c.SessionKeyPrefix, "session-key-prefix", d.SessionKeyPrefix, "prefix of every Redis key of the session store: one per workspace when several workspaces share one Redis")
	fl.BoolVar(&c.MCPStructured, "mcp-structured", d.MCPStructured, "add each tool's metadata to its MCP result as structuredContent (Claude Code and Codex were seen to show the model that JSON instead of the text, so the model loses the exact text; docs/mcp.md)")
	fl.StringVar(&c.Profile, "profile", d.Profile, "tool surface: extended (adds edits and dry_run, and hints on edit misses) or original (the original's exact surface)")
	fl.StringVar(&c.EditDialect, "edit-dialect", d.EditDialect, "the edit tool offered to models, unless a client's URL asks for another with ?dialect=: str_replace (edit), apply_patch, anchors (edit_lines, and read shows <n>#<tag> anchors) or all (docs/edits.md)")
	fl.StringVar(&c.PublicURL, "public-url", d.PublicURL, "base URL clients reach this server at (e.g. https://tools.example.com/toolfs): the servers entry of /openapi.json (default: the request's scheme and Host; X-Forwarded-* headers are not trusted)")
	fl.Int64Var(&c.CacheBytes, "cache-bytes", d.CacheBytes, "bytes of the read caches (rendered windows, line indexes of large files), least recently used evicted first; 0 = off")
	fl.DurationVar(&c.CacheRacyWindow, "cache-racy-window", d.CacheRacyWindow, "a file whose change time is more recent than this is never cached; by default the kernel's dirty-page expiry plus its writeback interval (vm.dirty_expire_centisecs + vm.dirty_writeback_centisecs, read at start-up; 35s when unreadable), since a write through a shared memory map leaves the stat unchanged until its pages are written back")
	fl.StringVar(&c.SandboxMode, "sandbox-mode", d.SandboxMode, "fence on writes and edits inside the root: off, read-only, workspace-write (under the session's cwd only) or danger-full-access; a fenced call may ask a person for a wider mode (docs/sandbox.md)")
	fl.BoolVar(&o.approvals, "approvals", !d.NoApprovals, "let escalations ask a person through GET/POST /approvals (false: every escalation is denied)")
	fl.DurationVar(&c.ApprovalTimeout, "approval-timeout", d.ApprovalTimeout, "how long an escalated call waits for a person's decision")
	fl.IntVar(&c.MaxApprovals, "max-approvals", d.MaxApprovals, "approvals pending at once; past it an escalation answers 503 TOO_MANY_APPROVALS")
	fl.StringVar(&c.ApproverToken, "approver-token", d.ApproverToken, "the only bearer token that may decide approvals (the agent's --token then cannot)")
	fl.StringVar(&c.ApproveBy, "approve-by", d.ApproveBy, "who is asked about an escalation: elicitation (the MCP client's own user, where the client can be asked), approvals (a person at /approvals) or both, the first decision winning (default both; approvals with --approver-token; docs/sandbox.md)")
	fl.StringVar(&c.ElicitationKey, "elicitation-key", d.ElicitationKey, "64 hex digits: the AES-256 key sealing an escalation's request state on /mcp's sessionless revision (default: shared by the replicas through Redis, else random per process)")
	fl.DurationVar(&c.ShutdownGrace, "shutdown-grace", d.ShutdownGrace, "how long SIGTERM waits for in-flight requests")
	fl.BoolVar(&c.Checkpoints, "checkpoints", d.Checkpoints, "keep every session's change history, so its changes can be reverted (docs/checkpoints.md)")
	fl.BoolVar(&o.journal, "journal", !d.NoJournal, "make a change's checkpoint and audit records durable with one sync of the workspace's journal, shared by concurrent changes (false: each record synced in its own file; docs/journal.md)")
	fl.Int64Var(&c.CheckpointBytes, "checkpoint-bytes", d.CheckpointBytes, "bytes of the contents the checkpoints keep, all sessions together; the oldest go first")
	fl.Int64Var(&c.CheckpointMaxFileBytes, "checkpoint-max-file-bytes", d.CheckpointMaxFileBytes, "largest content a checkpoint keeps; a change that replaced a larger file is not revertible")
	fl.BoolVar(&c.Events, "events", d.Events, "serve the change feed GET /events (docs/events.md)")
	fl.IntVar(&c.EventsMaxSubscribers, "events-max-subscribers", d.EventsMaxSubscribers, "GET /events streams open at once (more get 503 TOO_MANY_SUBSCRIBERS)")
	fl.IntVar(&c.EventsMaxWatches, "events-max-watches", d.EventsMaxWatches, "folders watched for external changes (0 = report no external changes)")
	fl.DurationVar(&c.EventsHeartbeat, "events-heartbeat", d.EventsHeartbeat, "comment sent on an idle GET /events stream")
	fl.StringVar(&c.OAuthIssuer, "oauth-issuer", d.OAuthIssuer, "URL of the OAuth 2.1 authorization server whose JWT access tokens this server accepts (needs --public-url; --token still works beside it); sessions, approvals, events and changes then belong to each token's subject (docs/identity.md)")
	fl.StringVar(&o.oauthAudiences, "oauth-audience", "", "comma-separated aud values that name this server in an access token (default: --public-url and --public-url/mcp)")
	fl.StringVar(&c.AuditLog, "audit-log", d.AuditLog, "file of one JSON line per write, edit, revert, upload, delete and approval decision, on disk before the call is answered (synced in the journal's entry with --journal); a mutation whose line cannot be written fails with 503 AUDIT_UNAVAILABLE; SIGHUP reopens it (docs/audit.md)")
	fl.BoolVar(&c.Stdio, "stdio", d.Stdio, "serve MCP on standard input and output to the one client that started the process (Claude Desktop, claude mcp add, Cursor, VS Code), logging on stderr; nothing listens on --addr, so the change feed is off and escalations are denied (docs/mcp.md, \"Over stdio\")")
	fl.StringVar(&c.MetricsToken, "metrics-token", d.MetricsToken, "bearer token accepted on GET /metrics alone, for a scraper (besides --token, or an access token with toolfs:read); set alone, it closes /metrics to everyone else")
	fl.BoolVar(&c.UI, "ui", d.UI, "serve the web console at /ui/: approvals, the change feed, changes and revert, files, the server's state (docs/console.md)")
	fl.StringVar(&c.UIClientID, "ui-client-id", d.UIClientID, "with --oauth-issuer, the OAuth client id the console signs people in as (authorization code with PKCE; its redirect URI is <public-url>/ui/)")
	fl.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	return fl
}

// envTwin is the environment variable of a flag: TOOLFS_ and its name in
// capitals, dashes as underscores (--read-limit: TOOLFS_READ_LIMIT); ""
// for --version, which has none.
func envTwin(flag string) string {
	if flag == "version" {
		return ""
	}
	return "TOOLFS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
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
