package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixtures promise what the scenarios rely on.

func TestSourceTextIsATypicalSourceFile(t *testing.T) {
	src := sourceText(2000)
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	require.Len(t, lines, 2000)
	assert.InDelta(t, 60<<10, len(src), 4<<10, "about 60 KiB")
	seen := map[string]bool{}
	for _, l := range lines {
		assert.False(t, seen[l], "every line is unique, so any line can be an old_string: %q", l)
		seen[l] = true
	}
}

func TestBigTextHasExactSizeAndLineCount(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.txt")
	n, err := bigText(p, 1<<20+7)
	require.NoError(t, err)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Len(t, b, 1<<20+7)
	assert.Equal(t, n, strings.Count(string(b), "\n"))
	assert.True(t, strings.HasSuffix(string(b), "\n"))
}

func TestEditTextHasOneMarker(t *testing.T) {
	content, a, b := editText(1 << 20)
	assert.GreaterOrEqual(t, len(content), 1<<20)
	assert.Equal(t, 1, strings.Count(content, a))
	assert.Equal(t, 0, strings.Count(content, b))
}

func TestBumpIncrementsTheCounterOnly(t *testing.T) {
	assert.Equal(t, "counter_07 = 13 // file 0042", bump(loadLine(42, 7, 12)))
}

func TestQuantileIsNearestRank(t *testing.T) {
	var l latencies
	for i := 1; i <= 100; i++ {
		l.d = append(l.d, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, l.quantile(0.5))
	assert.Equal(t, 99*time.Millisecond, l.quantile(0.99))
	assert.Equal(t, 100*time.Millisecond, l.quantile(1))
	assert.Equal(t, time.Duration(0), latencies{}.quantile(0.5))
}

func TestCPUOfReadsThisProcess(t *testing.T) {
	before, err := cpuOf(os.Getpid())
	require.NoError(t, err)
	after := before
	for start := time.Now(); after == before && time.Since(start) < 5*time.Second; {
		for spin := time.Now(); time.Since(spin) < 20*time.Millisecond; {
		}
		after, err = cpuOf(os.Getpid())
		require.NoError(t, err)
	}
	assert.Greater(t, after, before, "spinning shows in /proc/self/stat")
}
