package events

import (
	"net/http"
	"strconv"
	"time"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// retryMillis is the reconnection delay suggested to EventSource clients.
const retryMillis = 2000

// ProblemWriter writes a refused request's problem body (RFC 9457, with a
// stable code). The REST router passes its one problem writer.
type ProblemWriter func(w http.ResponseWriter, code fault.Code, message string)

// Handler serves GET /events as server-sent events (docs/events.md): the
// backlog or reset of a resume, then every matching event as it is
// published, a heartbeat comment on an idle stream, and a reset followed by
// the end of the stream when the subscriber fell behind. Each event is
// flushed as it is written (X-Accel-Buffering: no keeps nginx from holding
// it). The stream ends when the client goes away, a write stalls past
// Config.WriteTimeout, or the hub closes. Refusals are written by problem
// (the REST router's one problem writer). viewer tells who subscribes: the
// request's verified subject and whether it sees every subject's events
// (Filter.Subject, Filter.All); nil: nobody in particular, as without
// identities.
func (h *Hub) Handler(problem ProblemWriter, viewer func(*http.Request) (subject string, all bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, problem, viewer) })
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request, problem ProblemWriter, viewer func(*http.Request) (string, bool)) {
	q := r.URL.Query()
	f, err := NewFilter(q["session"], q["path"])
	if err != nil {
		problem(w, fault.CodeInvalidArgument, err.Error())
		return
	}
	if viewer != nil {
		f.Subject, f.All = viewer(r)
	}
	sub, err := h.Subscribe(f, r.Header.Get("Last-Event-ID"))
	if err != nil {
		w.Header().Set("Retry-After", "5")
		problem(w, fault.CodeTooManySubscribers, "too many event subscribers (at most "+strconv.Itoa(h.cfg.MaxSubscribers)+"): close another stream or retry later")
		return
	}
	defer sub.Close()

	rc := http.NewResponseController(w)
	// The server's read timeout would otherwise end a long stream.
	_ = rc.SetReadDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	s := stream{h: h, w: w, rc: rc}
	if !s.send(func(b []byte) []byte { return append(b, "retry: "+strconv.Itoa(retryMillis)+"\n\n"...) }) {
		return
	}
	if sub.reset && !s.event(h.resetRecord(sub.startID)) {
		return
	}
	for _, rec := range sub.backlog {
		if !s.event(rec) {
			return
		}
	}
	sub.backlog = nil

	beat := time.NewTicker(h.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-sub.dropped:
			s.event(h.resetRecord(h.latest()))
			return
		default:
		}
		select {
		case rec := <-sub.queue:
			sub.taken(rec)
			if h.shared != nil && !sub.skip.less(rec.pos) {
				continue
			}
			if !s.event(rec) {
				return
			}
		case <-sub.dropped:
			s.event(h.resetRecord(h.latest()))
			return
		case <-beat.C:
			if !s.send(func(b []byte) []byte { return append(b, ": heartbeat\n\n"...) }) {
				return
			}
		case <-sub.closed:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// stream writes SSE frames to one response, each flushed and under a write
// deadline.
type stream struct {
	h   *Hub
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
}

// event writes one record as "id:" and "data:" lines. There is no "event:"
// line: the type is in the JSON, so EventSource's onmessage sees every event.
func (s *stream) event(r *record) bool {
	return s.send(func(b []byte) []byte {
		b = append(b, "id: "...)
		b = append(b, r.id...)
		b = append(b, "\ndata: "...)
		b = append(b, r.data...) // JSON has no raw newline
		return append(b, "\n\n"...)
	})
}

func (s *stream) send(frame func([]byte) []byte) bool {
	s.buf = frame(s.buf[:0])
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.h.cfg.WriteTimeout))
	if _, err := s.w.Write(s.buf); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}
