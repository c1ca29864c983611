package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidSessionID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"s", true},
		{"chat-42_a.b:c", true},
		{"ABCxyz019", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"a b", false},
		{"a/b", false},
		{"é", false},
		{"a\x00", false},
		{"a\n", false},
	} {
		assert.Equal(t, tc.want, ValidSessionID(tc.id), "%q", tc.id)
	}
	assert.Equal(t, "1-128 characters of A-Za-z0-9._:-", SessionIDRule)
}
