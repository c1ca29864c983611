package tools

import (
	"context"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/search"
)

// Glob runs the glob tool in the session cwd.
func (x *Executor) Glob(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	return x.searchCall(ctx, c, ToolGlob, raw, func(cwd fs.Target, a searchArgs) (search.Result, error) {
		return x.search.Glob(ctx, x.fs, cwd, a.pattern, a.path)
	})
}

// Grep runs the grep tool in the session cwd.
func (x *Executor) Grep(ctx context.Context, c Call, raw []byte) (Result, *fault.Error) {
	return x.searchCall(ctx, c, ToolGrep, raw, func(cwd fs.Target, a searchArgs) (search.Result, error) {
		return x.search.Grep(ctx, x.fs, cwd, a.pattern, a.path, a.include)
	})
}

func (x *Executor) searchCall(ctx context.Context, c Call, tool string, raw []byte, run func(fs.Target, searchArgs) (search.Result, error)) (Result, *fault.Error) {
	c = c.started()
	a, err := searchArgsOf(raw, tool == ToolGrep)
	if err != nil {
		return Result{}, x.fail(c, tool, err)
	}
	// Without rg the searcher still checks the arguments first (400 before
	// 500, docs/sandbox.md's order of checks), then refuses.
	if x.search == nil {
		return Result{}, x.fail(c, tool, fault.New(fault.CodeSearchFailed, tool+" could not start its search command (ripgrep launch failed)"))
	}
	cwd, err := x.cwd(ctx, c)
	if err != nil {
		return Result{}, x.fail(c, tool, err)
	}
	res, serr := run(cwd, a)
	if serr != nil {
		return Result{}, x.fail(c, tool, errorOf(serr))
	}
	x.done(c, tool, CodeOK)
	return Result{Output: res.Output, Metadata: res.Metadata}, nil
}

func (x *Executor) searchable() bool { return x.search != nil && x.search.Available() }
