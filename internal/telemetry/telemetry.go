// Package telemetry is the server's OpenTelemetry traces (docs/running.md,
// "Traces"): one span per tool call, a child of the caller's W3C
// traceparent, exported over OTLP when the standard variables ask for it.
// Off, the server makes no tracer, no exporter and no goroutine: a nil
// *Tracing starts nil spans, and every method of a nil *Span does nothing.
package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// The span's name and attributes: the contract an operator's queries and
// dashboards rely on (docs/running.md, "Traces"; TestSpanAttributes pins
// them). Never a path, a file's content, an argument or a raw session id.
const (
	// SpanPrefix + the tool's name is a span's name ("toolfs.write"); a
	// call that ended before the executor named its tool is SpanUnnamed.
	SpanPrefix  = "toolfs."
	SpanUnnamed = "toolfs.call"

	AttrTool         = "toolfs.tool"          // the tool or files operation
	AttrTransport    = "toolfs.transport"     // rest (REST, /model, /files) or mcp (/mcp and --stdio)
	AttrCode         = "toolfs.code"          // the answer's stable code (internal/fault), CodeOK on success
	AttrSession      = "toolfs.session"       // the session's digest (SessionDigest), only with a session
	AttrBytesRead    = "toolfs.bytes_read"    // the file bytes the answer carries
	AttrBytesWritten = "toolfs.bytes_written" // the new contents' bytes a change wrote
	AttrHTTPStatus   = "http.response.status_code"
)

// CodeOK is the code attribute of a call that succeeded.
const CodeOK = "OK"

// scope is the instrumentation scope's name: the package that makes the
// spans.
const scope = "github.com/toolfs/toolfs-api/internal/telemetry"

// shutdownWait bounds the flush of the spans still queued at shutdown.
const shutdownWait = 5 * time.Second

// Tracing makes the span of each tool call. A nil *Tracing is off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// New returns the tracing s asks for, nil when s is off. version is the
// resource's service.version. The exporter's failures (a collector that
// cannot be reached) are logged to log, never returned to a caller: a
// trace is never worth a failed call.
func New(s Settings, version string, log *slog.Logger) (*Tracing, error) {
	if !s.On() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	ctx := context.Background()
	// Later detectors win: OTEL_RESOURCE_ATTRIBUTES over the default name,
	// OTEL_SERVICE_NAME and the build's version over both.
	opts := []resource.Option{
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.version", version)),
	}
	if s.ServiceName != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", s.ServiceName)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("traces: resource: %w", err)
	}
	var process sdktrace.TracerProviderOption
	if s.Exporter != nil {
		process = sdktrace.WithSyncer(s.Exporter)
	} else {
		var exp sdktrace.SpanExporter
		if s.OTLPProtocol() == ProtocolGRPC {
			exp, err = otlptracegrpc.New(ctx)
		} else {
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("traces: OTLP exporter: %w", err)
		}
		// The batch's size and delay: OTEL_BSP_* (read by the SDK).
		process = sdktrace.WithBatcher(exp)
	}
	if log != nil {
		// Process-wide in the SDK: the exporter reports through it.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("traces: cannot export spans", "err", err)
		}))
	}
	// The sampler: OTEL_TRACES_SAMPLER (read by the SDK); by default every
	// root span and every child of a sampled caller.
	tp := sdktrace.NewTracerProvider(process, sdktrace.WithResource(res))
	return &Tracing{provider: tp, tracer: tp.Tracer(scope)}, nil
}

// Shutdown exports the spans still queued, waiting at most 5 s, and stops
// the exporter. A nil t has nothing to do.
func (t *Tracing) Shutdown() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	return t.provider.Shutdown(ctx)
}

// Start begins the span of one call a transport received at start, a child
// of the caller's traceparent (with its tracestate) when that is valid,
// else the root of a new trace. A nil t returns ctx and a nil span.
func (t *Tracing) Start(ctx context.Context, transport, traceparent, tracestate string, start time.Time) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String(AttrTransport, transport)),
	}
	parent := trace.SpanContext{}
	if traceparent != "" {
		carrier := propagation.MapCarrier{"traceparent": traceparent}
		if tracestate != "" {
			carrier["tracestate"] = tracestate
		}
		parent = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, s := t.tracer.Start(ctx, SpanUnnamed, opts...)
	return ctx, &Span{s: s}
}

// Span is the span of one tool call, told its outcome by the executor and
// ended by the transport. A nil *Span is a call not traced: its methods do
// nothing. Its methods are called from the call's goroutine.
type Span struct {
	s              trace.Span
	read, written  int64
	tool           string
	code           fault.Code
	sessionDigest  string
	sessionOfThese string // the session key sessionDigest digests
}

// TraceID is the span's trace id as lowercase hex (the caller's, when it
// sent a valid traceparent), "" for a nil s.
func (s *Span) TraceID() string {
	if s == nil {
		return ""
	}
	return s.s.SpanContext().TraceID().String()
}

// Outcome is the call's tool, the code of its failure ("" when it
// succeeded) and the key of its session ("" for none; its digest is what
// the span holds). The last outcome told wins.
func (s *Span) Outcome(tool string, failure fault.Code, session string) {
	if s == nil {
		return
	}
	s.tool, s.code = tool, failure
	if failure == "" {
		s.code = CodeOK
	}
	if session != s.sessionOfThese {
		s.sessionOfThese, s.sessionDigest = session, SessionDigest(session)
	}
}

// Read adds n bytes of file content the answer carries.
func (s *Span) Read(n int64) {
	if s != nil {
		s.read += n
	}
}

// Wrote adds n bytes of new contents a change wrote.
func (s *Span) Wrote(n int64) {
	if s != nil {
		s.written += n
	}
}

// End ends the span with what it was told and, over HTTP, the answer's
// status (0: none, as an MCP call's, which shares its HTTP request with
// other messages). A call that failed has the status Error with its code
// as the description: never the message, which may name a path.
func (s *Span) End(status int) {
	if s == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	if s.tool != "" {
		s.s.SetName(SpanPrefix + s.tool)
		attrs = append(attrs, attribute.String(AttrTool, s.tool))
	}
	if s.code != "" {
		attrs = append(attrs, attribute.String(AttrCode, string(s.code)))
	}
	if s.sessionDigest != "" {
		attrs = append(attrs, attribute.String(AttrSession, s.sessionDigest))
	}
	if s.read > 0 {
		attrs = append(attrs, attribute.Int64(AttrBytesRead, s.read))
	}
	if s.written > 0 {
		attrs = append(attrs, attribute.Int64(AttrBytesWritten, s.written))
	}
	if status > 0 {
		attrs = append(attrs, attribute.Int(AttrHTTPStatus, status))
	}
	s.s.SetAttributes(attrs...)
	switch {
	case s.code != "" && s.code != CodeOK:
		s.s.SetStatus(codes.Error, string(s.code))
	case s.code == "" && status >= 400:
		s.s.SetStatus(codes.Error, fmt.Sprintf("HTTP %d", status))
	}
	s.s.End()
}

// SessionDigest is what a span holds of a session's key: the first 16
// bytes of its SHA-256 as hex, the name of the session's history log in
// the root's private folder (docs/checkpoints.md), so an operator can
// find the session without the span holding its id; "" for none.
func SessionDigest(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}
