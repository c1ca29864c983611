package handlers

import (
	"strconv"
	"time"
)

// AccessLine is one request's access log record: the attributes of the
// line accessLog writes, in their order (docs/running.md).
type AccessLine struct {
	Time               time.Time
	Method, Path       string
	Status             int
	Bytes              int64
	Duration           time.Duration
	RequestID, TraceID string // TraceID "" for none
}

// AccessWriter is a log handler that writes an access line itself, the
// bytes slog's own handler would write, without building a slog.Record
// (cmd/toolfs-api's logger: the access log was ~4% of a cached read's
// server CPU, docs/performance.md "Reads at their floor"). WriteAccess
// reports false when it did not write the line; accessLog then logs it
// through slog as before.
type AccessWriter interface {
	WriteAccess(l *AccessLine) bool
}

// AppendAccessLine appends l as slog.NewTextHandler (json false) or
// slog.NewJSONHandler (json true) with default options writes the record
// accessLog logs, and reports true; it reports false, having appended
// nothing, when a string needs slog's quoting or escaping (a byte outside
// printable ASCII, a space, '"', '\\' or '='), or is empty, or the year
// is outside 0-9999: such lines go through slog itself. TestAccessLineIsSlogs
// holds it to slog's bytes.
func AppendAccessLine(dst []byte, l *AccessLine, json bool) ([]byte, bool) {
	if y := l.Time.Year(); y < 0 || y >= 10000 ||
		!plain(l.Method) || !plain(l.Path) || !plain(l.RequestID) || l.TraceID != "" && !plain(l.TraceID) {
		return dst, false
	}
	t := l.Time.Round(0)
	if json {
		dst = append(dst, `{"time":"`...)
		dst = t.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, `","level":"INFO","msg":"`+AccessLogMessage+`","method":"`...)
		dst = append(dst, l.Method...)
		dst = append(dst, `","path":"`...)
		dst = append(dst, l.Path...)
		dst = append(dst, `","status":`...)
		dst = strconv.AppendInt(dst, int64(l.Status), 10)
		dst = append(dst, `,"bytes":`...)
		dst = strconv.AppendInt(dst, l.Bytes, 10)
		dst = append(dst, `,"duration":`...)
		dst = strconv.AppendInt(dst, int64(l.Duration), 10)
		dst = append(dst, `,"request_id":"`...)
		dst = append(dst, l.RequestID...)
		if l.TraceID != "" {
			dst = append(dst, `","trace_id":"`...)
			dst = append(dst, l.TraceID...)
		}
		return append(dst, "\"}\n"...), true
	}
	dst = append(dst, "time="...)
	dst = appendRFC3339Millis(dst, t)
	dst = append(dst, " level=INFO msg="+AccessLogMessage+" method="...)
	dst = append(dst, l.Method...)
	dst = append(dst, " path="...)
	dst = append(dst, l.Path...)
	dst = append(dst, " status="...)
	dst = strconv.AppendInt(dst, int64(l.Status), 10)
	dst = append(dst, " bytes="...)
	dst = strconv.AppendInt(dst, l.Bytes, 10)
	dst = append(dst, " duration="...)
	dst = append(dst, l.Duration.String()...)
	dst = append(dst, " request_id="...)
	dst = append(dst, l.RequestID...)
	if l.TraceID != "" {
		dst = append(dst, " trace_id="...)
		dst = append(dst, l.TraceID...)
	}
	return append(dst, '\n'), true
}

// plain reports whether s is written as is by both of slog's handlers:
// not empty, printable ASCII without space, '"', '\\' or '='.
func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b >= 0x7f || b == '"' || b == '\\' || b == '=' {
			return false
		}
	}
	return true
}

// appendRFC3339Millis is log/slog's: RFC 3339 with exactly three digits
// of milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}
