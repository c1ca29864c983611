package fs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNormalizeLF(t *testing.T) {
	for in, want := range map[string]string{
		"":               "",
		"a\nb":           "a\nb",
		"a\r\nb\r\n":     "a\nb\n",
		"lone\rcr\r":     "lone\rcr\r",
		"\r\r\n\n\r\n\r": "\r\n\n\n\r",
	} {
		assert.Equal(t, want, NormalizeLF(in), "%q", in)
	}
}
