package servertest

import (
	"net"
	"testing"
)

// FreePort is a loopback port nothing listens on now, for a child process
// the test starts on a port of its own.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
