package checkpoint

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tfs "github.com/toolfs/toolfs-api/internal/fs"
)

// crashedRevert runs a revert of session s to 0 on its own goroutine and
// stops it dead (as a crash would, though its locks are released) where
// stop says: at the journal, or after the i-th file is published.
func crashedRevert(t *testing.T, f *fixture, afterFile int) {
	t.Helper()
	stop := func() { runtime.Goexit() }
	if afterFile < 0 {
		f.s.hooks.journaled = stop
	} else {
		f.s.hooks.published = func(i int) {
			if i == afterFile {
				stop()
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := f.revert("s", 0, false)
		t.Errorf("the revert was not stopped: %v", err)
	}()
	<-done
	f.s.hooks = testHooks{}
}

var threeFiles = map[string]string{"a.txt": "a0\n", "b.txt": "b0\n", "c.txt": "c0\n"}

func threeChanges(f *fixture) {
	f.write("s", "a.txt", "a1\n")
	f.edit("s", "b.txt", "b0", "b1")
	f.write("s", "c/new.txt", "created\n")
}

// A revert stopped after its journal, whatever it published, is finished
// when the store is opened again: every file restored, once.
func TestInterruptedRevertRollsForward(t *testing.T) {
	for _, after := range []int{-1, 0, 1} {
		f := newFixture(t, Options{}, threeFiles)
		threeChanges(f)
		crashedRevert(t, f, after)
		f.reopen()
		assert.Equal(t, Recovery{RolledForward: 1}, f.s.Recovered(), "stopped after file %d", after)
		assert.Equal(t, threeFiles, f.snapshot(), "stopped after file %d", after)
		cs := f.changes("s")
		assert.Equal(t, []string{"4 revert a.txt", "4 revert b.txt", "4 revert c/new.txt", "3 write c/new.txt", "2 edit b.txt", "1 write a.txt"}, seqsOf(cs))
		assert.NotEmpty(t, cs[0].After.Version, "done, with its version")
		f.reopen()
		assert.Equal(t, Recovery{}, f.s.Recovered(), "nothing left to settle")
	}
}

// When a file changed between the crash and the restart, the interrupted
// revert is undone instead: the files it restored get back what the agent
// left, the person's edit stays, and nothing of the revert is listed.
func TestInterruptedRevertRollsBack(t *testing.T) {
	f := newFixture(t, Options{}, threeFiles)
	threeChanges(f)
	agent := f.snapshot()
	crashedRevert(t, f, 0) // a.txt restored, b.txt and c/new.txt not
	require.Equal(t, "a0\n", f.read("a.txt"))
	f.put("b.txt", "person\n")
	f.reopen()
	assert.Equal(t, Recovery{RolledBack: 1}, f.s.Recovered())
	agent["b.txt"] = "person\n"
	assert.Equal(t, agent, f.snapshot())
	assert.Equal(t, []string{"3 write c/new.txt", "2 edit b.txt", "1 write a.txt"}, seqsOf(f.changes("s")))
}

// A write recorded but stopped before its outcome was noted is settled by
// the file: published (its bytes are there) is done, else dropped.
func TestInterruptedWriteSettled(t *testing.T) {
	for _, published := range []bool{false, true} {
		f := newFixture(t, Options{}, threeFiles)
		ctx := context.Background()
		file, err := os.Open(f.path("a.txt"))
		require.NoError(t, err)
		info, err := f.l.Stat(ctx, f.target("a.txt"))
		require.NoError(t, err)
		r := f.s.Recording("s", "write")
		require.NoError(t, r.Keep(ctx, tfs.Replaced{Path: "a.txt", Exists: true, Version: info.Version, Size: info.Size, Content: file}))
		require.NoError(t, r.Prepare(ctx, sumOf("a1\n")))
		file.Close()
		if published {
			f.put("a.txt", "a1\n")
		}
		f.reopen() // Done never came
		assert.Equal(t, Recovery{Settled: 1}, f.s.Recovered())
		cs := f.changes("s")
		if !published {
			assert.Empty(t, cs)
			continue
		}
		require.Len(t, cs, 1)
		_, err = f.revert("s", 0, false)
		require.NoError(t, err)
		assert.Equal(t, "a0\n", f.read("a.txt"))
	}
}

// A torn last line (a crash in mid-append) is cut off and the log goes on.
func TestTornLogLine(t *testing.T) {
	f := newFixture(t, Options{}, threeFiles)
	f.write("s", "a.txt", "a1\n")
	name := f.path(tfs.PrivateDir + "/checkpoints/sessions/" + logName("s"))
	lf, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = lf.WriteString(`{"t":"change","seq":2,"tool":"wri`)
	require.NoError(t, err)
	lf.Close()
	f.reopen()
	f.write("s", "a.txt", "a2\n")
	assert.Equal(t, []string{"2 write a.txt", "1 write a.txt"}, seqsOf(f.changes("s")))
	_, err = f.revert("s", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "a0\n", f.read("a.txt"))
}
