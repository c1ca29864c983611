package tools

import (
	"context"
	"path/filepath"

	"github.com/toolfs/toolfs-api/internal/diagnostics"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// diagnose runs the --diagnostics checkers after a successful write or
// edit (not a dry run), in the extended profile only: the original
// profile's texts never change (docs/diagnostics.md). before and after are
// the versions' exact bytes; before is nil for a create, and either is nil
// when the provider did not hold them (the file at or above its diff-basis
// limit), which the checkers then report instead of running. It returns
// what the answer's text gains ("" for nothing) and the metadata's
// diagnostics member (nil: absent).
func (x *Executor) diagnose(ctx context.Context, t fs.Target, created bool, before, after *string) (string, any) {
	if x.diagnostics == nil || x.profile == render.ProfileOriginal {
		return "", nil
	}
	rel, ok := x.fs.Rel(t)
	if !ok {
		return "", nil
	}
	// The checkers take the file's real path (docs/diagnostics.md): where
	// the provider says it is.
	ch := diagnostics.Change{Path: filepath.Join(x.fs.RealRoot(), rel), Created: created}
	switch {
	case after == nil || !created && before == nil: // at or above the provider's diff-basis limit
		ch.Unchecked = diagnostics.ReasonTooLarge
	default:
		ch.After = []byte(*after)
		if before != nil {
			ch.Before = []byte(*before)
		}
	}
	rep := x.diagnostics.Check(ctx, ch)
	return rep.Text(), rep.Metadata()
}
