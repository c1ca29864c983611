package fs

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/fault"
)

func TestEditText(t *testing.T) {
	tests := []struct {
		name, content string
		edit          EditRequest
		want          string
		wantN         int
		wantBefore    string
		wantAfter     string
		wantCode      fault.Code
		wantMsg       string
	}{
		{name: "unique match", content: "a b c", edit: EditRequest{OldString: "b", NewString: "B"},
			want: "a B c", wantN: 1, wantBefore: "a b c", wantAfter: "a B c"},
		{name: "CRLF-adapted retry", content: "one\r\ntwo\r\n", edit: EditRequest{OldString: "one\ntwo", NewString: "1\n2"},
			want: "1\r\n2\r\n", wantN: 1, wantBefore: "one\ntwo\n", wantAfter: "1\n2\n"},
		{name: "original CRLF round trip", content: "one\r\ntwo\r\n", edit: EditRequest{OldString: "two", NewString: "TWO"},
			want: "one\r\nTWO\r\n", wantN: 1},
		{name: "literal match wins over adaptation", content: "a\nb a\r\nb", edit: EditRequest{OldString: "a\nb", NewString: "X"},
			want: "X a\r\nb", wantN: 1},
		{name: "adaptation leaves existing CRLF in old_string alone", content: "x\r\ny\r\nz", edit: EditRequest{OldString: "x\r\ny\nz", NewString: "1\r\n2\n3"},
			want: "1\r\n2\r\n3", wantN: 1},
		{name: "BOM and mixed endings kept", content: "\ufeffhead\r\nmid\nlone\rtail\r\n", edit: EditRequest{OldString: "mid", NewString: "MID"},
			want: "\ufeffhead\r\nMID\nlone\rtail\r\n", wantN: 1, wantBefore: "\ufeffhead\nmid\nlone\rtail\n", wantAfter: "\ufeffhead\nMID\nlone\rtail\n"},
		{name: "replace all", content: "x.x.x", edit: EditRequest{OldString: "x", NewString: "yy", ReplaceAll: true},
			want: "yy.yy.yy", wantN: 3},
		{name: "non-overlapping left to right", content: "aaaa", edit: EditRequest{OldString: "aa", NewString: "b", ReplaceAll: true},
			want: "bb", wantN: 2},
		{name: "replacement is literal", content: "cost", edit: EditRequest{OldString: "cost", NewString: "$1 $& $$"},
			want: "$1 $& $$", wantN: 1},
		{name: "delete", content: "keep-drop-keep", edit: EditRequest{OldString: "-drop", NewString: ""},
			want: "keep-keep", wantN: 1},

		{name: "not found", content: "abc", edit: EditRequest{OldString: "zzz", NewString: "y"},
			wantCode: fault.CodeEditNotFound, wantMsg: `old_string was not found in "$P"`},
		{name: "bare LF file does not adapt", content: "one\ntwo", edit: EditRequest{OldString: "one\r\ntwo", NewString: "x"},
			wantCode: fault.CodeEditNotFound},
		{name: "ambiguous", content: "x x x", edit: EditRequest{OldString: "x", NewString: "y"},
			wantCode: fault.CodeAmbiguousEdit, wantMsg: `old_string matched 3 times in "$P"; provide a more specific old_string or set replace_all to true`},
		{name: "ambiguous after adaptation", content: "a\r\nb a\r\nb", edit: EditRequest{OldString: "a\nb", NewString: "y"},
			wantCode: fault.CodeAmbiguousEdit},
		{name: "binary", content: "abc\x00def", edit: EditRequest{OldString: "abc", NewString: "y"},
			wantCode: fault.CodeNotText, wantMsg: `cannot edit "$P": binary file`},
		{name: "invalid UTF-8", content: "caf\xe9 abc", edit: EditRequest{OldString: "abc", NewString: "y"},
			wantCode: fault.CodeNotText, wantMsg: `cannot edit "$P": invalid UTF-8 text`},
		{name: "truncated rune at the end", content: "abc \xe2\x82", edit: EditRequest{OldString: "abc", NewString: "y"},
			wantCode: fault.CodeNotText, wantMsg: `cannot edit "$P": invalid UTF-8 text`},
		{name: "empty old_string", content: "abc", edit: EditRequest{OldString: "", NewString: "y"},
			wantCode: fault.CodeEditNotFound, wantMsg: "old_string must be a non-empty string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "f.txt = "+tt.content)
			tg := f.resolve(t, "edit", "f.txt")
			out, err := f.l.EditText(context.Background(), tg, tt.edit, ptrV(f.version(t, tg)))
			if tt.wantCode != "" {
				requireCode(t, err, tt.wantCode, strings.ReplaceAll(tt.wantMsg, "$P", tg.Display))
				assert.Equal(t, tt.content, f.read(t, "f.txt"), "file touched by a failed edit")
				f.assertClean(t)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, f.read(t, "f.txt"))
			assert.Equal(t, tt.wantN, out.Replacements)
			assert.Equal(t, f.version(t, tg), out.Version)
			require.NotNil(t, out.Before)
			require.NotNil(t, out.After)
			if tt.wantBefore != "" {
				assert.Equal(t, tt.wantBefore, *out.Before)
				assert.Equal(t, tt.wantAfter, *out.After)
			}
			f.assertClean(t)
		})
	}
}

func ptrV(v Version) *Version { return &v }

func TestEditPreconditions(t *testing.T) {
	stale := Version("0:0:0:0:0")
	tests := []struct {
		name, path string
		expected   *Version
		old        string
		wantCode   fault.Code
		wantMsg    string
	}{
		{"missing, unguarded", "gone.txt", nil, "a", fault.CodeStaleVersion, `cannot edit "$ROOT/gone.txt": file changed since it was read`},
		{"missing, guarded", "gone.txt", &stale, "a", fault.CodeStaleVersion, `cannot edit "$ROOT/gone.txt": file changed since it was read`},
		{"dangling symlink", "dang", nil, "a", fault.CodeStaleVersion, ""},
		{"version checked before matching", "f.txt", &stale, "no such text", fault.CodeStaleVersion, `cannot edit "$ROOT/f.txt": file changed since it was read`},
		{"not found still enforced unguarded", "f.txt", nil, "no such text", fault.CodeEditNotFound, ""},
		{"folder", "dir", nil, "a", fault.CodeNotRegularFile, `cannot edit "$ROOT/dir": not a regular file`},
		{"FIFO answers at once", "pipe", nil, "a", fault.CodeNotRegularFile, `cannot edit "$ROOT/pipe": not a regular file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "f.txt = abc", "dir/", "pipe |", "dang => nothing")
			_, err := f.l.EditText(context.Background(), f.resolve(t, "edit", tt.path), EditRequest{OldString: tt.old, NewString: "z"}, tt.expected)
			requireCode(t, err, tt.wantCode, strings.ReplaceAll(tt.wantMsg, "$ROOT", f.root))
			assert.Equal(t, "abc", f.read(t, "f.txt"))
			f.assertClean(t)
		})
	}
}

func TestEditKeepsModeAndLink(t *testing.T) {
	f := newFixture(t, "real.txt = hello", "link.txt => real.txt")
	require.NoError(t, os.Chmod(f.path("real.txt"), 0o640))
	tg := f.resolve(t, "edit", "link.txt")
	_, err := f.l.EditText(context.Background(), tg, EditRequest{OldString: "hello", NewString: "bye"}, ptrV(f.version(t, tg)))
	require.NoError(t, err)
	fi, err := os.Lstat(f.path("link.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode().Type())
	fi, err = os.Stat(f.path("real.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode())
	assert.Equal(t, "bye", f.read(t, "real.txt"))

	// A successful edit refreshes the version: a follow-up edit proceeds.
	out, err := f.l.EditText(context.Background(), tg, EditRequest{OldString: "bye", NewString: "again"}, ptrV(f.version(t, tg)))
	require.NoError(t, err)
	_, err = f.l.EditText(context.Background(), tg, EditRequest{OldString: "again", NewString: "third"}, &out.Version)
	require.NoError(t, err)
	assert.Equal(t, "third", f.read(t, "real.txt"))
}

// Files larger than one chunk: matches straddling the 256 KiB boundary,
// runes split by it, and a NUL far past the first chunk.
func TestEditLargeFiles(t *testing.T) {
	pad := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name, content string
		edit          EditRequest
		want          string
		wantCode      fault.Code
	}{
		{name: "match straddles the boundary",
			content: pad(editChunk-3) + "NEEDLE" + pad(10),
			edit:    EditRequest{OldString: "NEEDLE", NewString: "pin"},
			want:    pad(editChunk-3) + "pin" + pad(10)},
		{name: "match ends exactly at the boundary",
			content: pad(editChunk-6) + "NEEDLE" + pad(10),
			edit:    EditRequest{OldString: "NEEDLE", NewString: "pin"},
			want:    pad(editChunk-6) + "pin" + pad(10)},
		{name: "CRLF-adapted match straddles the boundary",
			content: pad(editChunk-1) + "\r\nb\r\n",
			edit:    EditRequest{OldString: "a\nb", NewString: "x\ny"},
			want:    pad(editChunk-2) + "x\r\ny\r\n"},
		{name: "two matches, one across the boundary, are ambiguous",
			content:  "NEEDLE" + pad(editChunk-9) + "NEEDLE" + pad(3),
			edit:     EditRequest{OldString: "NEEDLE", NewString: "pin"},
			wantCode: fault.CodeAmbiguousEdit},
		{name: "rune split by the boundary is valid",
			content: pad(editChunk-1) + "€ NEEDLE",
			edit:    EditRequest{OldString: "NEEDLE", NewString: "pin"},
			want:    pad(editChunk-1) + "€ pin"},
		{name: "NUL in the third chunk",
			content:  "NEEDLE" + pad(2*editChunk+5) + "\x00",
			edit:     EditRequest{OldString: "NEEDLE", NewString: "pin"},
			wantCode: fault.CodeNotText},
		{name: "invalid UTF-8 in the second chunk",
			content:  "NEEDLE" + pad(editChunk) + "\xff",
			edit:     EditRequest{OldString: "NEEDLE", NewString: "pin"},
			wantCode: fault.CodeNotText},
		{name: "needle longer than a chunk",
			content: "<" + pad(editChunk+100) + ">",
			edit:    EditRequest{OldString: pad(editChunk + 100), NewString: "b"},
			want:    "<b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			require.NoError(t, os.WriteFile(f.path("big.txt"), []byte(tt.content), 0o644))
			_, err := f.l.EditText(context.Background(), f.resolve(t, "edit", "big.txt"), tt.edit, nil)
			if tt.wantCode != "" {
				requireCode(t, err, tt.wantCode, "")
				assert.Equal(t, tt.content, f.read(t, "big.txt"))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, f.read(t, "big.txt"))
			f.assertClean(t)
		})
	}
}

func TestEditDiffBasisLimit(t *testing.T) {
	f := newFixture(t, "small.txt = abc", "big.txt = abcdefgh", "grows.txt = ab")
	l, err := NewLocal(f.root, LocalOptions{DiffBasisMaxBytes: 8})
	require.NoError(t, err)
	defer l.Close()
	edit := func(path, old, new string) EditOutcome {
		out, err := l.EditText(context.Background(), f.resolve(t, "edit", path), EditRequest{OldString: old, NewString: new}, nil)
		require.NoError(t, err)
		return out
	}
	out := edit("small.txt", "b", "B")
	require.NotNil(t, out.Before)
	assert.Equal(t, "abc", *out.Before)
	assert.Equal(t, "aBc", *out.After)
	out = edit("big.txt", "b", "B")
	assert.Nil(t, out.Before, "file at the limit")
	assert.Nil(t, out.After)
	out = edit("grows.txt", "b", "bbbbbbbbbb")
	assert.Nil(t, out.Before, "edited text at the limit")
	assert.Nil(t, out.After)
	assert.Equal(t, "abbbbbbbbbb", f.read(t, "grows.txt"))
}

func TestEditExternalWriterDuringEdit(t *testing.T) {
	tests := []struct {
		name   string
		change func(p string) error
	}{
		{"rewritten in place", func(p string) error { return os.WriteFile(p, []byte("hello world!"), 0o644) }},
		{"replaced by rename", func(p string) error {
			tmp := p + ".x"
			if err := os.WriteFile(tmp, []byte("hello world"), 0o644); err != nil {
				return err
			}
			return os.Rename(tmp, p)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "f.txt = hello world")
			var once sync.Once
			f.l.hooks.beforePublish = func() { once.Do(func() { require.NoError(t, tt.change(f.path("f.txt"))) }) }
			_, err := f.l.EditText(context.Background(), f.resolve(t, "edit", "f.txt"), EditRequest{OldString: "world", NewString: "there"}, nil)
			requireCode(t, err, fault.CodeStaleVersion, "")
			assert.Contains(t, f.read(t, "f.txt"), "world", "the external change is kept")
			f.assertClean(t)
		})
	}
}

func TestEditCancelled(t *testing.T) {
	for _, early := range []bool{true, false} {
		t.Run("early="+strconv.FormatBool(early), func(t *testing.T) {
			f := newFixture(t, "f.txt = hello")
			ctx, cancel := context.WithCancel(context.Background())
			if early {
				cancel()
			} else {
				f.l.hooks.beforePublish = cancel
			}
			_, err := f.l.EditText(ctx, f.resolve(t, "edit", "f.txt"), EditRequest{OldString: "hello", NewString: "bye"}, nil)
			requireCode(t, err, fault.CodeAborted, "edit aborted")
			assert.Equal(t, "hello", f.read(t, "f.txt"))
			f.assertClean(t)
		})
	}
}

// counterRound reads the counter with its version, then asks to increment
// it guarded by that version. It reports whether the increment applied.
func counterRound(t *testing.T, l *Local, tg Target, useWrite bool) bool {
	r, info, err := l.OpenText(context.Background(), tg)
	require.NoError(t, err)
	text := readAll(t, r)
	n, err := strconv.Atoi(strings.TrimPrefix(text, "n="))
	require.NoError(t, err)
	next := "n=" + strconv.Itoa(n+1)
	if useWrite {
		_, err = l.WriteText(context.Background(), tg, next, &WriteIntent{Kind: ReplaceIfVersion, Version: info.Version})
	} else {
		_, err = l.EditText(context.Background(), tg, EditRequest{OldString: text, NewString: next}, &info.Version)
	}
	if err != nil {
		require.Equal(t, fault.CodeStaleVersion, fault.CodeOf(err), "%v", err)
		return false
	}
	return true
}

// No update is ever lost: concurrent guarded read-modify-write rounds,
// within one provider and across two providers on one root (as two server
// processes would: they share <root>/.toolfs-api/locks).
func TestNoLostUpdates(t *testing.T) {
	tests := []struct {
		name     string
		twoLocal bool
	}{
		{"one provider", false},
		{"two providers, shared lock files", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "n.txt = n=0")
			locals := []*Local{f.l}
			if tt.twoLocal {
				locals = nil
				for range 2 {
					l, err := NewLocal(f.root, LocalOptions{})
					require.NoError(t, err)
					t.Cleanup(func() { l.Close() })
					locals = append(locals, l)
				}
			}
			for _, l := range locals {
				// Widen the window between the last version check and the
				// rename, where only the locks protect us.
				l.hooks.beforeRename = func() { time.Sleep(time.Millisecond) }
			}
			tg := f.resolve(t, "edit", "n.txt")
			var applied atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					l := locals[g%len(locals)]
					for i := range 25 {
						if counterRound(t, l, tg, (g+i)%2 == 0) {
							applied.Add(1)
						}
					}
				})
			}
			wg.Wait()
			assert.Equal(t, "n="+strconv.FormatInt(applied.Load(), 10), f.read(t, "n.txt"))
			assert.Positive(t, applied.Load())
			for _, l := range locals {
				assert.Zero(t, l.locks.size())
			}
			f.assertClean(t)
			entries, err := os.ReadDir(f.root)
			require.NoError(t, err)
			require.Len(t, entries, 2, "temporary files left behind")
			assert.Equal(t, PrivateDir, entries[0].Name())
		})
	}
}

func TestLockMapBounded(t *testing.T) {
	f := newFixture(t, "f.txt = a")
	ctx := context.Background()
	for i := range 50 {
		tg := f.resolve(t, "write", "many/"+strconv.Itoa(i))
		_, err := f.l.WriteText(ctx, tg, "x", nil)
		require.NoError(t, err)
		_, err = f.l.EditText(ctx, tg, EditRequest{OldString: "nope", NewString: "y"}, nil)
		requireCode(t, err, fault.CodeEditNotFound, "")
	}
	assert.Zero(t, f.l.locks.size())

	// A waiter whose context ends gives up and leaves nothing behind.
	tg := f.resolve(t, "write", "f.txt")
	unlock, err := f.l.locks.lock(ctx, tg.Key)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = f.l.WriteText(cctx, tg, "x", nil)
	requireCode(t, err, fault.CodeAborted, "write aborted")
	unlock()
	assert.Zero(t, f.l.locks.size())
}

func TestMatcher(t *testing.T) {
	tests := []struct {
		name, text, needle, repl string
	}{
		{"none", "abcdef", "xyz", "-"},
		{"one", "abcdef", "cd", "-"},
		{"overlapping candidates", "aaaaaaa", "aaa", "b"},
		{"at both ends", "xyabcxy", "xy", ""},
		{"needle longer than text", "ab", "abc", "-"},
		{"prefix repeats", "ababababc", "ababc", "!"},
	}
	for _, tt := range tests {
		for size := 1; size <= len(tt.text)+1; size++ {
			t.Run(tt.name+"/chunk="+strconv.Itoa(size), func(t *testing.T) {
				got, count := streamReplace([]byte(tt.text), []byte(tt.needle), []byte(tt.repl), size)
				assert.Equal(t, strings.ReplaceAll(tt.text, tt.needle, tt.repl), string(got))
				assert.Equal(t, strings.Count(tt.text, tt.needle), count)
			})
		}
	}
}

func streamReplace(text, needle, repl []byte, size int) ([]byte, int) {
	var out bytes.Buffer
	m := &matcher{needle: needle, repl: repl}
	emit := func(b []byte) error { out.Write(b); return nil }
	for len(text) > 0 {
		n := min(size, len(text))
		_ = m.feed(text[:n], false, emit)
		text = text[n:]
	}
	_ = m.feed(nil, true, emit)
	return out.Bytes(), m.count
}

func FuzzMatcher(f *testing.F) {
	f.Add([]byte("aaaaaaa"), []byte("aaa"), []byte("b"), uint8(2))
	f.Add([]byte("one\r\ntwo"), []byte("\r\n"), []byte("\n"), uint8(1))
	f.Fuzz(func(t *testing.T, text, needle, repl []byte, size uint8) {
		if len(needle) == 0 || size == 0 {
			return
		}
		got, count := streamReplace(text, needle, repl, int(size))
		if want := bytes.ReplaceAll(text, needle, repl); !bytes.Equal(got, want) {
			t.Fatalf("streamed %q, want %q", got, want)
		}
		if want := bytes.Count(text, needle); count != want {
			t.Fatalf("count %d, want %d", count, want)
		}
	})
}

func FuzzUTF8Stream(f *testing.F) {
	f.Add([]byte("héllo €𝄞"), uint8(1))
	f.Add([]byte("abc\xe2\x82"), uint8(2))
	f.Add([]byte("\xed\xa0\x80"), uint8(1)) // a surrogate: invalid
	f.Fuzz(func(t *testing.T, text []byte, size uint8) {
		if size == 0 {
			return
		}
		var v utf8Stream
		ok := true
		for p := text; len(p) > 0; {
			n := min(int(size), len(p))
			ok = v.write(p[:n]) && ok
			p = p[n:]
		}
		ok = v.close() && ok
		if want := utf8.Valid(text); ok != want {
			t.Fatalf("streamed validity %v, want %v for %q in chunks of %d", ok, want, text, size)
		}
	})
}

func TestCRLFAdapt(t *testing.T) {
	tests := map[string]string{
		"":           "",
		"a":          "a",
		"\n":         "\r\n",
		"a\nb":       "a\r\nb",
		"a\r\nb\n":   "a\r\nb\r\n",
		"\r\n\n\r":   "\r\n\r\n\r",
		"\n\n":       "\r\n\r\n",
		"x\r\r\ny\n": "x\r\r\ny\r\n",
	}
	for in, want := range tests {
		assert.Equal(t, want, crlfAdapt(in), "%q", in)
	}
}
