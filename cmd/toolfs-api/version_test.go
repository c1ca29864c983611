package main

import (
	"os/exec"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionFlag: --version prints the version set at build time, the Go
// release and the platform on stdout, nothing on stderr, and exits 0 before
// any setting is checked (a root that does not exist, an environment twin
// that would be refused).
func TestVersionFlag(t *testing.T) {
	cmd := exec.Command(binary(t), "--version", "--root", "/definitely/not/here")
	cmd.Env = append(cmd.Environ(), "TOOLFS_READ_LIMIT=lots", "TOOLFS_VERSION=true")
	var stderr []byte
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "%s", stderr)
	assert.Equal(t, "toolfs-api "+testVersion+" "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n", string(out))

	// TOOLFS_VERSION is no twin: a server whose environment has it serves.
	cmd = exec.Command(binary(t), "--root", "/definitely/not/here")
	cmd.Env = append(cmd.Environ(), "TOOLFS_VERSION=true")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "--root")
}

// TestBuildInfoMetric: /metrics says which version runs, and with which Go.
func TestBuildInfoMetric(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v1.2.3-metrics"
	base, stop := startRun(t, []string{"--root", t.TempDir(), "--addr", "127.0.0.1:0", "--lock-dir", "off"})
	defer stop()
	m := call(t, "GET", base+"/metrics", "", "").body
	assert.Contains(t, m, "\ntoolfs_build_info{goversion=\""+runtime.Version()+"\",version=\"v1.2.3-metrics\"} 1\n")
}

// TestVersionOf: without -X main.version, the module version go install
// records wins, then the commit of a build from a clone, then "devel".
func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install at a tag", debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"a clean clone", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "false"}}}, "devel-0123456789ab"},
		{"a clone with changes", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}}}, "devel-0123456789ab-dirty"},
		{"no version control (-buildvcs=false)", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"a test binary", debug.BuildInfo{}, "devel"},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, versionOf(&tc.info)) })
	}
}
