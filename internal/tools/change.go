package tools

import (
	"context"
	"errors"
	"strings"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The change pipeline (SPEC §24, docs/architecture.md "The change
// pipeline"). Every operation that changes the workspace describes its
// change (its tool, whose session, its targets, what the read-before-write
// policy asks of them, its escalation, a dry run) and supplies its
// provider step; Executor.apply does everything else, in one order:
//
//	targets and session → the policy per target → the fence → the approval
//	(the whole change as one diff, checked again from the start after the
//	decision) → the audit reservation → the checkpoint keeper →
//	BeforeMutation → the provider step → failure mapping and the stale
//	count → observations → the audit commit → OnMutation → diagnostics →
//	metrics
//
// So whether a change is fenced, recorded, audited and published is
// decided here, once, for every operation.

// change is one call's change of the workspace. Everything but step is
// data: an operation says what its change is, not how it is guarded.
type change struct {
	// tool names the operation: the metrics' label, the audit record's,
	// the history's and the approval's tool, the change feed's event.
	tool string
	// call is the call; its Session is whose change it is.
	call Call
	// paths are the targets as the call named them, resolved by from with
	// verb ("write", "upload", ...: the root boundary's refusal names it).
	paths []string
	from  base
	verb  string
	// asks is what the read-before-write policy asks of each target.
	asks ask
	// esc is the call's sandbox_permissions and justification (zero: none).
	esc    escalation
	dryRun bool
	// step is the operation's provider step: the only code it supplies.
	step step
}

// base is where a change's paths start.
type base uint8

const (
	// fromCwd: the session cwd (the model's tools).
	fromCwd base = iota
	// fromRoot: the root, whatever the cwd (the files API, docs/files.md).
	fromRoot
	// fromHistory: root-relative real paths a history recorded; one that no
	// longer resolves is left to the step, which refuses it as changed.
	fromHistory
)

// ask is what the read-before-write policy asks of a change's targets
// (docs/api.md, "The policy"). A change it judges needs a session while
// the policy is on, its refusals carry the model's remedy, and its success
// records what the session now knows of each file.
type ask uint8

const (
	// askNothing: the change has its own guard (If-Match, the history's
	// versions) and moves no session's observations.
	askNothing ask = iota
	// askWrite: the write intent (create if absent, or replace the version
	// seen).
	askWrite
	// askEdit: the edit guard (the version seen).
	askEdit
)

// want is what a target must be for its change to apply, as the policy
// says (or, once a person approved, as the dry run shown found it): absent,
// or present at the version seen (or holding the bytes seen, by their
// hash). A nil *want is unconditional.
type want struct {
	absent bool
	seen   fs.Observed
}

// writeIntent is w as a write's intent, with its Keeper and dry run; nil
// (unconditional) when there is nothing to say.
func (w *want) writeIntent(k fs.Keeper, dryRun bool) *fs.WriteIntent {
	if w == nil && k == nil && !dryRun {
		return nil
	}
	in := &fs.WriteIntent{Keeper: k, DryRun: dryRun}
	switch {
	case w == nil:
	case w.absent:
		in.Kind = fs.CreateIfAbsent
	default:
		in.Kind, in.Version, in.Hash = fs.ReplaceIfVersion, w.seen.Version, w.seen.Hash
	}
	return in
}

// version is the version w expects (nil: any), as an edit takes it.
func (w *want) version() *fs.Version {
	if w == nil || w.absent {
		return nil
	}
	return &w.seen.Version
}

// seenHash is the hash of the bytes seen ("": compare versions only).
func (w *want) seenHash() fs.Hash {
	if w == nil {
		return ""
	}
	return w.seen.Hash
}

// pinned is what a target must be once a person approved the dry run o:
// as o found it (absent, or at its version, the bytes the session saw
// still counting as that version), so only the change shown can happen.
func (w *want) pinned(o outcome) *want {
	if o.created {
		return &want{absent: true}
	}
	return &want{seen: fs.Observed{Version: o.version, Hash: w.seenHash()}}
}

// step is an operation's provider step: it makes the change to in's
// targets, each guarded by its want and kept by its Keeper, or with
// in.dryRun checks it and computes it, writing nothing. It returns what it
// did to each target it changed, in order, or the provider's error.
type step func(ctx context.Context, in stepIn) ([]outcome, error)

// stepIn is what the pipeline hands a step.
type stepIn struct {
	targets []fs.Target
	wants   []*want
	// keepers record what each target's change replaces (the checkpoint,
	// the audit record); a nil one records nothing (a dry run, or no
	// history and no audit log).
	keepers []fs.Keeper
	dryRun  bool
}

// outcome is what a step did to one target.
type outcome struct {
	target fs.Target
	// version is the file's new version ("" when the change removed it);
	// a dry run's is the file's current one ("" when absent).
	version fs.Version
	hash    fs.Hash // of the new content ("" for a dry run or a removal)
	size    int64   // the new content's bytes
	created bool
	removed bool
	diffs   []render.Diff
	// shown is the change as a dry run shows it (a dry run's only): what a
	// person approving it sees.
	shown string
	// texts are the versions' exact bytes for the --diagnostics checkers;
	// nil: none run (not a text tool's change).
	texts *texts
	// states are the file's states around the change when the step
	// learned them itself (a revert); nil: its Keeper did.
	states *auditStates
	// found and diagnostics are what the checkers found (apply fills
	// them): the answer's added text and its metadata member.
	found       string
	diagnostics any
}

// texts are a change's two versions as exact bytes (nil: not held).
type texts struct{ before, after *string }

// apply runs ch through the pipeline and returns what its step did, or the
// call's error (counted and logged: the caller returns it as it is).
func (x *Executor) apply(ctx context.Context, ch *change) ([]outcome, *fault.Error) {
	c := ch.call
	if err := x.checkEscalation(ch.esc); err != nil {
		return nil, x.fail(c, ch.tool, err)
	}
	targets, wants, err := x.judge(ctx, ch, x.fenceOf(ch.esc))
	if err == nil && ch.esc.present {
		targets, wants, err = x.approve(ctx, ch, targets, wants)
	}
	if err != nil {
		return nil, x.fail(c, ch.tool, err)
	}
	in := stepIn{targets: targets, wants: wants, keepers: make([]fs.Keeper, len(targets)), dryRun: ch.dryRun}
	if ch.dryRun {
		// Nothing is recorded, audited or published: a dry run authorizes
		// nothing (docs/edits.md).
		outs, serr := ch.step(ctx, in)
		if serr != nil {
			return nil, x.fail(c, ch.tool, x.failure(ch, serr))
		}
		x.done(c, ch.tool, CodeOK)
		return outs, nil
	}
	// The records are reserved before anything changes (docs/audit.md).
	au, err := x.reserveAudit(ctx, c, ch.tool, len(targets))
	if err != nil {
		return nil, x.fail(c, ch.tool, err)
	}
	defer au.cancel()
	for i, t := range targets {
		in.keepers[i] = au.keeper(x.keeper(c, ch.tool))
		x.mutating(t)
	}
	outs, serr := ch.step(ctx, in)
	if serr != nil {
		return nil, x.fail(c, ch.tool, x.failure(ch, serr))
	}
	var lost *fault.Error
	for i := range outs {
		o := &outs[i]
		if ch.asks != askNothing {
			x.storeFailed("observe", x.gateOf(c).ObservePresent(c.key(), o.target.Key, o.version, o.hash))
		}
		if err := au.commitOutcome(x, i, o); err != nil && lost == nil {
			lost = x.auditLost(c, ch.tool, o.target.Display, err)
		}
		x.mutated(Mutation{Tool: ch.tool, Session: c.Session, Subject: c.Subject, Target: o.target, Version: o.version, Diffs: o.diffs})
	}
	if lost != nil {
		return nil, x.fail(c, ch.tool, lost)
	}
	for i := range outs {
		if o := &outs[i]; o.texts != nil {
			o.found, o.diagnostics = x.diagnose(ctx, o.target, o.created, o.texts.before, o.texts.after)
		}
	}
	x.done(c, ch.tool, CodeOK)
	return outs, nil
}

// judge is every check of ch before the provider, in the order of
// docs/sandbox.md: the session, the root (each target resolved now), the
// policy's want of each, the fence under mode. The same code judges the
// change before a person is asked and again once they approved.
func (x *Executor) judge(ctx context.Context, ch *change, mode Fence) ([]fs.Target, []*want, *fault.Error) {
	c := ch.call
	if ch.asks != askNothing && x.policyOn && c.Session == "" {
		return nil, nil, sessionError(msgNoSession)
	}
	targets, cwd, err := x.targetsOf(ctx, ch)
	if err != nil {
		return nil, nil, err
	}
	wants := make([]*want, len(targets))
	for i, t := range targets {
		if wants[i], err = x.wantOf(ch, t); err != nil {
			return nil, nil, err
		}
	}
	for _, t := range targets {
		if !x.allows(mode, t, cwd) {
			return nil, nil, fenceDenied(mode)
		}
	}
	return targets, wants, nil
}

// targetsOf resolves ch's paths, and the session cwd's Target (zero for
// the root) that the fence judges them by.
func (x *Executor) targetsOf(ctx context.Context, ch *change) ([]fs.Target, fs.Target, *fault.Error) {
	targets := make([]fs.Target, 0, len(ch.paths))
	switch ch.from {
	case fromCwd:
		cwd, err := x.cwdOf(ctx, ch.call)
		if err != nil {
			return nil, fs.Target{}, err
		}
		for _, p := range ch.paths {
			t, rerr := x.fs.Resolve(ctx, ch.verb, p, cwd.Display)
			if rerr != nil {
				return nil, fs.Target{}, errorOf(rerr)
			}
			targets = append(targets, t)
		}
		return targets, cwd, nil
	case fromRoot:
		for _, p := range ch.paths {
			t, err := x.filesTarget(ctx, ch.verb, p)
			if err != nil {
				return nil, fs.Target{}, err
			}
			targets = append(targets, t)
		}
	case fromHistory:
		for _, p := range ch.paths {
			if t, err := x.fs.Resolve(ctx, ch.verb, p, ""); err == nil {
				targets = append(targets, t)
			}
		}
	}
	cwd, err := x.cwdOf(ctx, ch.call)
	return targets, cwd, err
}

// wantOf asks the policy what t must be for ch's change.
func (x *Executor) wantOf(ch *change, t fs.Target) (*want, *fault.Error) {
	g, key := x.gateOf(ch.call), ch.call.key()
	switch ch.asks {
	case askWrite:
		intent, err := g.WriteIntent(key, t)
		switch {
		case err != nil:
			x.storeFailed("decide", err)
			return nil, x.failure(ch, err)
		case intent == nil || intent.Kind == 0:
			return nil, nil
		case intent.Kind == fs.CreateIfAbsent:
			return &want{absent: true}, nil
		}
		return &want{seen: fs.Observed{Version: intent.Version, Hash: intent.Hash}}, nil
	case askEdit:
		guard, err := g.EditGuard(key, t)
		switch {
		case err != nil:
			x.storeFailed("decide", err)
			return nil, x.failure(ch, err)
		case guard == nil:
			return nil, nil
		}
		return &want{seen: *guard}, nil
	}
	return nil, nil
}

// approve asks a person about ch's change as its dry run shows it (no
// channel: nobody is asked), and once approved judges the change again
// from the start under the granted mode. The wants it returns let only the
// change shown happen: the provider refuses anything else with the
// ordinary error (docs/sandbox.md).
func (x *Executor) approve(ctx context.Context, ch *change, targets []fs.Target, wants []*want) ([]fs.Target, []*want, *fault.Error) {
	if !x.asks {
		return nil, nil, escalationNoChannel(ch.esc.mode)
	}
	outs, serr := ch.step(ctx, stepIn{targets: targets, wants: wants, keepers: make([]fs.Keeper, len(targets)), dryRun: true})
	if serr != nil {
		return nil, nil, x.failure(ch, serr)
	}
	shown := make([]string, len(outs))
	for i, o := range outs {
		shown[i] = o.shown
	}
	if err := x.ask(ctx, ch.call, ch.tool, targets[0], ch.esc, strings.Join(shown, "\n")); err != nil {
		return nil, nil, err
	}
	now, nowWants, err := x.judge(ctx, ch, ch.esc.mode)
	if err != nil {
		return nil, nil, err
	}
	// Every path must still lead to the file shown, and the session's view
	// of it be the one the dry run was judged by (what the session did
	// meanwhile counts).
	if len(now) != len(targets) {
		return nil, nil, x.failure(ch, fs.StaleError(ch.verb, targets[0].Display))
	}
	for i := range now {
		if now[i].Key != targets[i].Key || !samePtr(nowWants[i], wants[i]) {
			return nil, nil, x.failure(ch, fs.StaleError(ch.verb, now[i].Display))
		}
	}
	pins := make([]*want, len(now))
	for i, o := range outs {
		pins[i] = wants[i].pinned(o)
	}
	return now, pins, nil
}

// failure maps what a change's checks or step returned: the stale count,
// and for a change the policy judges the model's remedy after the message
// (docs/api.md, "Errors") and, in the extended profile, a missed edit's
// hint on the next lines (docs/edits.md); the paths a refused revert
// names.
func (x *Executor) failure(ch *change, err error) *fault.Error {
	e := errorOf(err)
	var r *checkpoint.Refusal
	if errors.As(err, &r) {
		e.Paths = r.Paths
	}
	if e.Code == fault.CodeStaleVersion {
		x.obs.StaleVersion(ch.tool)
	}
	if ch.asks == askNothing {
		return e
	}
	e.Message += render.Remedy(e.Code)
	var fe *fault.Error
	if x.profile == render.ProfileOriginal || !errors.As(err, &fe) || fe.Hint == nil {
		return e
	}
	h := fe.Hint
	switch {
	case len(h.Lines) > 0:
		e.Message += render.SimilarHint(h.StartLine, h.Lines, x.caps.MaxLineLength)
		lines := h.Lines[:min(len(h.Lines), render.HintMaxLines)]
		shown := make([]string, len(lines))
		for i, l := range lines {
			shown[i] = render.TruncateLine(l, x.caps.MaxLineLength)
		}
		e.Hint = &fault.Hint{StartLine: h.StartLine, EndLine: h.StartLine + len(shown) - 1, Lines: shown}
	case len(h.MatchLines) > 0:
		e.Message += render.MatchesHint(h.MatchLines)
	}
	return e
}

// samePtr reports whether a and b are both nil or point to equal values.
func samePtr[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}
