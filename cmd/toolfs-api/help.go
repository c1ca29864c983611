package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// helpGroup is one concern of --help: its title and its flags, in the
// order they are shown.
type helpGroup struct {
	title string
	flags []string
}

// helpGroups sorts every flag by what it configures (docs/running.md,
// "Help"). TestHelpGroupsEveryFlag holds each registered flag to exactly
// one group; one a group forgets is still shown, under "Other".
var helpGroups = []helpGroup{
	{"Server", []string{"root", "addr", "stdio", "public-url", "cors-origins", "max-body-bytes", "shutdown-grace", "lock-dir"}},
	{"Authentication and identities (docs/identity.md)", []string{"token", "allow-no-token", "oauth-issuer", "oauth-audience"}},
	{"Tools and the read window", []string{"profile", "edit-dialect", "read-limit", "read-max-line-length", "read-max-bytes", "read-stream-min-size", "read-image-max-pixels", "read-image-max-bytes"}},
	{"Read caches (docs/performance.md)", []string{"cache-bytes", "cache-racy-window"}},
	{"Policy and sessions (docs/api.md, \"Sessions\")", []string{"policy", "default-session", "require-session", "session-headers", "session-ttl", "max-sessions", "max-paths-per-session", "session-store", "session-key-prefix"}},
	{"Sandbox and approvals (docs/sandbox.md)", []string{"sandbox-mode", "approvals", "approval-timeout", "max-approvals", "approver-token", "approve-by", "elicitation-key"}},
	{"Search: glob and grep (docs/search.md)", []string{"rg-path", "search-sandbox", "search-timeout", "max-searches"}},
	{"MCP (docs/mcp.md)", []string{"mcp-structured"}},
	{"Checkpoints (docs/checkpoints.md)", []string{"checkpoints", "checkpoint-bytes", "checkpoint-max-file-bytes"}},
	{"Audit (docs/audit.md)", []string{"audit-log", "journal"}},
	{"Change feed (docs/events.md)", []string{"events", "events-max-subscribers", "events-max-watches", "events-heartbeat"}},
	{"Files: browse, download, upload (docs/files.md)", []string{"max-upload-bytes", "upload-min-rate", "upload-rate-window", "list-max-entries"}},
	{"Diagnostics (docs/diagnostics.md)", []string{"diagnostics", "diagnostics-timeout"}},
	{"Console (docs/console.md)", []string{"ui", "ui-client-id"}},
	{"Logging and metrics", []string{"log-format", "metrics-token"}},
	{"This binary", []string{"version"}},
}

const helpIntro = `Usage: toolfs-api [flags]

Serves the file tools read, write, edit, glob and grep for one workspace
root: over HTTP (REST, and MCP at /mcp) on --addr, or over MCP on standard
input and output with --stdio. With no flags it serves the current folder
on 127.0.0.1:8080 with the read-before-write policy on.

Every flag but --version has an environment twin, named after it: a flag
on the command line wins over its twin. An invalid value stops start-up
with a message naming the flag.
`

// writeHelp prints --help: the flags of fl by group, each with its value's
// kind, its environment twin, its meaning and its default.
func writeHelp(w io.Writer, fl *flag.FlagSet) error {
	var b strings.Builder
	b.WriteString(helpIntro)
	shown := map[string]bool{}
	section := func(title string, names []string) {
		var flags []*flag.Flag
		for _, n := range names {
			if f := fl.Lookup(n); f != nil && !shown[n] {
				flags = append(flags, f)
				shown[n] = true
			}
		}
		if len(flags) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s:\n", title)
		for _, f := range flags {
			writeFlag(&b, f)
		}
	}
	for _, g := range helpGroups {
		section(g.title, g.flags)
	}
	var rest []string
	fl.VisitAll(func(f *flag.Flag) {
		if !shown[f.Name] {
			rest = append(rest, f.Name)
		}
	})
	section("Other", rest)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFlag writes one flag as
//
//	--read-limit int  (TOOLFS_READ_LIMIT)
//	    default and maximum lines per read (default 2000)
func writeFlag(b *strings.Builder, f *flag.Flag) {
	kind, usage := flag.UnquoteUsage(f)
	fmt.Fprintf(b, "  --%s", f.Name)
	if kind != "" {
		fmt.Fprintf(b, " %s", kind)
	}
	if env := envTwin(f.Name); env != "" {
		fmt.Fprintf(b, "  (%s)", env)
	}
	if d := defaultText(f); d != "" {
		usage += " (default " + d + ")"
	}
	b.WriteString("\n")
	wrap(b, usage, "      ", 80)
}

// wrap writes text in lines of at most width bytes, each after indent,
// breaking at spaces (a longer word stands alone).
func wrap(b *strings.Builder, text, indent string, width int) {
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
}

// defaultText is a flag's default as --help shows it: nothing for an empty
// string, a zero or false, quoted for a string.
func defaultText(f *flag.Flag) string {
	switch v := f.DefValue; {
	case v == "", v == "0", v == "false":
		return ""
	case isDuration(f):
		if d, err := time.ParseDuration(v); err == nil && d == 0 {
			return ""
		}
		return v
	case isString(f):
		return fmt.Sprintf("%q", v)
	default:
		return v
	}
}

func isDuration(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(time.Duration)
	return ok
}

func isString(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(string)
	return ok
}
