package tools

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/jsonscan"
	"github.com/toolfs/toolfs-api/internal/patch"
	"github.com/toolfs/toolfs-api/internal/render"
)

// ToolApplyPatch is the patch dialect's edit tool (SPEC §25).
const ToolApplyPatch = "apply_patch"

// The declared arguments of apply_patch and of one of its operations.
var (
	patchParams     = render.ApplyPatch.Params
	operationParams = paramOf(patchParams, "operations").Items
)

// MaxPatchBytes bounds what one patch holds in memory: every file it
// reads, before and after (docs/edits.md, "apply_patch").
const MaxPatchBytes = 256 << 20

// MaxPatchFileBytes is the largest file a patch reads (patch.MaxFileBytes):
// the journal-only store keeps every file of a patch whole up to it
// (docs/checkpoints.md, "Without checkpoints").
const MaxPatchFileBytes = patch.MaxFileBytes

// The refusals of apply_patch beyond the patch package's and the policy's
// (docs/edits.md, "apply_patch").
func msgSameFile(a, b string) string {
	return `invalid patch: "` + a + `" and "` + b + `" are the same file`
}

func msgPatchTooLarge() string {
	return "cannot apply the patch: its files hold more than " + strconv.Itoa(MaxPatchBytes) + " bytes"
}

type patchArgs struct {
	p      *patch.Patch
	ops    bool // sent as operations
	dryRun bool
	esc    escalation
}

func patchArgsOf(raw []byte) (patchArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return patchArgs{}, err
	}
	vs := values{params: patchParams}
	if err := vs.typePass(a); err != nil {
		return patchArgs{}, err
	}
	input, ops := vs.of("input"), vs.of("operations")
	pa := patchArgs{dryRun: vs.of("dry_run").boolean, esc: escalationOf(&vs)}
	if input.present() && ops.present() {
		return patchArgs{}, argError(render.MsgPatchBothForms)
	}
	var perr error
	if ops.present() {
		list, err := operationsOf(ops.raw)
		if err != nil {
			return patchArgs{}, err
		}
		pa.p, perr = patch.FromOperations(list)
		pa.ops = true
	} else {
		pa.p, perr = patch.Parse(input.str)
	}
	if perr != nil {
		return patchArgs{}, errorOf(perr)
	}
	return pa, nil
}

// operationsOf checks the items of operations (a JSON array) in order,
// each with the declared item arguments' type pass, named by its JSON path;
// the values are patch.FromOperations's to check.
func operationsOf(raw []byte) ([]patch.Operation, *fault.Error) {
	var items [][]byte
	for at, end := range jsonscan.Elements(raw, 0) {
		if len(items) == render.MaxOperations {
			return nil, argError(render.MsgOperationsCount)
		}
		items = append(items, raw[at:end])
	}
	if len(items) == 0 {
		return nil, argError(render.MsgOperationsCount)
	}
	out := make([]patch.Operation, 0, len(items))
	for i, item := range items {
		at := "operations[" + strconv.Itoa(i) + "]"
		if item[0] != '{' {
			return nil, argError(at + " must be an object with type and path")
		}
		a, err := decodeArgs(item)
		if err != nil {
			return nil, argError(at + ": " + err.Message)
		}
		vs := values{params: operationParams}
		if err := vs.typePass(a); err != nil {
			return nil, argError(at + "." + err.Message)
		}
		out = append(out, patch.Operation{Type: vs.of("type").str, Path: vs.of("path").str, Diff: vs.of("diff").str})
	}
	return out, nil
}

// PatchMetadata is apply_patch's metadata: each file in patch order, the
// hunks found at a tolerant level, and for the operations form each
// operation's status and output, as a frontend returns them in
// apply_patch_call_output (docs/edits.md).
type PatchMetadata struct {
	Files       []PatchFileMeta  `json:"files"`
	Matches     []PatchMatchMeta `json:"matches,omitempty"`
	Operations  []OperationMeta  `json:"operations,omitempty"`
	Diagnostics []any            `json:"diagnostics,omitempty"`
}

// PatchFileMeta is one file of a patch: its path as the patch names it,
// its operation ("add", "update", "delete", "move"), a move's destination,
// and the change's hunks with 3 lines of context.
type PatchFileMeta struct {
	Path      string        `json:"path"`
	Operation string        `json:"operation"`
	To        string        `json:"to,omitempty"`
	Diffs     []render.Diff `json:"diffs"`
}

// PatchMatchMeta is a hunk found at a tolerant level: the file (as the
// patch names it), the hunk (1-based, in the file's order), the level
// (3, 4 or 6, as the tolerant edit numbers them) and its lines.
type PatchMatchMeta struct {
	Path      string `json:"path"`
	Hunk      int    `json:"hunk"`
	Level     int    `json:"level"`
	StartLine int    `json:"startLine"`
	EndLine   int    `json:"endLine"`
}

// OperationMeta is one operation's apply_patch_call_output.
type OperationMeta struct {
	Status string `json:"status"`
	Output string `json:"output"`
}

// patchTargets lists a patch's paths in patch order (an Update's Move to
// right after it) and what the policy asks of each: the edit guard of a
// file the patch updates, deletes or moves away, the write intent of one it
// adds or moves onto.
func patchTargets(p *patch.Patch) ([]string, []ask) {
	var paths []string
	var asks []ask
	for _, f := range p.Files {
		paths = append(paths, f.Path)
		if f.Op == patch.OpAdd {
			asks = append(asks, askWrite)
		} else {
			asks = append(asks, askEdit)
		}
		if f.MoveTo != "" {
			paths = append(paths, f.MoveTo)
			asks = append(asks, askWrite)
		}
	}
	return paths, asks
}

// ApplyPatch applies a patch (SPEC §25): every file it names resolved,
// judged by the policy and the fence, every hunk found, before anything is
// written; then every file published as one change of the pipeline, under
// the locks of all of them.
func (x *Executor) ApplyPatch(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	if !x.Offers(ToolApplyPatch) {
		return Result{}, x.fail(c, ToolApplyPatch, argError("unknown tool "+render.Quote(ToolApplyPatch)))
	}
	a, err := patchArgsOf(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolApplyPatch, err)
	}
	paths, asks := patchTargets(a.p)
	var done patched
	out, err := x.apply(ctx, &change{tool: ToolApplyPatch, call: c, paths: paths, verb: "patch", asks: askEdit, asksOf: asks, esc: a.esc, dryRun: a.dryRun, several: true,
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			var err error
			if done, err = x.patchStep(ctx, in, a.p); err != nil {
				return stepOut{}, err
			}
			so := stepOut{files: done.outs}
			if in.dryRun {
				so.shown = render.PatchDryRunOutput(done.files, done.matches, done.diffs)
			}
			return so, nil
		}})
	if err != nil {
		return Result{}, err
	}
	return done.result(a, out), nil
}

// Offers reports whether the server's profile has tool: apply_patch,
// edit_lines, move, delete and mkdir are tools of the extended profile
// (the original profile's surface is the original's, SPEC §11).
func (x *Executor) Offers(tool string) bool {
	switch tool {
	case ToolApplyPatch, ToolEditLines, ToolMove, ToolDelete, ToolMkdir:
		return x.profile != render.ProfileOriginal
	}
	return true
}

// patched is what a patch's step did: an outcome per target, in the
// targets' order, and the answer's lines.
type patched struct {
	outs    []outcome
	files   []render.PatchFile
	meta    []PatchFileMeta
	matches []render.PatchMatch
	mmeta   []PatchMatchMeta
	diffs   []string // a dry run's, per file
	perFile [][]int  // each file's matches, for its operation's output
}

// result is the answer of a patch that applied (or a dry run's).
func (d patched) result(a patchArgs, out stepOut) Result {
	meta := PatchMetadata{Files: d.meta, Matches: d.mmeta}
	var found strings.Builder
	for _, o := range out.files {
		found.WriteString(o.found)
		if o.diagnostics != nil {
			meta.Diagnostics = append(meta.Diagnostics, o.diagnostics)
		}
	}
	if a.ops && !a.dryRun {
		for i, f := range d.files {
			out := render.PatchFileLine(f)
			for _, m := range d.perFile[i] {
				out += "\n" + render.PatchMatchLine(d.matches[m])
			}
			meta.Operations = append(meta.Operations, OperationMeta{Status: "completed", Output: out})
		}
	}
	if a.dryRun {
		return Result{Output: out.shown, Metadata: meta}
	}
	return Result{Output: render.PatchOutput(d.files, d.matches) + found.String(), Metadata: meta}
}

// patchFile is one target of a patch as its step sees it, under the
// locks the pipeline took.
type patchFile struct {
	t      fs.Target
	info   fs.Info // as the pipeline checked it against the policy
	old    []byte  // its content now (nil: absent)
	new    []byte  // what it gets (nil: removed)
	remove bool
	mode   uint32 // a created file's permission bits (a move keeps its source's)
	diffs  []render.Diff
}

// patchStep is a patch's provider step, every target locked and checked
// against the policy by the pipeline (a change of several files): each
// file read, checked and patched in memory, and its new content (or its
// removal) handed back for the pipeline to journal and publish as one
// change (docs/checkpoints.md, "Journaled changes").
func (x *Executor) patchStep(ctx context.Context, in stepIn, p *patch.Patch) (patched, error) {
	for i, t := range in.targets {
		for j := range i {
			if in.targets[j].Key == t.Key {
				return patched{}, argError(msgSameFile(in.targets[j].Display, t.Display))
			}
		}
	}
	files := make([]*patchFile, len(in.targets))
	total := 0
	for i, t := range in.targets {
		f := &patchFile{t: t, info: in.current[i]}
		if err := f.read(ctx, in.locked, &total); err != nil {
			return patched{}, err
		}
		files[i] = f
	}
	var d patched
	at := 0 // the next target
	for _, pf := range p.Files {
		src := files[at]
		at++
		var dst *patchFile
		if pf.MoveTo != "" {
			dst = files[at]
			at++
		}
		if err := x.plan(pf, src, dst, &d, &total); err != nil {
			return patched{}, err
		}
	}
	for _, f := range files {
		d.outs = append(d.outs, f.outcome())
	}
	return d, nil
}

// read reads the target's file under the locks (bounded by
// patch.MaxFileBytes, and all files together by MaxPatchBytes).
func (f *patchFile) read(ctx context.Context, lk fs.LockedTargets, total *int) error {
	if !f.exists() {
		return nil
	}
	r, info, err := lk.Open(ctx, f.t)
	if err != nil {
		return err
	}
	if r == nil {
		f.info = info
		return nil
	}
	defer r.Close()
	tooLarge := fault.New(fault.CodeTooLarge, `cannot patch "`+f.t.Display+`": the file is larger than `+strconv.Itoa(patch.MaxFileBytes)+` bytes`)
	if info.Size > patch.MaxFileBytes {
		return tooLarge
	}
	if *total += int(info.Size); *total > MaxPatchBytes {
		return fault.New(fault.CodeTooLarge, msgPatchTooLarge())
	}
	b, err := io.ReadAll(io.LimitReader(r, patch.MaxFileBytes+1))
	if err != nil {
		return err
	}
	if len(b) > patch.MaxFileBytes {
		return tooLarge
	}
	f.old = b
	return nil
}

func (f *patchFile) exists() bool { return f.info.Type != fs.TypeMissing }

// checkSource checks a file the patch updates, deletes or moves away: it
// exists (with the policy on, the pipeline refused it as stale already),
// and an update's is text.
func (f *patchFile) checkSource(update bool) error {
	p := f.t.Display
	if !f.exists() {
		return fault.New(fault.CodeNotFound, `cannot patch "`+p+`": not found`)
	}
	if !update {
		return nil
	}
	if bytes.IndexByte(f.old, 0) >= 0 {
		return fault.New(fault.CodeNotText, `cannot patch "`+p+`": binary file`)
	}
	if !utf8.Valid(f.old) {
		return fault.New(fault.CodeNotText, `cannot patch "`+p+`": invalid UTF-8 text`)
	}
	return nil
}

// plan computes one file operation of the patch: its checks, its new
// contents, its answer lines and metadata.
func (x *Executor) plan(pf patch.File, src, dst *patchFile, d *patched, total *int) error {
	meta := PatchFileMeta{Path: pf.Path, Operation: pf.Op.String(), Diffs: []render.Diff{}}
	line := render.PatchFile{Op: pf.Op.String(), Path: src.t.Display}
	var mine []int
	switch pf.Op {
	case patch.OpAdd:
		src.new = []byte(pf.Content)
		if src.exists() { // a create has none, as a write's
			meta.Diffs = textDiffs(pf.Path, src.old, src.new)
		}
		src.diffs = meta.Diffs
	case patch.OpDelete:
		if err := src.checkSource(false); err != nil {
			return err
		}
		src.remove = true
		meta.Diffs = textDiffs(pf.Path, src.old, []byte{})
		src.diffs = meta.Diffs
	case patch.OpUpdate:
		if err := src.checkSource(true); err != nil {
			return err
		}
		content := src.old
		if len(pf.Hunks) > 0 {
			r, err := patch.Apply(src.old, pf.Hunks, src.t.Display)
			if err != nil {
				return withPatchHint(err, src.old)
			}
			content = r.Content
			for k, pl := range r.Places {
				if pl.Level == patch.LevelExact {
					continue
				}
				mine = append(mine, len(d.matches))
				d.matches = append(d.matches, render.PatchMatch{Level: int(pl.Level), StartLine: pl.Start + 1, EndLine: pl.End, Path: src.t.Display})
				d.mmeta = append(d.mmeta, PatchMatchMeta{Path: pf.Path, Hunk: k + 1, Level: int(pl.Level), StartLine: pl.Start + 1, EndLine: pl.End})
			}
		}
		diffPath := pf.Path
		if dst == nil {
			src.new = content
		} else {
			src.remove = true
			dst.new, dst.mode = content, src.info.Mode
			meta.Operation, meta.To, diffPath = "move", pf.MoveTo, pf.MoveTo
			line.Op, line.To = "move", dst.t.Display
		}
		meta.Diffs = textDiffs(diffPath, src.old, content)
		if dst == nil {
			src.diffs = meta.Diffs
		} else {
			dst.diffs = meta.Diffs
		}
	}
	if *total += len(src.new); dst != nil {
		*total += len(dst.new)
	}
	if *total > MaxPatchBytes {
		return fault.New(fault.CodeTooLarge, msgPatchTooLarge())
	}
	d.files = append(d.files, line)
	d.meta = append(d.meta, meta)
	d.perFile = append(d.perFile, mine)
	d.diffs = append(d.diffs, dryRunDiff(line, src, dst))
	return nil
}

// withPatchHint adds to a hunk not found the most similar text of the
// file (docs/edits.md, "Hints"); an ambiguous hunk has its places already.
func withPatchHint(err error, content []byte) error {
	var fe *fault.Error
	var he *patch.HunkError
	if !errors.As(err, &fe) || fe.Code != fault.CodeEditNotFound || !errors.As(err, &he) || len(he.Old) == 0 {
		return err
	}
	start, end, ok := fs.Similar(content, strings.Join(he.Old, "\n"))
	if !ok {
		return err
	}
	fe.Hint = &fault.Hint{StartLine: start + 1, EndLine: end, Lines: linesOf(content, start, end)}
	return fe
}

// linesOf are content's lines [start, end) without their endings, each
// cut to fs.HintLineMaxBytes on a character boundary.
func linesOf(content []byte, start, end int) []string {
	var out []string
	for n := 0; n < end && len(content) > 0; n++ {
		l := content
		if i := bytes.IndexByte(content, '\n'); i >= 0 {
			l, content = content[:i], content[i+1:]
		} else {
			content = nil
		}
		if n < start {
			continue
		}
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(l) > fs.HintLineMaxBytes {
			cut := fs.HintLineMaxBytes
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			l = l[:cut]
		}
		out = append(out, string(l))
	}
	return out
}

// textDiffs is the hunks between two contents (nil: absent) when both are
// text below the diff-basis limit; none otherwise.
func textDiffs(path string, before, after []byte) []render.Diff {
	b, a, ok := diffBases(before, after)
	if !ok {
		return []render.Diff{}
	}
	return render.Diffs(path, b, a)
}

// diffBases are two contents LF-normalized, when both are UTF-8 and below
// the diff-basis limit (an absent one is empty).
func diffBases(before, after []byte) (string, string, bool) {
	if len(before) >= fs.DefaultDiffBasisMaxBytes || len(after) >= fs.DefaultDiffBasisMaxBytes || !utf8.Valid(before) || !utf8.Valid(after) {
		return "", "", false
	}
	return fs.NormalizeLF(string(before)), fs.NormalizeLF(string(after)), true
}

// dryRunDiff is one file's change as a dry run shows it.
func dryRunDiff(line render.PatchFile, src, dst *patchFile) string {
	after, name := src.new, line.Path
	if src.remove {
		after = []byte{}
	}
	if dst != nil {
		after, name = dst.new, line.To
	}
	b, a, ok := diffBases(src.old, after)
	if !ok {
		return "(The diff of " + name + " is not shown: its content before or after is not UTF-8 text, or is 10 MiB or larger.)"
	}
	return render.UnifiedDiff(name, b, a)
}

// outcome is what the pipeline hears of the file: its new content to
// journal and publish (none: removed), its diffs, its texts for the
// checkers. The pipeline fills in its version and states.
func (f *patchFile) outcome() outcome {
	o := outcome{target: f.t, removed: f.remove, diffs: f.diffs, mode: f.mode}
	if f.remove {
		return o
	}
	content := f.new
	o.fill = func(w io.Writer) error { _, err := w.Write(content); return err }
	o.size = int64(len(content))
	var before *string
	if f.exists() {
		s := string(f.old)
		before = &s
	}
	after := string(content)
	o.texts = texts{held: true, before: before, after: &after}
	return o
}
