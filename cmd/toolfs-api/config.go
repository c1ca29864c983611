package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/toolfs/toolfs-api/internal/server"
)

// options is what the command line asks of the process: the server's
// settings, and what the binary does with them.
type options struct {
	server.Config
	// printVersion is --version: print the version and exit.
	printVersion bool
}

// parseConfig reads every setting of the server from flags and their
// TOOLFS_* environment twins (a flag on the command line wins) into a
// server.Config, and checks it (server.Config.Validate). --version has no
// twin: it is a question, not a setting, and is answered before anything
// else is checked. --help (or -h) is flag.ErrHelp: run prints the help on
// stdout (writeHelp). A flag the set does not define, or a value it
// cannot parse, is an error naming it.
func parseConfig(args []string, getenv func(string) string) (options, error) {
	var o options
	c := &o.Config
	fl := o.flagSet()
	// The help goes to stdout (run), an error once to stderr (main).
	fl.SetOutput(io.Discard)
	fl.Usage = func() {}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w (see --help)", err)
	}
	if fl.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (flags only; see --help)", fl.Arg(0))
	}
	if o.printVersion {
		return o, nil
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fl.VisitAll(func(f *flag.Flag) {
		env := envTwin(f.Name)
		v := getenv(env)
		if env == "" || set[f.Name] || v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("invalid value %q for %s (--%s): %v", v, env, f.Name, err))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	// With --require-session a request that names no session has none
	// (docs/api.md, "Sessions"): the two flags must not both be given,
	// which only the command line knows.
	switch s := &c.Sessions; {
	case s.Require && (set["default-session"] || getenv("TOOLFS_DEFAULT_SESSION") != ""):
		return o, errors.New("--require-session and --default-session contradict each other: with --require-session a request that names no session has none")
	case s.Require:
		s.Default = ""
	case s.Default == "":
		return o, errors.New("--default-session must not be empty: use --require-session to serve requests that name no session without one")
	}
	// Traces are set by the standard OpenTelemetry variables, not by flags
	// (docs/running.md, "Traces").
	c.Telemetry.ReadEnv(getenv)
	return o, c.Validate()
}

// flagSet registers every flag of the binary, bound to o: the server's,
// each registered by the package it configures (server.Config's
// RegisterFlags), and --version. Each belongs to one group of helpGroups.
func (o *options) flagSet() *flag.FlagSet {
	fl := flag.NewFlagSet("toolfs-api", flag.ContinueOnError)
	o.Config.RegisterFlags(fl)
	fl.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	return fl
}

// envTwin is the environment variable of a flag: TOOLFS_ and its name in
// capitals, dashes as underscores (--read-limit: TOOLFS_READ_LIMIT); ""
// for --version, which has none.
func envTwin(flag string) string {
	if flag == "version" {
		return ""
	}
	return "TOOLFS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}
