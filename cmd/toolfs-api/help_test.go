package main

import (
	"bytes"
	"flag"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpGroupsEveryFlag: every registered flag is in exactly one group
// of --help, and every name a group lists is a registered flag.
func TestHelpGroupsEveryFlag(t *testing.T) {
	var o options
	fl := o.flagSet()
	in := map[string][]string{}
	for _, g := range helpGroups {
		for _, n := range g.flags {
			in[n] = append(in[n], g.title)
			assert.NotNil(t, fl.Lookup(n), "group %q lists --%s, which is not a flag", g.title, n)
		}
	}
	fl.VisitAll(func(f *flag.Flag) {
		assert.Len(t, in[f.Name], 1, "--%s must be in exactly one group of helpGroups (cmd/toolfs-api/help.go), is in %v", f.Name, in[f.Name])
	})
}

// TestHelp: --help and -h print every flag on stdout, by group, each with
// its environment twin, and exit 0 with nothing on stderr; an undefined
// flag is one line on stderr naming it, nothing on stdout, exit 1.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(binary(t), arg)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run())
			assert.Empty(t, stderr.String())
			out := stdout.String()
			assert.True(t, strings.HasPrefix(out, "Usage: toolfs-api [flags]\n"), out)
			assert.Contains(t, out, "\nServer:\n  --root string  (TOOLFS_ROOT)\n      workspace root: the folder the tools may reach (default \".\")\n")
			assert.Contains(t, out, "\nTools and the read window:\n  --profile string  (TOOLFS_PROFILE)\n")
			assert.Contains(t, out, "  --read-limit int  (TOOLFS_READ_LIMIT)\n      default and maximum lines per read (default 2000)\n")
			assert.Contains(t, out, "  --policy  (TOOLFS_POLICY)\n      read-before-write policy (false = bare provider) (default true)\n")
			assert.Contains(t, out, "\nThis binary:\n  --version\n      print the version and exit\n")
			assert.NotContains(t, out, "\nOther:\n")
			var o options
			o.flagSet().VisitAll(func(f *flag.Flag) {
				line := regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(f.Name) + `( \w+)?(  \(` + envTwin(f.Name) + `\))?$`)
				assert.Len(t, line.FindAllString(out, -1), 1, "--%s once, with its twin", f.Name)
			})
			for _, l := range strings.Split(out, "\n") {
				assert.LessOrEqual(t, len(l), 80, "a line of --help fits 80 columns: %q", l)
			}
		})
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary(t), "--nope")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.Error(t, err)
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Empty(t, stdout.String())
	assert.Equal(t, "toolfs-api: flag provided but not defined: -nope (see --help)\n", stderr.String())
}
