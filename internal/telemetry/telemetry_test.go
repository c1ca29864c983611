package telemetry_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/telemetry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestSettingsFromEnv: the standard variables turn the traces on and
// choose the protocol and the service's name; the traces' own variables
// win over the general ones; OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none
// turn them off.
func TestSettingsFromEnv(t *testing.T) {
	for name, c := range map[string]struct {
		env  map[string]string
		want telemetry.Settings
		on   bool
	}{
		"nothing":  {map[string]string{}, telemetry.Settings{}, false},
		"endpoint": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, telemetry.Settings{Endpoint: "http://c:4318"}, true},
		"traces endpoint wins": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "fs-1"},
			telemetry.Settings{Endpoint: "http://t:4318/v1/traces", Protocol: "grpc", ServiceName: "fs-1"}, true},
		"sdk disabled":  {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, telemetry.Settings{Endpoint: "http://c:4318", Disabled: true}, false},
		"exporter none": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, telemetry.Settings{Endpoint: "http://c:4318", Disabled: true}, false},
	} {
		t.Run(name, func(t *testing.T) {
			var s telemetry.Settings
			s.ReadEnv(env(c.env))
			assert.Equal(t, c.want, s)
			assert.Equal(t, c.on, s.On())
		})
	}
}

// TestProtocolRefused: a protocol the exporter does not speak is refused
// at start-up, in the variable's words; http/protobuf and grpc pass.
func TestProtocolRefused(t *testing.T) {
	s := telemetry.Settings{Endpoint: "http://c:4318", Protocol: "http/json"}
	err := s.Validate()
	require.Error(t, err)
	assert.Equal(t, `OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" is not supported: use http/protobuf (the default) or grpc (docs/running.md, "Traces")`, err.Error())
	_, err = telemetry.New(s, "v1", nil)
	assert.Equal(t, `OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" is not supported: use http/protobuf (the default) or grpc (docs/running.md, "Traces")`, err.Error())
	for _, p := range []string{"", "http/protobuf", "grpc"} {
		s.Protocol = p
		assert.NoError(t, s.Validate(), p)
	}
	s.Endpoint, s.Protocol = "", "http/json"
	assert.NoError(t, s.Validate(), "off: nothing to refuse")
}

// TestOffCostsNothing: without an endpoint New makes nothing (no
// provider, no goroutine), and the nil tracing's spans are nil, whose
// every method does nothing and allocates nothing.
func TestOffCostsNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	tr, err := telemetry.New(telemetry.Settings{}, "v1", nil)
	require.NoError(t, err)
	assert.Nil(t, tr)
	assert.Equal(t, before, runtime.NumGoroutine())
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := tr.Start(ctx, "rest", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", time.Now())
		span.Outcome("write", "", "s1")
		span.Read(1)
		span.Wrote(1)
		span.End(200)
		if c != ctx || span != nil || span.TraceID() != "" {
			t.Fatal("a nil tracing changed something")
		}
	})
	assert.Zero(t, allocs)
	assert.NoError(t, tr.Shutdown())
}

// TestSpanNamedByItsTool: a span is named after the tool the executor
// told it, its failure is its status, and Shutdown stops the exporter.
func TestSpanNamedByItsTool(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.New(telemetry.Settings{Exporter: exp}, "v1", nil)
	require.NoError(t, err)
	_, span := tr.Start(context.Background(), "mcp", "", "", time.Now())
	span.Outcome("grep", fault.CodeSearchFailed, "")
	span.End(0)
	require.Len(t, exp.GetSpans(), 1)
	got := exp.GetSpans()[0]
	assert.Equal(t, "toolfs.grep", got.Name)
	assert.Equal(t, "SEARCH_FAILED", got.Status.Description)
	require.NoError(t, tr.Shutdown())
}
