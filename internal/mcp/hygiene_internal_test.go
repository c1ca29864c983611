package mcp

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBodyTraceID: the trace id of params._meta.traceparent, the last of a
// key given twice (as the SDK reads it), nothing elsewhere or when invalid.
func TestBodyTraceID(t *testing.T) {
	const tp = `"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"traceparent":` + tp + `}}}`:                            id,
		`{ "params" : { "_meta" : { "x" : [1,{"traceparent":"no"}], "traceparent" : ` + tp + ` } }, "id": 1 }`:                    id,
		`{"params":{"_meta":{"traceparent":"00-ffffffffffffffffffffffffffffffff-00f067aa0ba902b7-01","traceparent":` + tp + `}}}`: id,
		`{"params":{"traceparent":` + tp + `}}`:                                                               "",
		`{"_meta":{"traceparent":` + tp + `}}`:                                                                "",
		`{"params":{"_meta":{"traceparent":` + tp + `}}`:                                                      "", // not valid JSON
		`{"params":{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u0031"}}}`: "",
		`[{"params":{"_meta":{"traceparent":` + tp + `}}}]`:                                                   "",
		``: "",
	} {
		assert.Equal(t, want, bodyTraceID([]byte(body)), body)
	}
}

// FuzzBodyTraceID: any body is read without a panic, and a trace id found
// is 32 lowercase hex digits.
func FuzzBodyTraceID(f *testing.F) {
	f.Add([]byte(`{"params":{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`))
	f.Add([]byte(`{"params":{"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`))
	f.Add([]byte(`{"params":{"_meta":"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if id := bodyTraceID(b); id != "" {
			assert.Regexp(t, `^[0-9a-f]{32}$`, id)
		}
	})
}
