package tools

import (
	"context"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The file operations of the extended profile (SPEC §26, docs/files.md
// "Move, delete and mkdir"). Each is a plan of the change pipeline
// (change.go): its arguments, what the policy asks of each target, and its
// provider step; the fence, the escalation, the history, the audit and the
// change feed are the pipeline's.
const (
	ToolMove   = "move"
	ToolDelete = "delete"
	ToolMkdir  = "mkdir"
)

var (
	moveParams   = render.ParamsOf(ToolMove)
	deleteParams = render.ParamsOf(ToolDelete)
	mkdirParams  = render.ParamsOf(ToolMkdir)
)

// msgOpsUnavailable: the provider cannot move, delete folders or make them.
const msgOpsUnavailable = "move, delete and mkdir are not available with this filesystem"

// ops is the provider's folder-aware operations, or a refusal.
func (x *Executor) ops() (fs.Ops, *fault.Error) {
	o, ok := x.fs.FileSystem.(fs.Ops)
	if !ok {
		return nil, fault.New(fault.CodeNoSuchEndpoint, msgOpsUnavailable)
	}
	return o, nil
}

// offersOp refuses move, delete and mkdir in the original profile, whose
// surface is the original's (SPEC §11).
func (x *Executor) offersOp(c Call, tool string) *fault.Error {
	if !x.Offers(tool) {
		return x.fail(c, tool, argError("unknown tool "+render.Quote(tool)))
	}
	return nil
}

// pathArg checks a path argument's value: non-empty, no NUL byte.
func pathArg(name, v, msg string) *fault.Error {
	if err := checkFilePath(v); err != nil {
		if err.Message == render.MsgFilePath {
			return argError(msg)
		}
		return argError(render.MsgArgNUL(name))
	}
	return nil
}

// typeOf is what path names now (TypeMissing when nothing), resolved as
// the pipeline will resolve it; an error only for a path the root
// boundary refuses, which the pipeline reports in its words.
func (x *Executor) typeOf(ctx context.Context, c Call, verb, path string) fs.FileType {
	cwd, err := x.cwdOf(ctx, c)
	if err != nil {
		return fs.TypeMissing
	}
	t, rerr := x.fs.Resolve(ctx, verb, path, cwd.Display)
	if rerr != nil {
		return fs.TypeMissing
	}
	info, serr := x.fs.Stat(ctx, t)
	if serr != nil {
		return fs.TypeMissing
	}
	return info.Type
}

// Move moves a file or a folder (SPEC §26): a file source read by the
// session and unchanged (the edit guard), a destination absent (the
// kernel's no-replace rename) or, with overwrite, a file read and
// unchanged (the write intent). A file's move is one change of the
// history (the source removed, the destination made, one seq); a
// folder's is fenced, audited and published but not in the history.
func (x *Executor) Move(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	if err := x.offersOp(c, ToolMove); err != nil {
		return Result{}, err
	}
	a, err := decodeArgs(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolMove, err)
	}
	vs := values{params: moveParams}
	if err := vs.typePass(a); err != nil {
		return Result{}, x.fail(c, ToolMove, err)
	}
	from, to, overwrite := vs.of("from").str, vs.of("to").str, vs.of("overwrite").boolean
	if err := pathArg("from", from, render.MsgFrom); err != nil {
		return Result{}, x.fail(c, ToolMove, err)
	}
	if err := pathArg("to", to, render.MsgMoveTo); err != nil {
		return Result{}, x.fail(c, ToolMove, err)
	}
	ops, err := x.ops()
	if err != nil {
		return Result{}, x.fail(c, ToolMove, err)
	}
	// A folder is no file the session reads: the policy asks nothing of it
	// (its files keep their observations by path: docs/files.md).
	asks := []ask{askEdit, askNothing}
	if overwrite {
		asks[1] = askWrite
	}
	folder := x.typeOf(ctx, c, "move", from) == fs.TypeDirectory
	if folder {
		asks = []ask{askNothing, askNothing}
	}
	ch := &change{tool: ToolMove, call: c, paths: []string{from, to}, verb: "move", asks: asks[0], asksOf: asks, esc: escalationOf(&vs), oneSeq: !folder,
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			src, dst := in.targets[0], in.targets[1]
			if src.Key == dst.Key {
				return stepOut{}, fault.New(fault.CodeInvalidArgument, `cannot move "`+src.Display+`" to itself`)
			}
			opts := fs.MoveOptions{From: in.wants[0].version(), Overwrite: overwrite, DryRun: in.dryRun,
				FromKeeper: in.keepers[0], ToKeeper: in.keepers[1]}
			if w := in.wants[1]; w != nil {
				opts.ToAbsent, opts.To = w.absent, w.version()
			}
			m, err := ops.Move(ctx, src, dst, opts)
			if err != nil {
				return stepOut{}, err
			}
			so := stepOut{files: []outcome{
				{target: src, removed: true},
				{target: dst, version: m.To, created: !m.Replaced, size: m.Size},
			}}
			if in.dryRun {
				so.files[0].removed, so.files[0].version = false, m.From
				so.shown = render.MoveShown(src.Display, dst.Display)
			}
			if m.Type == fs.TypeDirectory {
				for i := range so.files {
					so.files[i].states = &auditStates{rel: relOr(x, so.files[i].target)}
				}
				so.folder = &folderRecord{kind: checkpoint.FolderMoved, path: relOr(x, src), to: relOr(x, dst)}
			}
			return so, nil
		}}
	out, err := x.apply(ctx, ch)
	if err != nil {
		return Result{}, err
	}
	src, dst := out.files[0].target.Display, out.files[1].target.Display
	return Result{Output: render.MovedOutput(src, dst), Metadata: MoveMetadata{From: src, To: dst, Replaced: !out.files[1].created}}, nil
}

// MoveMetadata is move's metadata: both paths as the model text shows
// them, and whether an existing destination file was replaced.
type MoveMetadata struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Replaced bool   `json:"replaced"`
}

// PathMetadata is delete's metadata: the path deleted.
type PathMetadata struct {
	Path string `json:"path"`
}

// MkdirMetadata is mkdir's metadata: the folder, and whether this call
// made it (false: it existed).
type MkdirMetadata struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
}

// relOr is where t really is, relative to the root ("" when unknown).
func relOr(x *Executor, t fs.Target) string {
	rel, _ := x.fs.Rel(t)
	return rel
}

// Delete deletes a file read by the session and unchanged (the edit
// guard; recorded, so a revert recreates it with its bytes and mode), or
// an empty folder; never a folder that holds anything, never the root,
// never the private folder (SPEC §26).
func (x *Executor) DeleteTool(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	if err := x.offersOp(c, ToolDelete); err != nil {
		return Result{}, err
	}
	a, err := decodeArgs(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolDelete, err)
	}
	vs := values{params: deleteParams}
	if err := vs.typePass(a); err != nil {
		return Result{}, x.fail(c, ToolDelete, err)
	}
	path := vs.of("file_path").str
	if err := checkFilePath(path); err != nil {
		return Result{}, x.fail(c, ToolDelete, err)
	}
	ops, err := x.ops()
	if err != nil {
		return Result{}, x.fail(c, ToolDelete, err)
	}
	fsys, err := x.files()
	if err != nil {
		return Result{}, x.fail(c, ToolDelete, err)
	}
	ch := &change{tool: ToolDelete, call: c, paths: []string{path}, verb: "delete", asks: askEdit, esc: escalationOf(&vs)}
	if x.typeOf(ctx, c, "delete", path) == fs.TypeDirectory {
		ch.asks = askNothing
		ch.step = func(ctx context.Context, in stepIn) (stepOut, error) {
			t := in.targets[0]
			info, err := ops.RemoveFolder(ctx, t, fs.FolderOptions{Expect: in.wants[0].version(), DryRun: in.dryRun})
			if err != nil {
				return stepOut{}, err
			}
			o := outcome{target: t, removed: !in.dryRun, version: info.Version, states: &auditStates{rel: relOr(x, t)}}
			return stepOut{files: []outcome{o}, shown: render.DeleteShown(t.Display)}, nil
		}
	} else {
		ch.step = func(ctx context.Context, in stepIn) (stepOut, error) {
			t := in.targets[0]
			var expect fs.Version
			if v := in.wants[0].version(); v != nil {
				expect = *v
			}
			if in.dryRun {
				info, err := x.fs.Stat(ctx, t)
				switch {
				case err != nil:
					return stepOut{}, err
				case info.Type == fs.TypeMissing:
					return stepOut{}, fault.New(fault.CodeNotFound, `cannot delete "`+t.Display+`": not found`)
				case info.Type != fs.TypeFile:
					return stepOut{}, fault.New(fault.CodeNotRegularFile, `cannot delete "`+t.Display+`": not a regular file`)
				case expect != "" && info.Version != expect:
					return stepOut{}, fs.StaleError("delete", t.Display)
				}
				return stepOut{files: []outcome{{target: t, version: info.Version}}, shown: render.DeleteShown(t.Display)}, nil
			}
			if err := fsys.DeleteFile(ctx, t, expect, in.keepers[0]); err != nil {
				return stepOut{}, err
			}
			return stepOut{files: []outcome{{target: t, removed: true}}}, nil
		}
	}
	out, err := x.apply(ctx, ch)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: render.DeletedOutput(out.files[0].target.Display), Metadata: PathMetadata{Path: out.files[0].target.Display}}, nil
}

// Mkdir makes a folder and its missing parents; an existing folder is
// fine (SPEC §26). Nothing is read first: a folder holds no content to
// lose.
func (x *Executor) Mkdir(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	c = c.started()
	if err := x.offersOp(c, ToolMkdir); err != nil {
		return Result{}, err
	}
	a, err := decodeArgs(raw)
	if err != nil {
		return Result{}, x.fail(c, ToolMkdir, err)
	}
	vs := values{params: mkdirParams}
	if err := vs.typePass(a); err != nil {
		return Result{}, x.fail(c, ToolMkdir, err)
	}
	path := vs.of("path").str
	if err := pathArg("path", path, render.MsgFolderPath); err != nil {
		return Result{}, x.fail(c, ToolMkdir, err)
	}
	ops, err := x.ops()
	if err != nil {
		return Result{}, x.fail(c, ToolMkdir, err)
	}
	out, err := x.apply(ctx, &change{tool: ToolMkdir, call: c, paths: []string{path}, verb: "mkdir", esc: escalationOf(&vs),
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			t := in.targets[0]
			m, err := ops.MakeFolder(ctx, t, fs.FolderOptions{DryRun: in.dryRun})
			if err != nil {
				return stepOut{}, err
			}
			o := outcome{target: t, version: m.Version, created: len(m.Made) > 0, states: &auditStates{rel: relOr(x, t)}}
			so := stepOut{files: []outcome{o}, shown: render.MkdirShown(t.Display)}
			if len(m.Made) > 0 {
				so.folder = &folderRecord{kind: checkpoint.FolderMade, path: m.Made[0], to: relOr(x, t)}
			}
			return so, nil
		}})
	if err != nil {
		return Result{}, err
	}
	o := out.files[0]
	return Result{Output: render.CreatedFolderOutput(o.target.Display), Metadata: MkdirMetadata{Path: o.target.Display, Created: o.created}}, nil
}
