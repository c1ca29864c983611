package handlers_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/handlers"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// slogLine is the access line as slog's own handler writes the record
// accessLog logs through slog.
func slogLine(t testing.TB, l handlers.AccessLine, json bool) string {
	var buf bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&buf, nil)
	if json {
		h = slog.NewJSONHandler(&buf, nil)
	}
	r := slog.NewRecord(l.Time, slog.LevelInfo, handlers.AccessLogMessage, 0)
	r.AddAttrs(slog.String("method", l.Method), slog.String("path", l.Path), slog.Int("status", l.Status),
		slog.Int64("bytes", l.Bytes), slog.Duration("duration", l.Duration), slog.String("request_id", l.RequestID))
	if l.TraceID != "" {
		r.AddAttrs(slog.String("trace_id", l.TraceID))
	}
	require.NoError(t, h.Handle(context.Background(), r))
	return buf.String()
}

// TestAccessLineIsSlogs: the hand-written access line is byte for byte
// slog's, in both formats, and anything slog would quote or escape is left
// to slog.
func TestAccessLineIsSlogs(t *testing.T) {
	utc := time.Date(2026, 12, 7, 18, 55, 26, 123456789, time.UTC)
	paris := time.FixedZone("CET", 3600)
	base := handlers.AccessLine{Time: utc, Method: "POST", Path: "/tools/read", Status: 200, Bytes: 156962,
		Duration: 1234567 * time.Nanosecond, RequestID: "8f3a9c1d2e4b5a60-17"}
	with := func(f func(*handlers.AccessLine)) handlers.AccessLine { l := base; f(&l); return l }
	cases := []struct {
		name  string
		line  handlers.AccessLine
		plain bool // written by hand; else left to slog
	}{
		{"a read", base, true},
		{"a trace", with(func(l *handlers.AccessLine) { l.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736" }), true},
		{"whole milliseconds", with(func(l *handlers.AccessLine) { l.Time = utc.Truncate(time.Second) }), true},
		{"another zone", with(func(l *handlers.AccessLine) { l.Time = utc.In(paris) }), true},
		{"microseconds", with(func(l *handlers.AccessLine) { l.Duration = 57 * time.Microsecond }), true},
		{"zero duration, no status yet", with(func(l *handlers.AccessLine) { l.Duration, l.Status, l.Bytes = 0, 0, 0 }), true},
		{"minutes", with(func(l *handlers.AccessLine) { l.Duration = 2*time.Minute + 3*time.Millisecond }), true},
		{"query-like path", with(func(l *handlers.AccessLine) { l.Path = "/files/a%20b/c.go;x,y@z<>&'" }), true},
		{"a space", with(func(l *handlers.AccessLine) { l.Path = "/files/a b" }), false},
		{"an equals sign", with(func(l *handlers.AccessLine) { l.Path = "/files/a=b" }), false},
		{"a quote", with(func(l *handlers.AccessLine) { l.Path = `/files/a"b` }), false},
		{"a backslash", with(func(l *handlers.AccessLine) { l.Path = `/files/a\b` }), false},
		{"a control byte", with(func(l *handlers.AccessLine) { l.Path = "/files/a\x01b" }), false},
		{"DEL", with(func(l *handlers.AccessLine) { l.Path = "/files/a\x7fb" }), false},
		{"UTF-8", with(func(l *handlers.AccessLine) { l.Path = "/files/é" }), false},
		{"invalid UTF-8", with(func(l *handlers.AccessLine) { l.Path = "/files/\xff" }), false},
		{"U+2028", with(func(l *handlers.AccessLine) { l.Path = "/files/\u2028" }), false},
		{"empty path", with(func(l *handlers.AccessLine) { l.Path = "" }), false},
		{"other method", with(func(l *handlers.AccessLine) { l.Method = "PROP FIND" }), false},
		{"odd trace", with(func(l *handlers.AccessLine) { l.TraceID = "a b" }), false},
		{"year 10000", with(func(l *handlers.AccessLine) { l.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), false},
	}
	for _, c := range cases {
		for _, json := range []bool{false, true} {
			got, ok := handlers.AppendAccessLine([]byte("kept:"), &c.line, json)
			assert.Equal(t, c.plain, ok, "%s (json %v)", c.name, json)
			if !ok {
				assert.Equal(t, "kept:", string(got), "%s (json %v): nothing appended", c.name, json)
				continue
			}
			assert.Equal(t, "kept:"+slogLine(t, c.line, json), string(got), "%s (json %v)", c.name, json)
		}
	}
	// The line of the table's first case, literally.
	got, _ := handlers.AppendAccessLine(nil, &cases[1].line, false)
	assert.Equal(t, "time=2026-12-07T18:55:26.123Z level=INFO msg=request method=POST path=/tools/read status=200 bytes=156962 duration=1.234567ms request_id=8f3a9c1d2e4b5a60-17 trace_id=4bf92f3577b34da6a3ce929d0e0e4736\n", string(got))
	got, _ = handlers.AppendAccessLine(nil, &cases[1].line, true)
	assert.Equal(t, `{"time":"2026-12-07T18:55:26.123456789Z","level":"INFO","msg":"request","method":"POST","path":"/tools/read","status":200,"bytes":156962,"duration":1234567,"request_id":"8f3a9c1d2e4b5a60-17","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`+"\n", string(got))
}

// FuzzAccessLine: whatever the strings, a line written by hand is slog's.
func FuzzAccessLine(f *testing.F) {
	f.Add("POST", "/tools/read", "r-1", "", int64(1234567), int64(1765133726123456789))
	f.Add("GET", "/files/a b", "r=2", "4bf92f35", int64(-5), int64(0))
	f.Fuzz(func(t *testing.T, method, path, id, trace string, d, unixNano int64) {
		l := handlers.AccessLine{Time: time.Unix(0, unixNano), Method: method, Path: path, Status: 200, Bytes: 42,
			Duration: time.Duration(d), RequestID: id, TraceID: trace}
		for _, json := range []bool{false, true} {
			if got, ok := handlers.AppendAccessLine(nil, &l, json); ok {
				if want := slogLine(t, l, json); string(got) != want {
					t.Fatalf("json %v:\n got %q\nwant %q", json, got, want)
				}
			}
		}
	})
}

// TestRequestIDHeaderIsCanonical: accessLog reads and sets the request id
// by the header map's key, which must be the canonical name.
func TestRequestIDHeaderIsCanonical(t *testing.T) {
	assert.Equal(t, http.CanonicalHeaderKey(tools.RequestIDHeader), tools.RequestIDHeader)
}

// BenchmarkAccessLine: one access line through slog, as accessLog logged
// it before (the baseline), and written by hand (AppendAccessLine), each
// into io.Discard.
func BenchmarkAccessLine(b *testing.B) {
	l := handlers.AccessLine{Method: "POST", Path: "/tools/read", Status: 200, Bytes: 156962,
		Duration: 1234567 * time.Nanosecond, RequestID: "8f3a9c1d2e4b5a60-17"}
	for _, json := range []bool{false, true} {
		format := map[bool]string{false: "text", true: "json"}[json]
		b.Run("slog/"+format, func(b *testing.B) {
			var h slog.Handler = slog.NewTextHandler(io.Discard, nil)
			if json {
				h = slog.NewJSONHandler(io.Discard, nil)
			}
			log := slog.New(h)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				attrs := []slog.Attr{
					slog.String("method", l.Method), slog.String("path", l.Path), slog.Int("status", l.Status),
					slog.Int64("bytes", l.Bytes), slog.Duration("duration", time.Since(start)), slog.String("request_id", l.RequestID),
				}
				log.LogAttrs(ctx, slog.LevelInfo, handlers.AccessLogMessage, attrs...)
			}
		})
		b.Run("hand/"+format, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				now := time.Now()
				l.Time, l.Duration = now, now.Sub(start)
				var ok bool
				if buf, ok = handlers.AppendAccessLine(buf[:0], &l, json); ok {
					io.Discard.Write(buf)
				}
			}
		})
	}
}
