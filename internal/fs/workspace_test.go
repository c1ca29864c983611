package fs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestWorkspaceWithin: Within judges where files really are, component by
// component, and Rel names that place relative to the root.
func TestWorkspaceWithin(t *testing.T) {
	f := newFixture(t, "sub/a.txt", "sub2/a.txt", "linked => sub", "sub/out => $OUT", "sub/tosub2 => ../sub2")
	tests := []struct {
		target, folder string
		rel            string
		within         bool
	}{
		{"sub/a.txt", "sub", "sub/a.txt", true},
		{"sub", "sub", "sub", true},
		{"sub2/a.txt", "sub", "sub2/a.txt", false},
		{"sub2", "sub", "sub2", false},
		{"linked/a.txt", "sub", "sub/a.txt", true},
		{"sub/a.txt", "linked", "sub/a.txt", true},
		{"sub/tosub2/a.txt", "sub", "sub2/a.txt", false},
		{"sub/missing/deeper.txt", "sub", "sub/missing/deeper.txt", true},
		{"sub/a.txt", ".", "sub/a.txt", true},
		{".", ".", "", true},
		{".", "sub", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.target+" in "+tt.folder, func(t *testing.T) {
			tg, dir := f.resolve(t, "write", tt.target), f.resolve(t, "write", tt.folder)
			rel, ok := f.l.Rel(tg)
			require.True(t, ok)
			assert.Equal(t, tt.rel, rel)
			assert.Equal(t, tt.within, f.l.Within(tg, dir))
		})
	}
	_, ok := f.l.Rel(Target{})
	assert.False(t, ok, "a Target the provider did not resolve has no place")
	assert.False(t, f.l.Within(Target{Key: "/elsewhere/a.txt"}, f.resolve(t, "write", ".")))
}

// TestWorkspacePrivate: the provider's own names, and a descriptor never
// into its private folder.
func TestWorkspacePrivate(t *testing.T) {
	f := newFixture(t, "a.txt", "d/")
	for rel, want := range map[string]bool{
		PrivateDir: true, PrivateDir + "/locks/1.lock": true, "d/.a.txt.toolfs-x1.tmp": true, ".b.toolfs-2.tmp": true,
		"a.txt": false, "d": false, "d/" + PrivateDir: false, "": false,
	} {
		assert.Equal(t, want, f.l.IsPrivate(rel), rel)
	}
	assert.Equal(t, []string{".toolfs-api", ".toolfs-api/**", "**/.*.toolfs-*.tmp"}, f.l.PrivateGlobs())
	_, err := f.l.OpenBeneath(PrivateDir+"/locks", unix.O_PATH|unix.O_DIRECTORY)
	assert.ErrorIs(t, err, unix.EACCES)
	fd, err := f.l.OpenBeneath("d", unix.O_PATH|unix.O_DIRECTORY)
	require.NoError(t, err)
	unix.Close(fd)
	_, err = f.l.OpenBeneath("../out", unix.O_PATH|unix.O_DIRECTORY)
	assert.ErrorIs(t, err, unix.EXDEV)
}
