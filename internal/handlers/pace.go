package handlers

import (
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Pace is how fast an upload's body must come (--upload-min-rate,
// --upload-rate-window; docs/files.md, "Slow uploads"): MinRate bytes a
// second, counted over each Window. The zero Pace leaves the server-wide
// read timeout in place.
type Pace struct {
	MinRate int64         // bytes per second
	Window  time.Duration // at least a second (Validate)
}

// pacedBody is an upload's body on a read deadline that moves with its
// progress. The server-wide ReadTimeout would cut a steady body for taking
// long (issue 41, item 7), so this body replaces its connection's deadline:
// each window must bring MinRate×Window bytes, and the window that does
// starts the next one. A body that stalls, never starts or crawls under the
// rate is cut within one window, with BODY_TOO_SLOW. Not safe for
// concurrent use, as a request body never is.
type pacedBody struct {
	r       io.Reader
	rc      *http.ResponseController
	pace    Pace
	quota   int64 // bytes each window must bring
	owed    int64 // bytes the current window still needs
	started bool
	paced   bool // the deadline is this body's; false: the server's
}

// pacedBodyOf is r's body under pace, or the body as it is with the zero
// Pace or an empty body: net/http already watches that connection for a
// disconnect, and a deadline set now would cancel the request a window
// later.
func pacedBodyOf(w http.ResponseWriter, r *http.Request, pace Pace) io.Reader {
	if pace.MinRate <= 0 || pace.Window <= 0 || r.Body == http.NoBody {
		return r.Body
	}
	quota := math.Ceil(float64(pace.MinRate) * pace.Window.Seconds())
	return &pacedBody{r: r.Body, rc: http.NewResponseController(w), pace: pace, quota: int64(min(quota, math.MaxInt64/2))}
}

// Read reads the body. The first window starts at the first read, not when
// the request arrived: the checks before it (the precondition, the fence,
// the audit reservation) read nothing, and until then the server's read
// timeout stands.
func (b *pacedBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		// A writer that cannot move the deadline keeps the server's.
		b.paced = b.rc.SetReadDeadline(time.Now().Add(b.pace.Window)) == nil
		b.owed = b.quota
	}
	n, err := b.r.Read(p)
	switch {
	case err == nil:
		// At the end of the body (io.EOF) net/http clears the deadline
		// itself, so a body that ended is never cut while it is stored.
		if b.owed -= int64(n); b.paced && b.owed <= 0 {
			b.owed = b.quota
			if derr := b.rc.SetReadDeadline(time.Now().Add(b.pace.Window)); derr != nil {
				return n, derr
			}
		}
	case b.paced && errors.Is(err, os.ErrDeadlineExceeded):
		return n, &fault.Error{Code: fault.CodeBodyTooSlow, Err: err,
			Message: "cannot upload: the body arrived slower than " + strconv.FormatInt(b.pace.MinRate, 10) + " bytes/s over " + b.pace.Window.String()}
	}
	return n, err
}
