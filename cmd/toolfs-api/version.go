package main

import (
	"runtime/debug"
)

// version is set at build time by a release:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/toolfs-api
//
// Without it, buildVersion asks the build information (docs/running.md,
// "Versions").
var version string

// buildVersion is the binary's version: the one set at build time; else
// the module's version that `go install <module>/cmd/toolfs-api@<tag>`
// records; else the commit a build from a clone records (12 digits, with
// "-dirty" when the clone had changes); else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionOf(info)
}

// versionOf is buildVersion's answer for a build without -X main.version.
func versionOf(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev[:min(12, len(rev))] + dirty
}
