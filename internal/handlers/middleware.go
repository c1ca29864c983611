package handlers

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// recorder remembers the status and size of a response. It implements
// Flush itself because the generated streaming code asserts http.Flusher
// directly, and Unwrap for http.ResponseController (write deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func headerWritten(w http.ResponseWriter) bool {
	for {
		if r, ok := w.(*recorder); ok {
			return r.status != 0
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// AccessLogMessage is the message of the access log's records, one per
// request.
const AccessLogMessage = "request"

// accessLog writes one structured line per request: never a file's content,
// never a token.
func accessLog(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &recorder{ResponseWriter: w}
			defer func() {
				log.LogAttrs(r.Context(), slog.LevelInfo, AccessLogMessage,
					slog.String("method", r.Method),
					slog.String("path", r.URL.Path),
					slog.Int("status", rec.status),
					slog.Int64("bytes", rec.bytes),
					slog.Duration("duration", time.Since(start)),
				)
			}()
			next.ServeHTTP(rec, r)
		})
	}
}

// recoverer turns a panic into a 500 problem (or a broken transfer when the
// body had started), logging the cause. http.ErrAbortHandler passes through:
// it is how a failed stream is aborted on purpose.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic", "path", r.URL.Path, "panic", v)
				if headerWritten(w) {
					panic(http.ErrAbortHandler)
				}
				writeProblem(w, tools.CodeInternal, "internal error")
			}()
			next.ServeHTTP(w, r)
		})
	}
}
