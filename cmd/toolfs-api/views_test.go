package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPublicURL: --public-url (trailing slashes dropped) is the servers URL
// of /openapi.json; without it, the request's Host.
func TestPublicURL(t *testing.T) {
	root := t.TempDir()
	base, stop := startRun(t, []string{"--root", root, "--addr", "127.0.0.1:0", "--lock-dir", "off", "--public-url", "https://tools.example.com/toolfs/"})
	a := call(t, http.MethodGet, base+"/openapi.json", "", "")
	require.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, `"servers":[{"url":"https://tools.example.com/toolfs"}]`)
	stop()

	base, stop = startRun(t, []string{"--root", root, "--addr", "127.0.0.1:0", "--lock-dir", "off"})
	defer stop()
	a = call(t, http.MethodGet, base+"/openapi.json", "", "")
	require.Equal(t, 200, a.status, a.body)
	assert.Contains(t, a.body, `"servers":[{"url":"`+base+`"}]`)
}
