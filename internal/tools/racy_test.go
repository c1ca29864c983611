package tools

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRacyWindowFromTheKernel: the default racy window is the kernel's
// dirty-page expiry plus its writeback interval, 35 s when they cannot be
// read or periodic writeback is off, never under 2 s (docs/performance.md,
// "Caches").
func TestRacyWindowFromTheKernel(t *testing.T) {
	for _, tc := range []struct {
		name          string
		expire, every string // "" = no such file
		want          time.Duration
	}{
		{"Linux defaults", "3000\n", "500\n", 35 * time.Second},
		{"longer expiry", "6000\n", "1500\n", 75 * time.Second},
		{"no newline", "300", "50", 3500 * time.Millisecond},
		{"under the floor", "50\n", "100\n", 2 * time.Second},
		{"expiry 0", "0\n", "500\n", 5 * time.Second},
		{"periodic writeback off", "3000\n", "0\n", 35 * time.Second},
		{"expiry missing", "", "500\n", 35 * time.Second},
		{"interval missing", "3000\n", "", 35 * time.Second},
		{"not a number", "soon\n", "500\n", 35 * time.Second},
		{"negative", "-1\n", "500\n", 35 * time.Second},
		{"over an int", "4294967296\n", "500\n", 35 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, v := range map[string]string{"dirty_expire_centisecs": tc.expire, "dirty_writeback_centisecs": tc.every} {
				if v != "" {
					require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644))
				}
			}
			assert.Equal(t, tc.want, racyWindowIn(dir))
		})
	}
	t.Run("no such folder", func(t *testing.T) {
		assert.Equal(t, 35*time.Second, racyWindowIn(filepath.Join(t.TempDir(), "nope")))
	})
	t.Run("this kernel", func(t *testing.T) {
		var cs [2]int
		for i, name := range []string{"dirty_expire_centisecs", "dirty_writeback_centisecs"} {
			b, err := os.ReadFile("/proc/sys/vm/" + name)
			if err != nil {
				t.Skipf("cannot read the kernel's writeback settings: %v", err)
			}
			cs[i], err = strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)
		}
		if cs[1] == 0 {
			t.Skip("periodic writeback is off on this kernel")
		}
		want := max(time.Duration(cs[0]+cs[1])*10*time.Millisecond, 2*time.Second)
		assert.Equal(t, want, DefaultRacyWindow())
		assert.Equal(t, want, DefaultCacheConfig().RacyWindow)
	})
}
