package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateFlags = flag.Bool("update-flags", false, "rewrite testdata/flags.golden from the code")

// TestFlagsPinned dumps every flag (name, default, usage, environment
// twin) and the message start-up gives for each flag's bad values, and
// holds them to testdata/flags.golden byte for byte: moving a flag's
// registration or check to another file must change none of them
// (docs/architecture.md, "Where each kind of change goes").
// go test -run TestFlagsPinned -update-flags ./cmd/toolfs-api rewrites it.
func TestFlagsPinned(t *testing.T) {
	var b strings.Builder
	var o options
	fl := o.flagSet()
	fl.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if f.Name == "cache-racy-window" {
			def = "<the kernel's dirty expiry plus writeback>" // read from /proc at start-up
		}
		fmt.Fprintf(&b, "--%s  env=%s  default=%q\n    %s\n", f.Name, envTwin(f.Name), def, f.Usage)
	})
	b.WriteString("\n# each flag given a bad value alone\n")
	fl.VisitAll(func(f *flag.Flag) {
		if f.Name == "version" {
			return
		}
		for _, v := range badValues(f) {
			fmt.Fprintf(&b, "--%s=%q: %s\n", f.Name, v, outcome([]string{"--" + f.Name + "=" + v}, nil))
			if env := envTwin(f.Name); env != "" && v != "" {
				fmt.Fprintf(&b, "%s=%q: %s\n", env, v, outcome(nil, map[string]string{env: v}))
			}
		}
	})
	b.WriteString("\n# settings bad together\n")
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--require-session", "--default-session", "x"}, nil},
		{[]string{"--require-session"}, map[string]string{"TOOLFS_DEFAULT_SESSION": "x"}},
		{[]string{"--require-session"}, nil},
		{[]string{"--oauth-issuer", "https://issuer.example"}, nil},
		{[]string{"--oauth-audience", "a"}, nil},
		{[]string{"--oauth-issuer", "https://issuer.example", "--public-url", "https://t.example", "--oauth-audience", "a, ,b"}, nil},
		{[]string{"--token", "t", "--approver-token", "t"}, nil},
		{[]string{"--token", "t", "--metrics-token", "t"}, nil},
		{[]string{"--approver-token", "a", "--metrics-token", "a"}, nil},
		{[]string{"--checkpoint-bytes", "1000", "--checkpoint-max-file-bytes", "2000"}, nil},
		{[]string{"--checkpoint-bytes", "1000"}, nil},
		{[]string{"--profile", "original", "--edit-dialect", "anchors"}, nil},
		{[]string{"--addr", "0.0.0.0:8080"}, nil},
		{[]string{"--addr", "0.0.0.0:8080", "--token", "t"}, nil},
		{[]string{"--addr", "0.0.0.0:8080", "--stdio"}, nil},
		{[]string{"--session-store", "redis://u:hunter2@h:6379/notadb"}, nil},
		{[]string{"--session-store", "redis://h:6379/0"}, nil},
		{[]string{"--session-headers", "X-A, bad header"}, nil},
		{[]string{"--public-url", "https://u:p@t.example"}, nil},
		{[]string{"--public-url", "https://t.example/x#"}, nil},
		{[]string{"serve"}, nil},
		{[]string{"--nope"}, nil},
	} {
		fmt.Fprintf(&b, "%q %v: %s\n", c.args, c.env, outcome(c.args, c.env))
	}
	got := b.String()
	golden := filepath.Join("testdata", "flags.golden")
	if *updateFlags {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), got)
}

// badValues are the values of f's kind that a check or the parser refuses,
// and the zero it may take (which some flags refuse).
func badValues(f *flag.Flag) []string {
	switch {
	case isDuration(f):
		return []string{"0s", "-1s", "500ms", "soon"}
	case isString(f):
		return []string{"", "bogus", "has space"}
	}
	switch f.Value.(flag.Getter).Get().(type) {
	case bool:
		return []string{"maybe"}
	default:
		return []string{"0", "-1", "1", "99999999999", "lots"}
	}
}

func outcome(args []string, e map[string]string) string {
	if _, err := parseConfig(args, env(e)); err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}
