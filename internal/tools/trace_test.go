package tools_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// TestTraceID: the W3C traceparent values whose trace id is kept, and
// those ignored (docs/running.md, "Traces in the logs").
func TestTraceID(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for value, want := range map[string]string{
		"00-" + id + "-00f067aa0ba902b7-01":                       id,
		"00-" + id + "-00f067aa0ba902b7-00":                       id,
		"01-" + id + "-00f067aa0ba902b7-01-more":                  id, // a later version may add fields
		"00-" + id + "-00f067aa0ba902b7-01-more":                  "", // version 00 has exactly four
		"ff-" + id + "-00f067aa0ba902b7-01":                       "",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-" + id + "-0000000000000000-01":                       "",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "", // uppercase
		"00-" + id + "-00f067aa0ba902b7":                          "",
		"00_" + id + "-00f067aa0ba902b7-01":                       "",
		"00-" + id + "-00f067aa0ba902bz-01":                       "",
		"":                                                        "",
		"\n00-" + id + "-00f067aa0ba902b7-0":                      "",
	} {
		assert.Equal(t, want, tools.TraceID(value), "%q", value)
	}
}

// TestNoteWithoutTraceAllocatesNothing: a request without a trace (most of
// them) pays no allocation in Note (it paid one, docs/performance.md
// "Reads at their floor").
func TestNoteWithoutTraceAllocatesNothing(t *testing.T) {
	_, tr := tools.WithTrace(context.Background())
	id := tools.TraceID("")
	assert.Zero(t, testing.AllocsPerRun(100, func() { tr.Note(id) }))
	tr.Note("4bf92f3577b34da6a3ce929d0e0e4736")
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", tr.ID())
	tr.Note("00000000000000000000000000000001")
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", tr.ID(), "the first trace stays")
}
