package tools

import (
	"context"
	"errors"
	"io"

	"github.com/toolfs/toolfs-api/internal/approval"
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
	// asks is what the read-before-write policy asks of each target;
	// asksOf, when set, of each path in turn (a patch asks the edit guard
	// of a file it updates and the write intent of one it adds).
	asks   ask
	asksOf []ask
	// esc is the call's sandbox_permissions and justification (zero: none).
	esc    escalation
	dryRun bool
	// several: the change is one of several files, made as one journaled
	// change (docs/checkpoints.md, "Journaled changes"): the pipeline locks
	// every target, checks each against its want, hands the step the
	// locked files (stepIn.locked) and journals and publishes the new
	// content the step returns for each (outcome.fill) through the
	// checkpoint store. A revert (from fromHistory) is journaled by its own
	// step, the store's.
	several bool
	// oneSeq: the change's targets are recorded by their Keepers (not
	// journaled) as one change of the history, one seq (a file's move).
	oneSeq bool
	// step is the operation's provider step: the only code it supplies.
	step step
}

// journaled reports whether ch is one journaled change of the history
// (so its step gets no Keepers): a change of several files, or a revert.
func (ch *change) journaled() bool { return ch.several || ch.from == fromHistory }

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
// (docs/decisions.md, "Policy"). A change it judges needs a session while
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
// did, or the provider's error.
type step func(ctx context.Context, in stepIn) (stepOut, error)

// stepIn is what the pipeline hands a step.
type stepIn struct {
	targets []fs.Target
	wants   []*want
	// keepers record what each target's change replaces (the checkpoint,
	// the audit record); a nil one records nothing (a dry run, a journaled
	// change, or no history and no audit log).
	keepers []fs.Keeper
	dryRun  bool
	// fence is the sandbox fence of a journaled change, for each file its
	// step finds under its locks (nil: none); the pipeline fenced every
	// other change's targets itself.
	fence func(fs.Target) error
	// pin is what a journaled change's dry run found, once a person
	// approved it (nil: no approval): the step changes exactly that or
	// refuses.
	pin any
	// locked holds every target's lock, and current is each one as the
	// pipeline checked it under them: a change of several files' (nil
	// otherwise).
	locked  fs.LockedTargets
	current []fs.Info
}

// stepOut is what a step did.
type stepOut struct {
	files []outcome
	// shown is the whole change as a dry run shows it (a dry run's only):
	// what a person approving it sees.
	shown string
	// pin is what a journaled change's dry run found, for stepIn.pin.
	pin any
	// folder is a change of folders for the history (nil: none), which
	// no Keeper records: a folder mkdir made, a folder's move.
	folder *folderRecord
}

// folderRecord is a change of folders as the history keeps it
// (checkpoint.Store.RecordFolder): kind, and root-relative paths.
type folderRecord struct {
	kind, path, to string
}

// outcome is what a step did to one file.
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
	// fill writes the file's new content, for a change of several files
	// (nil: the change removes the file); the pipeline journals and
	// publishes it, a file it creates with mode (0: a new file's).
	fill func(io.Writer) error
	mode uint32
	// texts are the versions' exact bytes for the --diagnostics checkers;
	// none run unless texts.held (a text tool's change).
	texts texts
	// states are the file's states around the change when the step
	// learned them itself (a journaled change); nil: its Keeper did.
	states *auditStates
	// found and diagnostics are what the checkers found (apply fills
	// them): the answer's added text and its metadata member.
	found       string
	diagnostics any
}

// texts are a change's two versions as exact bytes (nil: not held, as
// the provider declines past its diff-basis limit), held by a step whose
// change the checkers judge.
type texts struct {
	held          bool
	before, after *string
}

// apply runs ch through the pipeline and returns what its step did, or the
// call's error (counted and logged: the caller returns it as it is).
func (x *Executor) apply(ctx context.Context, ch *change) (stepOut, *fault.Error) {
	c := ch.call
	if err := x.checkEscalation(ch.esc); err != nil {
		return stepOut{}, x.fail(c, ch.tool, err)
	}
	in, err := x.judge(ctx, ch, x.fenceOf(ch.esc))
	if err == nil && ch.esc.present {
		in, err = x.approve(ctx, ch, in)
	}
	if err != nil {
		return stepOut{}, x.fail(c, ch.tool, err)
	}
	if ch.dryRun {
		// Nothing is recorded, audited or published: a dry run authorizes
		// nothing (docs/edits.md).
		in.dryRun = true
		out, serr := x.run(ctx, ch, in)
		if serr != nil {
			return stepOut{}, x.fail(c, ch.tool, x.failure(ch, serr))
		}
		x.done(c, ch.tool, CodeOK)
		return out, nil
	}
	// The records are reserved before anything changes (docs/audit.md).
	au, err := x.reserveAudit(ctx, c, ch.tool, len(in.targets))
	if err != nil {
		return stepOut{}, x.fail(c, ch.tool, err)
	}
	defer au.cancel()
	jr, err := x.reserveJournal(c, ch)
	if err != nil {
		return stepOut{}, x.fail(c, ch.tool, err)
	}
	defer jr.cancel()
	au.journalTo(jr.entryOf())
	var first *checkpoint.Recording
	for i, t := range in.targets {
		if !ch.journaled() {
			k := x.keeper(c, ch.tool)
			if r, ok := k.(*checkpoint.Recording); ok && ch.oneSeq {
				if first == nil {
					first = r
				} else {
					r.Join(first)
				}
			}
			var rel string
			if au != nil {
				rel, _ = x.fs.Rel(t)
			}
			in.keepers[i] = au.keeper(jr.keeper(k), rel, jr.starter())
		}
		x.mutating(t)
	}
	out, serr := x.run(ctx, ch, in)
	if serr != nil {
		return stepOut{}, x.fail(c, ch.tool, x.failure(ch, serr))
	}
	var lost *fault.Error
	for i := range out.files {
		o := &out.files[i]
		switch {
		case ch.asks == askNothing:
		case o.removed:
			x.storeFailed("observe", x.gateOf(c).ObserveAbsent(c.key(), o.target.Key))
		default:
			x.storeFailed("observe", x.gateOf(c).ObservePresent(c.key(), o.target.Key, o.version, o.hash))
		}
		if err := au.commitOutcome(x, i, o); err != nil && lost == nil {
			lost = x.auditLost(c, ch.tool, o.target.Display, err)
		}
		x.mutated(Mutation{Tool: ch.tool, Session: c.Session, Subject: c.owner(), Target: o.target, Version: o.version, Diffs: o.diffs})
	}
	if f := out.folder; f != nil && x.ckpt != nil && c.Session != "" {
		// After the change, which cannot be undone here: a record that
		// cannot be written leaves the folder change out of the history.
		if err := x.ckpt.RecordFolder(ctx, c.key(), ch.tool, f.kind, f.path, f.to); err != nil {
			x.log.Warn("checkpoints: a folder change was not recorded", "tool", ch.tool, "err", err)
		}
	}
	// One sync for every record of the change (docs/journal.md).
	if err := x.commitJournal(jr); err != nil && lost == nil {
		lost = x.auditLost(c, ch.tool, in.targets[0].Display, err)
	}
	if lost != nil {
		return stepOut{}, x.fail(c, ch.tool, lost)
	}
	for i := range out.files {
		if o := &out.files[i]; o.texts.held {
			o.found, o.diagnostics = x.diagnose(ctx, o.target, o.created, o.texts.before, o.texts.after)
		}
		if !out.files[i].removed && c.Span != nil {
			c.Span.Wrote(out.files[i].size)
		}
	}
	x.done(c, ch.tool, CodeOK)
	return out, nil
}

// run is the provider step: the operation's own, or for a change of
// several files the files locked (one global order), each checked against
// its want, the step, and what it staged journaled and published as one
// change (docs/checkpoints.md, "Journaled changes"), so everything is
// checked before anything is published and a crash mid-way is completed
// or rolled back at start-up.
func (x *Executor) run(ctx context.Context, ch *change, in stepIn) (stepOut, error) {
	if !ch.several {
		return ch.step(ctx, in)
	}
	locker, ok := x.fs.FileSystem.(fs.TargetsLocker)
	if x.journal == nil || !ok {
		return stepOut{}, fault.New(fault.CodeInvalidArgument, msgSeveralUnavailable)
	}
	lk, err := locker.LockTargetsFor(ctx, ch.verb, in.targets)
	if err != nil {
		return stepOut{}, err
	}
	defer lk.Unlock()
	in.locked, in.current = lk, make([]fs.Info, len(in.targets))
	for i, t := range in.targets {
		if in.current[i], err = x.checkLocked(ctx, ch, lk, t, in.wants[i]); err != nil {
			return stepOut{}, err
		}
	}
	out, err := ch.step(ctx, in)
	if err != nil {
		return out, err
	}
	files := make([]checkpoint.FileChange, len(out.files))
	for i := range out.files {
		o := &out.files[i]
		files[i] = checkpoint.FileChange{Target: o.target, Fill: o.fill, Mode: o.mode}
		for j, t := range in.targets {
			if t.Key == o.target.Key {
				files[i].Expect = in.current[j].Version
				// A dry run's outcome is the file as it is.
				o.version, o.created = in.current[j].Version, in.current[j].Type == fs.TypeMissing
			}
		}
	}
	if in.dryRun {
		return out, nil
	}
	done, err := x.journal.Journal(ctx, ch.call.key(), ch.tool, lk, files)
	if err != nil {
		return stepOut{}, err
	}
	for i, j := range done {
		o := &out.files[i]
		o.version, o.hash, o.created, o.removed = j.Version, j.Hash, j.Before == nil, j.After == nil
		o.states = &auditStates{rel: j.Path, before: stateOfCheckpoint(j.Before), after: stateOfCheckpoint(j.After)}
		if j.After != nil {
			o.size = j.After.Bytes
		}
	}
	return out, nil
}

// msgSeveralUnavailable refuses a change of several files where it cannot
// be journaled (an executor given neither store; the server always gives
// one): it would not be all or nothing across a crash.
const msgSeveralUnavailable = "a change of several files needs the checkpoint store for its journal, and it is off on this server (--checkpoints=false)"

// checkLocked checks t, locked, against w as a write's intent is checked
// (docs/decisions.md, "Policy": the bytes the session saw still count as the
// version it saw) and returns what t is now.
func (x *Executor) checkLocked(ctx context.Context, ch *change, lk fs.LockedTargets, t fs.Target, w *want) (fs.Info, error) {
	r, info, err := lk.Open(ctx, t)
	if err != nil {
		return info, err
	}
	if r != nil {
		defer r.Close()
	}
	switch {
	case w == nil:
	case w.absent && info.Type != fs.TypeMissing:
		return info, fs.NotObservedError(t.Display)
	case w.absent:
	case info.Type == fs.TypeMissing:
		return info, fs.StaleError(ch.verb, t.Display)
	case info.Version != w.seen.Version && !sameBytes(r, w.seen.Hash):
		return info, fs.StaleError(ch.verb, t.Display)
	}
	return info, nil
}

// sameBytes reports whether r reads bytes whose hash is seen ("": unknown).
func sameBytes(r io.Reader, seen fs.Hash) bool {
	h, ok := r.(fs.ContentHasher)
	if seen == "" || !ok {
		return false
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return false
	}
	got, ok := h.ContentHash()
	return ok && got == seen
}

// judge is every check of ch before the provider, in the order of
// docs/sandbox.md: the session, the root (each target resolved now), the
// policy's want of each, the fence under mode. The same code judges the
// change before a person is asked and again once they approved. It
// returns what the step is handed.
func (x *Executor) judge(ctx context.Context, ch *change, mode Fence) (stepIn, *fault.Error) {
	c := ch.call
	if ch.asks != askNothing && x.policyOn && c.Session == "" {
		return stepIn{}, sessionError(msgNoSession)
	}
	var in stepIn
	if len(ch.paths) == 1 { // the usual change: its slices in one allocation
		one := new(oneTarget)
		in.targets, in.wants, in.keepers = one.t[:0], one.w[:], one.k[:]
	} else {
		in.targets = make([]fs.Target, 0, len(ch.paths))
	}
	targets, cwd, err := x.targetsOf(ctx, ch, mode, in.targets)
	if err != nil {
		return stepIn{}, err
	}
	in.targets = targets
	if len(ch.paths) != 1 || len(targets) != 1 {
		in.wants, in.keepers = make([]*want, len(targets)), make([]fs.Keeper, len(targets))
	}
	for i, t := range targets {
		if in.wants[i], err = x.wantOf(ch, ch.askOf(i), t); err != nil {
			return stepIn{}, err
		}
	}
	// The fence (docs/sandbox.md): one rule for every change. A revert's
	// step asks it of each file it finds under its locks; the pipeline asks
	// it of every other change's targets.
	if ch.from == fromHistory {
		in.fence = func(t fs.Target) error {
			if err := x.fenced(mode, t, cwd); err != nil {
				return err
			}
			return nil
		}
		return in, nil
	}
	for _, t := range targets {
		if err := x.fenced(mode, t, cwd); err != nil {
			return stepIn{}, err
		}
	}
	return in, nil
}

// fenced is the fence's answer for a change of t under mode, the session
// cwd being cwd: nil, or the original's denial.
func (x *Executor) fenced(mode Fence, t, cwd fs.Target) *fault.Error {
	if !x.allows(mode, t, cwd) {
		return fenceDenied(mode)
	}
	return nil
}

// oneTarget holds the per-target slices of a change of one file.
type oneTarget struct {
	t [1]fs.Target
	w [1]*want
	k [1]fs.Keeper
}

// targetsOf resolves ch's paths, appended to targets, and the session
// cwd's Target (zero for the root) that the fence judges them by under
// mode.
func (x *Executor) targetsOf(ctx context.Context, ch *change, mode Fence, targets []fs.Target) ([]fs.Target, fs.Target, *fault.Error) {
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
		if mode != FenceWorkspaceWrite {
			return targets, fs.Target{}, nil // the cwd is only the fence's
		}
	}
	cwd, err := x.cwdOf(ctx, ch.call)
	return targets, cwd, err
}

// askOf is what the policy asks of ch's i-th target.
func (ch *change) askOf(i int) ask {
	if i < len(ch.asksOf) {
		return ch.asksOf[i]
	}
	return ch.asks
}

// wantOf asks the policy what t must be for ch's change, as a asks.
func (x *Executor) wantOf(ch *change, a ask, t fs.Target) (*want, *fault.Error) {
	g, key := x.gateOf(ch.call), ch.call.key()
	switch a {
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
			return nil, x.failure(ch, ch.guardRefusal(t, err))
		case guard == nil:
			return nil, nil
		}
		return &want{seen: *guard}, nil
	}
	return nil, nil
}

// guardRefusal is the edit guard's refusal in the words of ch's tool (the
// policy words it for edit): "<tool> requires reading "<p>" first", and
// "cannot <verb> "<p>": not found" after a read confirmed absence.
func (ch *change) guardRefusal(t fs.Target, err error) error {
	if ch.tool == ToolEdit {
		return err
	}
	switch fault.CodeOf(err) {
	case fault.CodeNotObserved:
		return fault.New(fault.CodeNotObserved, ch.tool+` requires reading "`+t.Display+`" first`)
	case fault.CodeNotFound:
		return fault.New(fault.CodeNotFound, `cannot `+ch.verb+` "`+t.Display+`": not found`)
	}
	return err
}

// approve asks a person about ch's change as its dry run shows it (no
// channel: nobody is asked; a change that would change nothing asks
// nobody), and once approved judges the change again from the start under
// the granted mode. What it returns lets only the change shown happen:
// each target pinned to what the dry run found, or a journaled change to
// its dry run's pin, and the provider refuses anything else with the
// ordinary error (docs/sandbox.md).
func (x *Executor) approve(ctx context.Context, ch *change, in stepIn) (stepIn, *fault.Error) {
	if !x.asks {
		return stepIn{}, escalationNoChannel(ch.esc.mode)
	}
	dry := in
	dry.dryRun = true
	out, serr := x.run(ctx, ch, dry)
	if serr != nil {
		return stepIn{}, x.failure(ch, serr)
	}
	if len(out.files) > 0 {
		r := approval.Request{Session: ch.call.Session, Subject: ch.call.Subject, Tool: ch.tool, Path: out.files[0].target.Display, Diff: out.shown}
		if ch.journaled() || len(out.files) > 1 {
			for _, o := range out.files {
				r.Paths = append(r.Paths, o.target.Display)
			}
		}
		if err := x.askFor(ctx, ch.call, r, shownDigest(out), ch.esc); err != nil {
			return stepIn{}, err
		}
	}
	now, err := x.judge(ctx, ch, ch.esc.mode)
	if err != nil {
		return stepIn{}, err
	}
	if ch.from == fromHistory {
		now.pin = out.pin
		return now, nil
	}
	// Every path must still lead to the file shown, and the session's view
	// of it be the one the dry run was judged by (what the session did
	// meanwhile counts).
	for i := range now.targets {
		if i >= len(in.targets) || now.targets[i].Key != in.targets[i].Key || !samePtr(now.wants[i], in.wants[i]) {
			return stepIn{}, x.failure(ch, fs.StaleError(ch.verb, now.targets[i].Display))
		}
	}
	for i, t := range now.targets {
		for _, o := range out.files {
			if o.target.Key == t.Key {
				now.wants[i] = in.wants[i].pinned(o)
			}
		}
	}
	return now, nil
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
