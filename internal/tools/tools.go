// Package tools is the tool executor: one call of one tool, independent of
// any transport (docs/architecture.md). It decodes and checks the arguments
// once, resolves paths against the session cwd, asks the policy for the
// intent of every mutation, calls the provider, renders the answer, maps
// every failure to a *fault.Error with a stable fault.Code, and reports metrics to an
// Observer. Transports (REST in internal/handlers, MCP in internal/mcp)
// turn a request into a Call and the raw arguments, and the result or
// *fault.Error into their wire format; they hold no tool logic.
//
// It imports nothing HTTP: a Call carries what a transport learned from its
// headers, and a read's window is handed back for the transport to encode
// or stream.
package tools

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/toolfs/toolfs-api/internal/approval"
	"github.com/toolfs/toolfs-api/internal/audit"
	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/diagnostics"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/journal"
	"github.com/toolfs/toolfs-api/internal/media"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/search"
)

// The tool names, as the catalog lists them and metrics label them.
const (
	ToolRead  = "read"
	ToolWrite = "write"
	ToolEdit  = "edit"
	ToolGlob  = "glob"
	ToolGrep  = "grep"
	// ToolEditLines is the anchors dialect's edit (docs/edits.md,
	// "Anchored lines").
	ToolEditLines = "edit_lines"
)

// Names lists every tool in catalog order (of the all dialect).
var Names = []string{ToolRead, ToolWrite, ToolEdit, ToolApplyPatch, ToolEditLines, ToolGlob, ToolGrep, ToolMove, ToolDelete, ToolMkdir}

// Call is what a transport knows about one tool call besides its arguments.
type Call struct {
	// Session owns the observed state ("" = none: a read records nothing, a
	// write or edit is refused while the policy is on).
	Session string
	// Cwd is the session's working directory, absolute or relative to the
	// root ("" = the root).
	Cwd string
	// Transport labels the call in metrics: "rest" or "mcp".
	Transport string
	// Start is when the transport received the call (zero: when the
	// executor did); durations are measured from it.
	Start time.Time
	// Subject is who the call speaks for (docs/identity.md): a verified
	// token's subject; "" when no token was verified (the static --token
	// or no auth). With identities it scopes the session, the approvals,
	// the events and the checkpoints of the call.
	Subject string
	// Admin is a caller who sees every subject's approvals and events
	// (the toolfs:admin scope, or the static --token beside identities).
	Admin bool
	// Owner is the subject whose session the call acts on when an admin
	// names another subject's (?subject= on the sessions routes,
	// docs/identity.md); "" = Subject's own. Records and events still name
	// Subject as who acted.
	Owner string

	// Dialect is the edit dialect the client asked for (?dialect=,
	// docs/edits.md "Edit dialects"); "" = the server's (Options.Dialect).
	// It decides whether read answers with anchored lines.
	Dialect render.Dialect
	// Asker asks the user of the call's own client about an escalation
	// (MCP elicitation, docs/sandbox.md); nil: only /approvals can.
	Asker Asker
	// Span is the call's trace span, which the transport started and
	// ends; the executor tells it the call's outcome and bytes
	// (docs/running.md, "Traces"). nil: not traced.
	Span Span

	gate policy.Gate // the request's view of the gate (Executor.Use); nil: Executor.gate
}

// Options are the executor's dependencies; FS is required.
type Options struct {
	FS fs.FileSystem
	// Gate is the read-before-write policy; nil switches it off (the bare
	// provider: writes and edits unconditional, no session required). It is
	// the one setting of the policy's on/off.
	Gate   policy.Gate
	Search *search.Searcher // nil: glob and grep are unavailable
	Caps   render.Caps
	// Images bounds what an image read sends (--read-image-max-pixels,
	// --read-image-max-bytes; docs/media.md); zero fields take the
	// defaults.
	Images media.ImageLimits
	// Profile is the surface advertised and the hints on edit misses
	// (docs/edits.md, "Profiles"); "" is ProfileExtended.
	Profile render.Profile
	// Dialect is the edit dialect of a call that asks for none
	// (--edit-dialect; "" is DialectStrReplace). The original profile's
	// is always DialectStrReplace.
	Dialect  render.Dialect
	Observer Observer     // nil: no metrics
	Logger   *slog.Logger // nil: no logs
	// OnMutation is told of every successful write and edit, whatever the
	// transport (the change feed, docs/events.md); nil: nobody is. It runs
	// on the call's goroutine before the answer is returned, so it must not
	// block.
	OnMutation func(Mutation)
	// BeforeMutation is told of the target of every write and edit that is
	// about to run (dry runs excluded), so the change feed can tell the
	// file's inotify echo from an external change even when it arrives
	// before OnMutation does; nil: nobody is. It must not block.
	BeforeMutation func(fs.Target)
	// Cache sizes the read caches (docs/performance.md, "Caches"); the zero
	// value turns them off.
	Cache CacheConfig
	// Fence fences writes and edits ("" = FenceOff; --sandbox-mode, docs/sandbox.md).
	Fence Fence
	// Approvals holds the pending approvals: the executor opens one for an
	// escalation and waits for a person's decision, which transports list
	// and record through ListApprovals and DecideApproval. nil: an empty
	// store of the executor's own, and every escalation denied.
	Approvals *approval.Store
	// DenyEscalations denies every escalation at once, asking nobody
	// (--approvals=false): Approvals stays empty.
	DenyEscalations bool
	// ApproveBy chooses who is asked about an escalation (--approve-by;
	// "" = ApproveByBoth; docs/sandbox.md).
	ApproveBy ApproveBy
	// ApprovalsUnreachable says nobody can decide at /approvals (--stdio
	// serves no HTTP): an escalation is asked of the call's own client
	// alone, and denied at once when it cannot be.
	ApprovalsUnreachable bool
	// Diagnostics runs the --diagnostics checkers after each write and
	// edit of the extended profile (docs/diagnostics.md); nil: none.
	Diagnostics *diagnostics.Runner
	// Checkpoints records every write and edit of a session, so a person
	// can undo them (docs/checkpoints.md); nil: none are (--checkpoints=false).
	Checkpoints *checkpoint.Store
	// Journal journals the changes of several files (apply_patch) when
	// Checkpoints is nil: a journal-only store (checkpoint.Options
	// .JournalOnly), so such a change stays all or nothing across a crash
	// without a history (docs/checkpoints.md, "Without checkpoints"). Unused
	// when Checkpoints is set; nil with it: such a change is refused.
	Journal *checkpoint.Store
	// Files bounds the files operations (docs/files.md); they are
	// available when FS implements fs.Files.
	Files FilesConfig
	// Audit records every mutation and approval decision (--audit-log,
	// docs/audit.md); nil: none. The executor reserves a record before a
	// mutation and commits it before the call returns.
	Audit *audit.Log
	// AuditToken says the server has a static --token: a call without a
	// verified subject is recorded as audit.SubjectToken, else as
	// audit.SubjectNone.
	AuditToken bool
	// WAL is the workspace's journal of records (docs/journal.md): a
	// change of one file commits its checkpoint and audit records there
	// with one sync; nil: each record is synced in its own file.
	WAL *journal.Journal
}

// Executor runs tool calls. It is safe for concurrent use.
type Executor struct {
	fs        statCounter // the provider, counting its Stat calls (Observer.StatCall)
	gate      policy.Gate
	policyOn  bool
	search    *search.Searcher
	caps      render.Caps
	images    media.ImageLimits
	profile   render.Profile
	dialect   render.Dialect
	obs       Observer
	log       *slog.Logger
	mutated   func(Mutation)
	mutating  func(fs.Target)
	cache     *Cache // nil: off
	fence     Fence
	approvals *approval.Store
	ckpt      *checkpoint.Store // nil: off
	journal   *checkpoint.Store // the changes of several files' journal: ckpt, else Options.Journal
	// asks is whether an escalation opens an approval (else it is denied).
	asks        bool
	approveBy   ApproveBy
	unreachable bool                // Options.ApprovalsUnreachable
	diagnostics *diagnostics.Runner // nil: none
	// filesCfg bounds the files operations.
	filesCfg FilesConfig
	// audit is the audit log (nil: none); auditToken as Options.AuditToken.
	audit      *audit.Log
	auditToken bool
	wal        *journal.Journal // nil: none
}

// New returns an Executor over opts.
func New(opts Options) *Executor {
	x := &Executor{gate: opts.Gate, policyOn: opts.Gate != nil, search: opts.Search, caps: opts.Caps, obs: opts.Observer, log: opts.Logger,
		mutated: opts.OnMutation, mutating: opts.BeforeMutation, fence: opts.Fence, approvals: opts.Approvals, ckpt: opts.Checkpoints, journal: opts.Checkpoints,
		asks: opts.Approvals != nil && !opts.DenyEscalations, diagnostics: opts.Diagnostics,
		audit: opts.Audit, auditToken: opts.AuditToken, wal: opts.WAL}
	if x.journal == nil {
		x.journal = opts.Journal
	}
	if x.approvals == nil {
		x.approvals = approval.New(approval.Config{})
	}
	x.approveBy, x.unreachable = opts.ApproveBy, opts.ApprovalsUnreachable
	if x.approveBy == "" {
		x.approveBy = ApproveByBoth
	}
	if x.mutated == nil {
		x.mutated = func(Mutation) {}
	}
	if x.mutating == nil {
		x.mutating = func(fs.Target) {}
	}
	if x.fence == "" {
		x.fence = FenceOff
	}
	if x.gate == nil {
		x.gate = policy.Off{}
	}
	x.images = opts.Images
	if x.images.MaxSide <= 0 {
		x.images.MaxSide = media.DefaultMaxSide
	}
	if x.images.MaxBytes <= 0 {
		x.images.MaxBytes = media.DefaultMaxBytes
	}
	x.profile = opts.Profile
	if x.profile == "" {
		x.profile = render.ProfileExtended
	}
	x.dialect = opts.Dialect
	if x.dialect == "" || x.profile == render.ProfileOriginal {
		x.dialect = render.DialectStrReplace
	}
	if x.obs == nil {
		x.obs = nopObserver{}
	}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	x.fs = statCounter{FileSystem: opts.FS, count: x.obs.StatCall}
	x.fs.files, _ = opts.FS.(fs.Files)
	x.filesCfg = opts.Files
	if x.filesCfg.ListMaxEntries <= 0 {
		x.filesCfg.ListMaxEntries = DefaultListMaxEntries
	}
	if x.filesCfg.MaxUploadBytes <= 0 {
		x.filesCfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	x.cache = newCache(opts.Cache, x.obs)
	return x
}

// DialectOf is the edit dialect c is served in: the one it asked for, or
// the server's; always DialectStrReplace in the original profile.
func (x *Executor) DialectOf(c Call) render.Dialect {
	if c.Dialect == "" || x.profile == render.ProfileOriginal {
		return x.dialect
	}
	return c.Dialect
}

// ImageMaxBytes bounds the encoded picture an image read sends
// (--read-image-max-bytes).
func (x *Executor) ImageMaxBytes() int64 { return x.images.MaxBytes }

// Caps are the read caps every read window is bounded by.
func (x *Executor) Caps() render.Caps { return x.caps }

// CacheBytes is what the read caches hold now, against their cap.
func (x *Executor) CacheBytes() int64 {
	if x.cache == nil {
		return 0
	}
	return x.cache.Bytes()
}

// Touch counts a request carrying c's session as use of it (session TTL
// and least-recently-used order); a call without a session touches
// nothing. A lost touch only shortens the session's life: it fails closed,
// and is logged and counted.
func (x *Executor) Touch(c Call) { x.touch(c.key()) }

func (x *Executor) touch(session string) {
	if session != "" {
		x.storeFailed("touch", x.gate.Touch(session))
		x.touchHistory(session)
	}
}

// touchHistory counts a use of session for its change history's TTL.
func (x *Executor) touchHistory(session string) {
	if x.ckpt != nil && session != "" {
		x.ckpt.Touch(session)
	}
}

// keeper is the Keeper that records a change of c's session in its
// history (docs/checkpoints.md); nil with checkpoints off or without a
// session.
func (x *Executor) keeper(c Call, tool string) fs.Keeper {
	if x.ckpt == nil || c.Session == "" {
		return nil
	}
	return x.ckpt.Recording(c.key(), tool)
}

// Use counts the request of a tool call c as use of c.Session, as Touch
// does, and returns c to run the call with and end, to call when the
// request ends. A gate that can carry the use in the call's first decision
// or record (policy.UseCarrier: the Redis store) does so, and end touches
// only when none did, so a write costs two round trips (decide, record),
// not three; any other gate is touched now.
func (x *Executor) Use(c Call) (Call, func()) {
	uc, ok := x.gate.(policy.UseCarrier)
	if !ok || c.Session == "" {
		x.touch(c.key())
		return c, func() {}
	}
	g, end := uc.Using(c.key())
	x.touchHistory(c.key())
	c.gate = g
	return c, func() { x.storeFailed("touch", end()) }
}

// gateOf is the gate c's decisions and records go to.
func (x *Executor) gateOf(c Call) policy.Gate {
	if c.gate != nil {
		return c.gate
	}
	return x.gate
}

// ForgetSession drops the observed state and the change history of c's
// session (its subject's: docs/identity.md); forgetting an unknown session
// is not an error. It fails only when the session store cannot be
// reached, or the history cannot be removed.
func (x *Executor) ForgetSession(c Call) *fault.Error {
	session := c.key()
	if _, err := x.gate.Forget(session); err != nil {
		x.storeFailed("forget", err)
		return fault.New(fault.CodeSessionStoreUnavailable, "cannot forget the session: the session store is unavailable; retry shortly")
	}
	if x.ckpt != nil {
		if err := x.ckpt.Forget(context.Background(), session); err != nil {
			x.log.Error("cannot forget a session's change history", "session", c.Session, "err", err)
			return &fault.Error{Code: fault.CodeIO, Message: "cannot forget the session: its change history cannot be removed", Err: err}
		}
	}
	return nil
}

// storeFailed logs and counts a session store failure (nil and the policy's
// own refusals, such as FS_NOT_OBSERVED, are not failures). A lost
// observation fails closed: the session must read again
// (docs/deployment.md).
func (x *Executor) storeFailed(op string, err error) {
	if err == nil || !errors.Is(err, policy.ErrUnavailable) {
		return
	}
	x.obs.SessionStoreError(op)
	x.log.Warn("session store unavailable", "op", op, "err", err)
}

// Refuse records a tool call the transport refused before the executor ran
// it (a body over the size cap, a malformed header), so every call counts.
func (x *Executor) Refuse(c Call, tool string, err *fault.Error) {
	x.done(c, tool, err.Code)
}

// start fixes the call's start time.
func (c Call) started() Call {
	if c.Start.IsZero() {
		c.Start = time.Now()
	}
	return c
}

func (x *Executor) done(c Call, tool string, code fault.Code) {
	x.obs.ToolCall(c.Transport, tool, code, time.Since(c.started().Start))
	if c.Span != nil {
		failure := code
		if code == CodeOK {
			failure = ""
		}
		c.Span.Outcome(tool, failure, c.key())
	}
}

// fail records a failed call and returns its error, after logging an
// internal cause.
func (x *Executor) fail(c Call, tool string, err *fault.Error) *fault.Error {
	switch {
	case err.Code == fault.CodeIO && err.Err != nil:
		x.log.Error("unexpected error", "tool", tool, "err", err.Err)
	case err.Err != nil:
		x.log.Debug("tool error", "tool", tool, "code", err.Code, "cause", err.Err)
	}
	x.done(c, tool, err.Code)
	return err
}

// Run runs one call of the named tool (one of Names) and returns the whole
// answer: for a read, the window's output and metadata (a transport that
// streams reads calls Read instead). It is the one entry of transports that
// answer with text (MCP's tools/call, POST /model/<tool>), so none of them
// keeps its own switch over the tools. An unknown name is INVALID_ARGUMENT;
// a transport for which that is a protocol error checks Names first.
func (x *Executor) Run(ctx context.Context, c Call, tool string, raw []byte) (Result, *fault.Error) {
	switch tool {
	case ToolRead:
		rd, err := x.Read(ctx, c, raw)
		if err != nil {
			return Result{}, err
		}
		res, err := rd.Window(ctx)
		if err != nil {
			return Result{}, err
		}
		return Result{Output: res.Output(), Metadata: res.Meta}, nil
	case ToolWrite:
		return x.Write(ctx, c, raw)
	case ToolEdit:
		return x.Edit(ctx, c, raw)
	case ToolEditLines:
		if x.Offers(ToolEditLines) {
			return x.EditLines(ctx, c, raw)
		}
	case ToolGlob:
		return x.Glob(ctx, c, raw)
	case ToolGrep:
		return x.Grep(ctx, c, raw)
	case ToolApplyPatch:
		if x.Offers(ToolApplyPatch) {
			return x.ApplyPatch(ctx, c, raw)
		}
	case ToolMove:
		return x.Move(ctx, c, raw)
	case ToolDelete:
		return x.DeleteTool(ctx, c, raw)
	case ToolMkdir:
		return x.Mkdir(ctx, c, raw)
	case ToolChanges:
		if x.HistoryCatalog() != nil {
			res, err := x.Changes(ctx, c, c.Session)
			return Result{Output: res.Output, Metadata: changesMetadata{Changes: res.Changes}}, err
		}
	case ToolRevert:
		if x.HistoryCatalog() != nil {
			return x.Revert(ctx, c, c.Session, raw)
		}
	}
	return Result{}, argError("unknown tool " + render.Quote(tool))
}

// Result is a successful write, edit, glob or grep: the exact model-facing
// output and the metadata for JSON (WriteMetadata, EditMetadata,
// search.PathsMeta or search.MatchesMeta).
type Result struct {
	Output   string `json:"output"`
	Metadata any    `json:"metadata"`
}

// cwd is the session's working directory: the root, or c.Cwd when it names
// an existing folder inside the root (one Stat).
func (x *Executor) cwd(ctx context.Context, c Call) (fs.Target, *fault.Error) {
	p := c.Cwd
	if p == "" {
		p = "."
	}
	t, info, err := x.resolveStat(ctx, "read", p, "")
	if err != nil || info.Type != fs.TypeDirectory {
		return fs.Target{}, badCwd(p)
	}
	return t, nil
}

// resolveStat resolves path and stats its target, counting one Stat.
func (x *Executor) resolveStat(ctx context.Context, op, path, cwd string) (fs.Target, fs.Info, error) {
	return x.fs.ResolveStat(ctx, op, path, cwd)
}

func badCwd(p string) *fault.Error {
	return sessionError("X-Session-Cwd " + render.Quote(p) + " is not an existing folder inside the workspace root")
}

// cwdOf is the session cwd's Target, zero for the root (no X-Session-Cwd).
func (x *Executor) cwdOf(ctx context.Context, c Call) (fs.Target, *fault.Error) {
	if c.Cwd == "" {
		return fs.Target{}, nil
	}
	return x.cwd(ctx, c)
}
