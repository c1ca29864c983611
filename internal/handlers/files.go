package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolfs/toolfs-api/api"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// filesCall resolves a files request's session and cwd (the fence of
// uploads and deletes) into a tools.Call, as toolCall does for a tool. An
// upload or delete is a change of its session, as a tool call's: its
// headers, else --default-session, whose history records it
// (docs/files.md); a listing or download touches only a session its
// headers name, so a file browser does not keep the default session alive.
func (s *rest) filesCall(next http.Handler) http.Handler {
	change, read := s.callWith(s.sessions.tool, false, next), s.callWith(s.sessions.named, false, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut || r.Method == http.MethodDelete {
			change.ServeHTTP(w, r)
			return
		}
		read.ServeHTTP(w, r)
	})
}

// filePath hands the generated binding the path after /files/ as chi
// would give a {path} that may hold slashes: escaped when the request's
// path was (the binding unescapes it once).
func filePath(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rctx := chi.RouteContext(r.Context())
		rctx.URLParams.Add("path", chi.URLParam(r, "*"))
		h(w, r)
	}
}

// filesParamError refuses a malformed /files parameter.
func filesParamError(w http.ResponseWriter, _ *http.Request, err error) {
	var pe *api.InvalidParamFormatError
	if errors.As(err, &pe) && pe.ParamName == "depth" {
		writeProblem(w, fault.CodeInvalidArgument, "depth must be an integer from 1 to 8")
		return
	}
	var rp *api.RequiredParamError
	if errors.As(err, &rp) || errors.As(err, &pe) && pe.ParamName == "path" {
		writeProblem(w, fault.CodeInvalidArgument, "name a file after /files/, its path relative to the workspace root, each segment percent-encoded")
		return
	}
	writeProblem(w, fault.CodeInvalidArgument, "malformed parameter: "+firstLine(err.Error()))
}

// writeFilesError is writeError for the files routes: a failed If-Match is
// HTTP's 412, with the code FS_STALE_VERSION the tools answer 409 with
// (docs/files.md, docs/api.md "Errors").
func writeFilesError(w http.ResponseWriter, err *fault.Error) {
	if err.Code != fault.CodeStaleVersion {
		writeError(w, err)
		return
	}
	p := newProblem(err)
	p.Status, p.Title = http.StatusPreconditionFailed, http.StatusText(http.StatusPreconditionFailed)
	writeJSON(w, p.Status, "application/problem+json", p)
}

// fileEntry is one listed entry on the wire (schema FileEntry).
type fileEntry struct {
	Path    string `json:"path"`
	Type    string `json:"type"`
	Size    int64  `json:"size"`
	Mtime   string `json:"mtime"`
	Version string `json:"version,omitempty"`
}

// fileListing is a listing on the wire (schema FileListing).
type fileListing struct {
	Entries       []fileEntry `json:"entries"`
	Truncated     bool        `json:"truncated"`
	TruncatedBy   string      `json:"truncated_by,omitempty"`
	IgnoreSkipped []string    `json:"ignore_skipped,omitempty"`
}

// ListFiles serves GET /files.
func (s *rest) ListFiles(w http.ResponseWriter, r *http.Request, p api.ListFilesParams) {
	req := tools.ListRequest{Depth: 1}
	if p.Path != nil {
		req.Path = *p.Path
	}
	if p.Depth != nil {
		req.Depth = *p.Depth
	}
	if p.Ignore != nil {
		if *p.Ignore != "git" {
			writeProblem(w, fault.CodeInvalidArgument, `ignore must be "git" (or absent)`)
			return
		}
		req.GitIgnore = true
	}
	out, err := s.x.List(r.Context(), callOf(r.Context()), req)
	if err != nil {
		writeError(w, err)
		return
	}
	body := fileListing{Entries: make([]fileEntry, len(out.Entries)), Truncated: out.Truncated, TruncatedBy: string(out.TruncatedBy), IgnoreSkipped: out.IgnoreSkipped}
	for i, e := range out.Entries {
		body.Entries[i] = fileEntry{Path: e.Path, Type: string(e.Type), Size: e.Size, Mtime: e.Modified.UTC().Format(time.RFC3339Nano), Version: string(e.Version)}
	}
	writeJSON(w, http.StatusOK, "application/json", body)
}

// DownloadFile serves GET /files/<path> through http.ServeContent over the
// open *os.File: conditional requests, a single range, and sendfile(2)
// (the access log's recorder passes ReadFrom on). The ETag is the version
// of the descriptor being sent.
func (s *rest) DownloadFile(w http.ResponseWriter, r *http.Request, path string) {
	f, info, err := s.x.Download(r.Context(), callOf(r.Context()), path)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	fi, serr := f.Stat()
	if serr != nil {
		writeError(w, &fault.Error{Code: fault.CodeIO, Message: "cannot download: i/o error", Err: serr})
		return
	}
	h := w.Header()
	h.Set("ETag", etagOf(info.Version))
	// A downloaded page must not run as the API's origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	if strings.Contains(r.Header.Get("Range"), ",") {
		r.Header.Del("Range") // several ranges: the whole file (docs/files.md)
	}
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// UploadFile serves PUT /files/<path>: the body is streamed by the
// provider, never read here (no --max-body-bytes: --max-upload-bytes), on
// a deadline that moves with its progress (pace.go).
func (s *rest) UploadFile(w http.ResponseWriter, r *http.Request, path string) {
	pre, perr := preconditionOf(r, true)
	if perr != nil {
		writeError(w, perr)
		return
	}
	if limit := s.x.MaxUploadBytes(); r.ContentLength > limit {
		writeError(w, fault.New(fault.CodeBodyTooLarge, "cannot upload: the body is larger than the "+strconv.FormatInt(limit, 10)+"-byte limit"))
		return
	}
	out, err := s.x.Upload(r.Context(), callOf(r.Context()), path, pacedBodyOf(w, r, s.cfg.UploadPace), pre)
	if err != nil {
		writeFilesError(w, err)
		return
	}
	w.Header().Set("ETag", etagOf(out.Version))
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, "application/json", api.FileUpload{Path: strings.TrimLeft(path, "/"), Version: string(out.Version), Size: out.Size})
}

// DeleteFile serves DELETE /files/<path>.
func (s *rest) DeleteFile(w http.ResponseWriter, r *http.Request, path string) {
	pre, perr := preconditionOf(r, false)
	if perr != nil {
		writeError(w, perr)
		return
	}
	if err := s.x.Delete(r.Context(), callOf(r.Context()), path, pre); err != nil {
		writeFilesError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// etagOf is a version as a strong entity tag.
func etagOf[V ~string](v V) string { return `"` + string(v) + `"` }

// preconditionOf reads If-Match (one strong entity tag: a version) and,
// for an upload, If-None-Match (only "*"). A weak tag never matches
// (strong comparison, RFC 9110 §13.1.1), so it is sent on as a version no
// file has and fails as a stale one; "*" in If-Match would be a blind
// overwrite, so it counts as no precondition.
func preconditionOf(r *http.Request, upload bool) (tools.Precondition, *fault.Error) {
	var pre tools.Precondition
	if vs := r.Header.Values("If-Match"); len(vs) > 0 {
		v := strings.TrimSpace(strings.Join(vs, ","))
		switch {
		case v == "*":
		case strings.Contains(v, ","):
			return pre, fault.New(fault.CodeInvalidArgument, "If-Match must hold one entity tag: the file's ETag")
		case strings.HasPrefix(v, "W/"):
			pre.IfMatch = "weak:" + v
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			pre.IfMatch = v[1 : len(v)-1]
		default:
			return pre, fault.New(fault.CodeInvalidArgument, `malformed If-Match: send the file's ETag as given, quotes included`)
		}
		if pre.IfMatch == "" && v != "*" {
			return pre, fault.New(fault.CodeInvalidArgument, `malformed If-Match: send the file's ETag as given, quotes included`)
		}
	}
	if vs := r.Header.Values("If-None-Match"); upload && len(vs) > 0 {
		if strings.TrimSpace(strings.Join(vs, ",")) != "*" {
			return pre, fault.New(fault.CodeInvalidArgument, "If-None-Match on an upload must be *")
		}
		if pre.IfMatch != "" {
			return pre, fault.New(fault.CodeInvalidArgument, "send If-Match or If-None-Match, not both")
		}
		pre.IfNoneMatch = true
	}
	return pre, nil
}
