// Package servertest starts a whole toolfs-api server (internal/server) on
// a loopback port for tests, over a fresh temporary root unless one is
// given.
package servertest

import (
	"context"
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

// Start builds a server from cfg and opts (Root: a new temporary folder
// when empty; every other zero field as server.Config says) and serves it
// until the test ends, then shuts it down.
func Start(tb testing.TB, cfg server.Config, opts ...server.Option) *Server {
	tb.Helper()
	if cfg.Root == "" {
		root, err := filepath.EvalSymlinks(tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Root = root
	}
	// The port is known before the server is built, so that identities
	// can name it: with Identity.Issuer and no PublicURL, the URL is public.
	hs := httptest.NewUnstartedServer(nil)
	url := "http://" + hs.Listener.Addr().String()
	if cfg.Identity.Issuer != "" && cfg.PublicURL == "" {
		cfg.PublicURL = url
	}
	s, err := server.New(cfg, nil, opts...)
	if err != nil {
		hs.Listener.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown(context.Background()) })
	hs.Config.Handler = s.Handler
	hs.Start()
	tb.Cleanup(hs.Close)
	return &Server{Server: s, URL: url}
}
