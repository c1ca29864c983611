// Package servertest starts a whole toolfs-api server (internal/server) on
// a loopback port for tests, over a fresh temporary root unless one is
// given.
package servertest

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/toolfs/toolfs-api/internal/server"
)

// Server is a running server: URL is its base, Root its workspace root.
type Server struct {
	*server.Server
	URL string
}

// Start builds a server from o (Root: a new temporary folder when empty)
// and serves it until the test ends.
func Start(tb testing.TB, o server.Options) *Server {
	tb.Helper()
	if o.Root == "" {
		root, err := filepath.EvalSymlinks(tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		o.Root = root
	}
	s, err := server.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	hs := httptest.NewServer(s.Handler)
	tb.Cleanup(hs.Close)
	return &Server{Server: s, URL: hs.URL}
}
