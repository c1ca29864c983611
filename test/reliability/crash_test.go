package reliability

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashFile is the one file the crash test's clients fight over.
const crashFile = "target.txt"

// Every version of crashFile starts with a header naming its sequence
// number, the body's length and the body's SHA-256, so a torn, empty or
// invented file cannot pass for a version some request produced.
var crashHeader = regexp.MustCompile(`^toolfs-crash seq=(\d+) len=(\d+) sha256=([0-9a-f]{64})$`)

// tempFile is the name the provider gives the temporary files it stages for
// crashFile (docs/decisions-fs.md).
var tempFile = regexp.MustCompile(`^\.` + regexp.QuoteMeta(crashFile) + `\.toolfs-[0-9a-z]+\.tmp$`)

func crashHeaderLine(seq uint64, n int, sum string) string {
	return fmt.Sprintf("toolfs-crash seq=%d len=%d sha256=%s", seq, n, sum)
}

// crashBody is text of about size bytes, different for every seed, that
// never contains a header.
type crashBody struct {
	text string
	sum  string // hex SHA-256 of text
}

func newCrashBody(seed uint64, size int) crashBody {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.Grow(size + 128)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "body %d line %d: %016x%016x%016x%016x\n", seed, i, rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
	}
	sum := sha256.Sum256([]byte(b.String()))
	return crashBody{text: b.String(), sum: hex.EncodeToString(sum[:])}
}

// issued remembers, for every sequence number a request ever carried, the
// body it promised (length and checksum). Numbers are issued before the
// request leaves, so a version published just before a kill is known.
type issued struct {
	mu sync.Mutex
	m  map[uint64]string // seq → "len sha256"
}

func (is *issued) add(seq uint64, n int, sum string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.m[seq] = strconv.Itoa(n) + " " + sum
}

func (is *issued) has(seq uint64, n int, sum string) bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.m[seq] == strconv.Itoa(n)+" "+sum
}

// crashStats are the figures docs/reliability.md reports.
type crashStats struct {
	kills, killsMidMutation, served, mutationsOK, stale int
	debris                                              int // temporary files found after kills, all swept by the next start
}

// TestCrashSafety SIGKILLs a server at random moments while clients write
// and edit one file with large (1–4 MiB) and small contents. After every
// kill the file must be exactly one complete version some request produced
// (or the initial one), temporary files may remain but only under their own
// names in <root>/.toolfs-api/tmp, and a server restarted on the same root
// must serve a read and an edit at once and leave no temporary file behind:
// its start-up sweep removes every one no live process holds.
func TestCrashSafety(t *testing.T) {
	kills := 15
	if long {
		kills = 300
	}
	const clients = 3
	root := t.TempDir()

	// Bodies are built once; the header makes every content unique.
	var bodies []crashBody
	for i, size := range []int{1 << 20, 2 << 20, 3 << 20, 4 << 20, 64, 900, 4 << 10, 16 << 10} {
		bodies = append(bodies, newCrashBody(uint64(i+1), size))
	}
	is := &issued{m: map[uint64]string{}}
	var seq atomic.Uint64
	initial := newCrashBody(0, 200)
	is.add(0, len(initial.text), initial.sum)
	require.NoError(t, os.WriteFile(filepath.Join(root, crashFile),
		[]byte(crashHeaderLine(0, len(initial.text), initial.sum)+"\n"+initial.text), 0o644))

	var st crashStats
	started := time.Now()
	for k := 0; k < kills; k++ {
		srv := startChild(t, root)
		restartServesCleanly(t, srv.base, root, is, &seq)
		require.Zero(t, verifyCrashFile(t, root, is), "the restarted server left debris (kill %d)", k)

		var (
			killed   atomic.Bool
			inFlight atomic.Int32
			served   atomic.Int64
			okMut    atomic.Int64
			stale    atomic.Int64
			mu       sync.Mutex
			failures []string
			wg       sync.WaitGroup
		)
		fail := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			failures = append(failures, fmt.Sprintf(format, args...))
		}
		ctx, cancel := context.WithCancel(context.Background())
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc := newClient()
				defer hc.CloseIdleConnections()
				rng := rand.New(rand.NewPCG(uint64(k), uint64(c)))
				session := fmt.Sprintf("crash-%d-%d", k, c)
				// A transport error before the kill is a server failure;
				// after it, it is the point of the test.
				gone := func(err error) bool {
					if err != nil && !killed.Load() && ctx.Err() == nil {
						fail("client %s: %v", session, err)
					}
					return err != nil
				}
				for ctx.Err() == nil {
					a, err := call(ctx, hc, srv.base, "read", session, obj{"file_path": crashFile, "limit": 1})
					if gone(err) {
						return
					}
					served.Add(1)
					if a.Status != 200 || len(a.Metadata.Lines) != 1 {
						fail("read: %d %s", a.Status, a.Raw)
						return
					}
					m := crashHeader.FindStringSubmatch(a.Metadata.Lines[0].Text)
					if m == nil {
						fail("read shows no header: %q", a.Metadata.Lines[0].Text)
						return
					}
					n, _ := strconv.Atoi(m[2])
					s := seq.Add(1)
					var tool string
					var body obj
					if rng.IntN(3) == 0 { // edit the header: same body, new number
						is.add(s, n, m[3])
						tool, body = "edit", obj{"file_path": crashFile, "old_string": m[0], "new_string": crashHeaderLine(s, n, m[3])}
					} else {
						b := bodies[rng.IntN(len(bodies))]
						is.add(s, len(b.text), b.sum)
						tool, body = "write", obj{"file_path": crashFile, "content": crashHeaderLine(s, len(b.text), b.sum) + "\n" + b.text}
					}
					inFlight.Add(1)
					a, err = call(ctx, hc, srv.base, tool, session, body)
					inFlight.Add(-1)
					if gone(err) {
						return
					}
					served.Add(1)
					switch {
					case a.Status == 200:
						okMut.Add(1)
					case a.Status == 409 && a.Code == "FS_STALE_VERSION":
						stale.Add(1)
					default:
						fail("%s: %d %s", tool, a.Status, a.Raw)
						return
					}
				}
			}()
		}

		time.Sleep(time.Duration(rand.IntN(51)) * time.Millisecond)
		killed.Store(true)
		if inFlight.Load() > 0 {
			st.killsMidMutation++
		}
		srv.kill()
		cancel()
		wg.Wait()
		require.Empty(t, failures, "kill %d", k)
		st.kills++
		st.served += int(served.Load())
		st.mutationsOK += int(okMut.Load())
		st.stale += int(stale.Load())
		st.debris += verifyCrashFile(t, root, is)
	}

	// A last restart: it serves, then drains and exits 0 on SIGTERM.
	srv := startChild(t, root)
	restartServesCleanly(t, srv.base, root, is, &seq)
	srv.stop()
	require.Zero(t, verifyCrashFile(t, root, is), "debris after the last restart")
	t.Logf("crash safety: %d kills (%d with a mutation in flight), %d requests served (%d mutations ok, %d stale), %d temporary files left by kills, 0 after each restart, 0 failures, %s",
		st.kills, st.killsMidMutation, st.served, st.mutationsOK, st.stale, st.debris, time.Since(started).Round(time.Millisecond))
}

// restartServesCleanly reads the file through a freshly started server,
// which must show the version on disk (no temporary file stands in for
// it), and edits it.
func restartServesCleanly(t *testing.T, base, root string, is *issued, seq *atomic.Uint64) {
	t.Helper()
	hc := newClient()
	defer hc.CloseIdleConnections()
	a := mustCall(t, hc, base, "read", "restart", obj{"file_path": crashFile, "limit": 1})
	require.Equal(t, 200, a.Status, a.Raw)
	require.Len(t, a.Metadata.Lines, 1)
	onDisk, err := os.ReadFile(filepath.Join(root, crashFile))
	require.NoError(t, err)
	head, _, _ := strings.Cut(string(onDisk), "\n")
	require.Equal(t, head, a.Metadata.Lines[0].Text, "the server shows the file on disk")
	m := crashHeader.FindStringSubmatch(a.Metadata.Lines[0].Text)
	require.NotNil(t, m, a.Metadata.Lines[0].Text)
	n, _ := strconv.Atoi(m[2])
	s := seq.Add(1)
	is.add(s, n, m[3])
	a = mustCall(t, hc, base, "edit", "restart", obj{"file_path": crashFile, "old_string": m[0], "new_string": crashHeaderLine(s, n, m[3])})
	require.Equal(t, 200, a.Status, a.Raw)
}

// verifyCrashFile checks the file on disk is one complete issued version,
// that nothing but the server's private folder stands beside it, and that
// its tmp folder holds only temporary files under their own names. It
// returns how many temporary files there are.
func verifyCrashFile(t *testing.T, root string, is *issued) (leftovers int) {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		require.Contains(t, []string{crashFile, ".toolfs-api"}, e.Name(), "nothing may be left beside the target")
	}
	entries, err = os.ReadDir(filepath.Join(root, ".toolfs-api", "tmp"))
	require.NoError(t, err)
	for _, e := range entries {
		require.Regexp(t, tempFile, e.Name(), "only temporary files may be left in the tmp folder")
		require.True(t, e.Type().IsRegular(), e.Name())
		leftovers++
	}
	data, err := os.ReadFile(filepath.Join(root, crashFile))
	require.NoError(t, err, "the target must survive every kill")
	head, body, ok := strings.Cut(string(data), "\n")
	require.True(t, ok, "torn or empty: %d bytes", len(data))
	m := crashHeader.FindStringSubmatch(head)
	require.NotNil(t, m, "no header: %.100q", head)
	seq, _ := strconv.ParseUint(m[1], 10, 64)
	n, _ := strconv.Atoi(m[2])
	sum := sha256.Sum256([]byte(body))
	assert.Equal(t, n, len(body), "body length of seq %d", seq)
	assert.Equal(t, m[3], hex.EncodeToString(sum[:]), "body checksum of seq %d", seq)
	assert.True(t, is.has(seq, n, m[3]), "seq %d was never sent with that body", seq)
	return leftovers
}
