//go:build race

package checkpoint

// raceBuild: the race detector slows every byte copied, so the SIGKILL
// test uses smaller files to stay within its time.
const raceBuild = true
