package tools

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// The files operations (docs/files.md), as metrics label them and the
// change feed names their events. They are REST only: the model keeps its
// tools.
const (
	OpList     = "list"
	OpDownload = "download"
	OpUpload   = "upload"
	OpDelete   = "delete"
)

// Listing bounds (docs/files.md).
const (
	DefaultListMaxEntries = 10000
	DefaultMaxUploadBytes = 1 << 30
)

// FilesConfig bounds the files operations; zero values are the defaults.
type FilesConfig struct {
	ListMaxEntries int   // --list-max-entries
	MaxUploadBytes int64 // --max-upload-bytes
}

// ListRequest is GET /files: a folder below the root ("" or "/" = the
// root), a depth of 1..8, and whether .gitignore rules apply.
type ListRequest struct {
	Path      string
	Depth     int
	GitIgnore bool
}

// Precondition is what an upload or delete was sent with: If-Match's
// version ("" = none) or If-None-Match: *.
type Precondition struct {
	IfMatch     string
	IfNoneMatch bool
}

// Upload is a published upload.
type Upload struct {
	Created bool
	Version fs.Version
	Size    int64
}

// msgFilesUnavailable: the provider serves no files operations.
const msgFilesUnavailable = "the files endpoints are not available with this filesystem"

// files is the provider's files operations, or a refusal.
func (x *Executor) files() (fs.Files, *fault.Error) {
	if x.fs.files == nil {
		return nil, fault.New(fault.CodeNoSuchEndpoint, msgFilesUnavailable)
	}
	return x.fs.files, nil
}

// filesTarget resolves a files path: relative to the root whatever the
// session cwd (a leading "/" is the root itself, never the machine's "/";
// docs/files.md), with every other rule of the tools' paths.
func (x *Executor) filesTarget(ctx context.Context, op, path string) (fs.Target, *fault.Error) {
	if strings.IndexByte(path, 0) >= 0 {
		return fs.Target{}, argError("path must not contain a NUL byte")
	}
	rel := strings.TrimLeft(path, "/")
	if rel == "" {
		rel = "."
	}
	t, err := x.fs.Resolve(ctx, op, rel, "")
	if err != nil {
		return fs.Target{}, errorOf(err)
	}
	return t, nil
}

// List lists a folder (docs/files.md): depth 1..8, sorted by path, at most
// the configured entries, .gitignore rules within the provider's ignore
// bounds.
func (x *Executor) List(ctx context.Context, c Call, req ListRequest) (fs.Listing, *fault.Error) {
	c = c.started()
	fsys, err := x.files()
	if err != nil {
		return fs.Listing{}, x.fail(c, OpList, err)
	}
	if req.Depth < 1 || req.Depth > fs.ListMaxDepth {
		return fs.Listing{}, x.fail(c, OpList, argError("depth must be an integer from 1 to 8"))
	}
	t, err := x.filesTarget(ctx, "list", req.Path)
	if err != nil {
		return fs.Listing{}, x.fail(c, OpList, err)
	}
	opts := fs.ListOptions{Depth: req.Depth, MaxEntries: x.filesCfg.ListMaxEntries, GitIgnore: req.GitIgnore}
	if x.cache != nil {
		// Compiled .gitignore files are kept by version under the read
		// caches' racy rule, and not at all when those are off.
		opts.IgnoreCache, opts.IgnoreRacyWindow = true, x.cache.cfg.RacyWindow
	}
	out, lerr := fsys.List(ctx, t, opts)
	if lerr != nil {
		return fs.Listing{}, x.fail(c, OpList, errorOf(lerr))
	}
	x.done(c, OpList, CodeOK)
	return out, nil
}

// Download opens a regular file for a download. The caller sends and
// closes it. Nothing is recorded for the session: a person's download is
// no read by the model.
func (x *Executor) Download(ctx context.Context, c Call, path string) (*os.File, fs.Info, *fault.Error) {
	c = c.started()
	fsys, err := x.files()
	if err != nil {
		return nil, fs.Info{}, x.fail(c, OpDownload, err)
	}
	t, err := x.filesTarget(ctx, "download", path)
	if err != nil {
		return nil, fs.Info{}, x.fail(c, OpDownload, err)
	}
	f, info, oerr := fsys.OpenFile(ctx, t)
	if oerr != nil {
		return nil, fs.Info{}, x.fail(c, OpDownload, errorOf(oerr))
	}
	if c.Span != nil {
		c.Span.Read(info.Size)
	}
	x.done(c, OpDownload, CodeOK)
	return f, info, nil
}

// Upload stores body as a file's whole content under pre (docs/files.md):
// a change of one file, whose step is the provider's PutFile, so it is
// fenced as a write is (docs/sandbox.md; a files call has no escalation,
// so a fenced upload is refused), recorded in the history of the session
// the call names, audited and published on the change feed. The
// no-blind-overwrite precondition is its guard: it records nothing for any
// session's observations, so a session that read the file before must
// read it again before it writes or edits.
func (x *Executor) Upload(ctx context.Context, c Call, path string, body io.Reader, pre Precondition) (Upload, *fault.Error) {
	c = c.started()
	fsys, err := x.files()
	if err != nil {
		return Upload{}, x.fail(c, OpUpload, err)
	}
	var up Upload
	_, err = x.apply(ctx, &change{tool: OpUpload, call: c, paths: []string{path}, from: fromRoot, verb: "upload",
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			t := in.targets[0]
			out, err := fsys.PutFile(ctx, t, body, fs.PutOptions{IfMatch: fs.Version(pre.IfMatch), IfNoneMatch: pre.IfNoneMatch,
				MaxBytes: x.filesCfg.MaxUploadBytes, Keeper: in.keepers[0]})
			if err != nil {
				return stepOut{}, err
			}
			up = Upload{Created: out.Created, Version: out.Version, Size: out.Size}
			return stepOut{files: []outcome{{target: t, version: out.Version, size: out.Size, created: out.Created}}}, nil
		}})
	if err != nil {
		return Upload{}, err
	}
	return up, nil
}

// Delete removes a file (never a folder) at the version If-Match names: a
// change of one file, whose step is the provider's DeleteFile, under the
// same lines as an upload.
func (x *Executor) Delete(ctx context.Context, c Call, path string, pre Precondition) *fault.Error {
	c = c.started()
	if pre.IfMatch == "" {
		return x.fail(c, OpDelete, fault.New(fault.CodePreconditionRequired, "a delete needs If-Match with the file's ETag"))
	}
	fsys, err := x.files()
	if err != nil {
		return x.fail(c, OpDelete, err)
	}
	_, err = x.apply(ctx, &change{tool: OpDelete, call: c, paths: []string{path}, from: fromRoot, verb: "delete",
		step: func(ctx context.Context, in stepIn) (stepOut, error) {
			t := in.targets[0]
			if err := fsys.DeleteFile(ctx, t, fs.Version(pre.IfMatch), in.keepers[0]); err != nil {
				return stepOut{}, err
			}
			return stepOut{files: []outcome{{target: t, removed: true}}}, nil
		}})
	return err
}

// MaxUploadBytes is the bound of an upload's body (--max-upload-bytes), so
// a transport can refuse a declared Content-Length before reading.
func (x *Executor) MaxUploadBytes() int64 { return x.filesCfg.MaxUploadBytes }
