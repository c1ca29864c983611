// Command toolfs-api serves the model-facing file tools read, write and edit
// (and glob and grep) over HTTP/JSON for one workspace root.
//
// With no arguments it serves the current folder on 127.0.0.1:8080 with the
// read-before-write policy on. Every flag has an environment twin:
// --read-limit is TOOLFS_READ_LIMIT.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolfs/toolfs-api/internal/server"
)

func main() {
	// The sandbox re-executes this binary to confine rg and the checkers
	// (docs/search.md); in that child this never returns.
	server.RunSandboxChildIfRequested()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runStdio(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "toolfs-api:", err)
		os.Exit(1)
	}
}
