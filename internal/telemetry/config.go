package telemetry

import (
	"fmt"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultServiceName is the service.name of the spans when
// OTEL_SERVICE_NAME is not set.
const DefaultServiceName = "toolfs-api"

// The OTLP protocols the exporter speaks (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf" // the default, as the specification's
	ProtocolGRPC = "grpc"
)

// Settings say whether the server traces its calls (docs/running.md,
// "Traces"). They come from the standard OpenTelemetry environment
// variables, not flags: ReadEnv reads the few the server decides on, and
// the exporter reads the rest (the endpoint's URL, headers, timeout,
// compression, certificates) from the process's environment itself. The
// zero value is off.
type Settings struct {
	// Endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT: set, the server traces; "" = off.
	Endpoint string
	// Protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL; "" = ProtocolHTTP.
	Protocol string
	// ServiceName is OTEL_SERVICE_NAME; "" = DefaultServiceName.
	ServiceName string
	// Disabled is OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: off
	// whatever Endpoint says.
	Disabled bool

	// Exporter, when set, receives the spans instead of an OTLP exporter,
	// one by one as they end (tests: the SDK's in-memory exporter). No
	// variable sets it.
	Exporter sdktrace.SpanExporter
}

// ReadEnv fills s from the OpenTelemetry variables getenv returns.
func (s *Settings) ReadEnv(getenv func(string) string) {
	s.Endpoint = first(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	s.Protocol = first(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	s.ServiceName = getenv("OTEL_SERVICE_NAME")
	s.Disabled = strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none")
}

// On reports whether the server traces its calls.
func (s Settings) On() bool {
	return !s.Disabled && (s.Endpoint != "" || s.Exporter != nil)
}

// Validate refuses a protocol the exporter does not speak, at start-up
// rather than at the first span.
func (s Settings) Validate() error {
	if !s.On() || s.Exporter != nil {
		return nil
	}
	switch s.OTLPProtocol() {
	case ProtocolHTTP, ProtocolGRPC:
		return nil
	}
	return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported: use %s (the default) or %s (docs/running.md, \"Traces\")", s.Protocol, ProtocolHTTP, ProtocolGRPC)
}

// OTLPProtocol is the protocol the exporter speaks: Protocol, else ProtocolHTTP.
func (s Settings) OTLPProtocol() string {
	if s.Protocol == "" {
		return ProtocolHTTP
	}
	return strings.TrimSpace(s.Protocol)
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
