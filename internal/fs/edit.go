package fs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// editChunk is how much of the file an edit holds at a time.
const editChunk = 256 << 10

var errChanged = errors.New("file changed during the edit")

// EditText applies a literal edit; see FileSystem.EditText. Memory stays
// bounded for any file size: one pass checks the text and counts matches,
// a second streams the file into the temporary file with the matched spans
// replaced, copying every other byte exactly (BOM, mixed line endings, lone
// CR). The diff basis is kept only below the diff-basis limit.
func (l *Local) EditText(ctx context.Context, t Target, edit EditRequest, expected *Version) (EditOutcome, error) {
	unlock, err := l.lockTarget(ctx, t.Key)
	if err != nil {
		return EditOutcome{}, l.lockErr("edit", t.Display, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return EditOutcome{}, aborted("edit", err)
	}
	if edit.OldString == "" { // the caller validates; never loop on an empty needle
		return EditOutcome{}, NewError(CodeEditNotFound, "old_string must be a non-empty string")
	}

	w, err := l.walkTarget(t, false)
	if errors.Is(err, errNotDir) {
		return EditOutcome{}, staleEdit(t.Display)
	}
	if err != nil {
		return EditOutcome{}, l.fail("edit", t.Display, err)
	}
	defer w.close(l)
	if w.kind != walkFound {
		return EditOutcome{}, staleEdit(t.Display)
	}
	if !isRegular(&w.st) {
		return EditOutcome{}, notRegular("edit", t.Display)
	}
	fd, err := unix.Openat(w.dir, w.name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NOCTTY, 0)
	switch err {
	case nil:
	case unix.ENOENT:
		return EditOutcome{}, staleEdit(t.Display)
	case unix.ELOOP:
		return EditOutcome{}, notRegular("edit", t.Display)
	default:
		return EditOutcome{}, l.fail("edit", t.Display, err)
	}
	f := os.NewFile(uintptr(fd), w.name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return EditOutcome{}, l.fail("edit", t.Display, err)
	}
	if !isRegular(&st) {
		return EditOutcome{}, notRegular("edit", t.Display)
	}
	version := versionOf(&st)
	if expected != nil && *expected != version {
		return EditOutcome{}, staleEdit(t.Display)
	}

	// Pass 1: text checks and match counts, for the literal needle and for
	// its CRLF adaptation at once.
	lit := &matcher{needle: []byte(edit.OldString)}
	var alt *matcher
	if a := crlfAdapt(edit.OldString); a != edit.OldString {
		alt = &matcher{needle: []byte(a)}
	}
	// The diff basis is gathered in builders sized up front: growing slices
	// to ~10 MiB by appending copied the file about eight times over, and
	// Builder.String does not copy again.
	keepBasis := st.Size < l.diffMax
	var before, after strings.Builder
	if keepBasis {
		before.Grow(int(st.Size))
	}
	var text utf8Stream
	validUTF8, hasCRLF, prevCR := true, false, false
	err = readChunks(ctx, f, func(chunk []byte) error {
		if bytes.IndexByte(chunk, 0) >= 0 {
			return NewError(CodeNotText, fmt.Sprintf(`cannot edit "%s": binary file`, t.Display))
		}
		validUTF8 = validUTF8 && text.write(chunk)
		if !hasCRLF {
			hasCRLF = prevCR && chunk[0] == '\n' || bytes.Contains(chunk, []byte("\r\n"))
			prevCR = chunk[len(chunk)-1] == '\r'
		}
		lit.feed(chunk, false, nil)
		if alt != nil {
			alt.feed(chunk, false, nil)
		}
		if keepBasis {
			if keepBasis = int64(before.Len()+len(chunk)) < l.diffMax; keepBasis {
				before.Write(chunk)
			} else {
				before = strings.Builder{}
			}
		}
		return nil
	})
	if err != nil {
		return EditOutcome{}, l.fail("edit", t.Display, err)
	}
	if !validUTF8 || !text.close() {
		return EditOutcome{}, NewError(CodeNotText, fmt.Sprintf(`cannot edit "%s": invalid UTF-8 text`, t.Display))
	}
	m, repl := lit, []byte(edit.NewString)
	if lit.count == 0 && hasCRLF && alt != nil {
		m, repl = alt, []byte(crlfAdapt(edit.NewString))
	}
	switch {
	case m.count == 0:
		return EditOutcome{}, NewError(CodeEditNotFound, fmt.Sprintf(`old_string was not found in "%s"`, t.Display))
	case m.count > 1 && !edit.ReplaceAll:
		return EditOutcome{}, NewError(CodeAmbiguousEdit, fmt.Sprintf(
			`old_string matched %d times in "%s"; provide a more specific old_string or set replace_all to true`, m.count, t.Display))
	}

	// Pass 2: stream the edited bytes into the temporary file.
	if keepBasis {
		grow := int64(m.count) * int64(max(len(repl)-len(m.needle), 0))
		after.Grow(int(min(st.Size+grow, l.diffMax))) // the basis stops at diffMax
	}
	tmp, err := l.stage(w.dir, w.name, keptMode(&st), &st, func(out io.Writer) error {
		after.Reset() // a second run (EXDEV) starts again
		bw := bufio.NewWriterSize(out, editChunk)
		emit := func(b []byte) error {
			if keepBasis {
				if keepBasis = int64(after.Len()+len(b)) < l.diffMax; keepBasis {
					after.Write(b)
				} else {
					before, after = strings.Builder{}, strings.Builder{}
				}
			}
			_, err := bw.Write(b)
			return err
		}
		pm := &matcher{needle: m.needle, repl: repl}
		if err := readChunks(ctx, f, func(chunk []byte) error { return pm.feed(chunk, false, emit) }); err != nil {
			return err
		}
		if err := pm.feed(nil, true, emit); err != nil {
			return err
		}
		if pm.count != m.count {
			return errChanged
		}
		return bw.Flush()
	})
	if errors.Is(err, errChanged) {
		return EditOutcome{}, staleEdit(t.Display)
	}
	if err != nil {
		return EditOutcome{}, l.fail("edit", t.Display, err)
	}
	defer tmp.discard()
	if l.hooks.beforePublish != nil {
		l.hooks.beforePublish()
	}

	// A writer outside our lock may have changed the file, or replaced it,
	// while we streamed it.
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil || versionOf(&now) != version {
		return EditOutcome{}, staleEdit(t.Display)
	}
	if cur, ok := statAt(w.dir, w.name); !ok || versionOf(&cur) != version {
		return EditOutcome{}, staleEdit(t.Display)
	}
	if err := ctx.Err(); err != nil {
		return EditOutcome{}, aborted("edit", err)
	}
	if err := tmp.publish(); err != nil {
		return EditOutcome{}, l.fail("edit", t.Display, err)
	}
	out := EditOutcome{Replacements: m.count}
	if out.Version, err = tmp.commit(); err != nil {
		return EditOutcome{}, l.fail("edit", t.Display, err)
	}
	if keepBasis {
		b, a := lfNormalizeString(before.String()), lfNormalizeString(after.String())
		out.Before, out.After = &b, &a
	}
	return out, nil
}

// readChunks feeds f from offset 0 to fn in editChunk pieces, checking ctx
// between them.
func readChunks(ctx context.Context, f *os.File, fn func([]byte) error) error {
	buf := make([]byte, editChunk)
	for off := int64(0); ; {
		if err := ctx.Err(); err != nil {
			return aborted("edit", err)
		}
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			if ferr := fn(buf[:n]); ferr != nil {
				return ferr
			}
			off += int64(n)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func staleEdit(display string) *Error {
	return NewError(CodeStaleVersion, fmt.Sprintf(`cannot edit "%s": file changed since it was read`, display))
}

// crlfAdapt turns every bare "\n" (one not already after "\r") into "\r\n".
func crlfAdapt(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' && (i == 0 || s[i-1] != '\r') {
			if b == nil {
				b = append(make([]byte, 0, len(s)+8), s[:i]...)
			}
			b = append(b, '\r', '\n')
		} else if b != nil {
			b = append(b, s[i])
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}

// matcher finds the non-overlapping, left-to-right occurrences of needle in
// a stream fed in chunks of any size, and can emit the stream with each one
// replaced by repl. It holds back at most len(needle)-1 undecided bytes.
type matcher struct {
	needle, repl []byte
	count        int
	pending      []byte // a tail that may begin an occurrence
	scratch      []byte
}

// feed consumes p (final: no more input follows), passing the output to
// emit when emit is not nil.
func (m *matcher) feed(p []byte, final bool, emit func([]byte) error) error {
	n, data, start := len(m.needle), p, 0
	switch {
	case len(m.pending) == 0:
	case len(p) >= n-1:
		// Only an occurrence that starts in the held-back tail needs the
		// two joined, and it ends within n-1 bytes of p: look there, then
		// go on in p itself rather than copying every chunk.
		m.scratch = append(append(m.scratch[:0], m.pending...), p[:n-1]...)
		if j := bytes.Index(m.scratch, m.needle); j >= 0 && j < len(m.pending) {
			m.count++
			if emit != nil {
				if err := emit(m.pending[:j]); err != nil {
					return err
				}
				if err := emit(m.repl); err != nil {
					return err
				}
			}
			start = j + n - len(m.pending)
		} else if emit != nil {
			if err := emit(m.pending); err != nil {
				return err
			}
		}
	default: // p is too short to decide: join them
		m.scratch = append(append(m.scratch[:0], m.pending...), p...)
		data = m.scratch
	}
	for {
		j := bytes.Index(data[start:], m.needle)
		if j < 0 {
			break
		}
		j += start
		m.count++
		if emit != nil {
			if err := emit(data[start:j]); err != nil {
				return err
			}
			if err := emit(m.repl); err != nil {
				return err
			}
		}
		start = j + n
	}
	keep := 0
	if !final {
		keep = min(n-1, len(data)-start)
	}
	if emit != nil && len(data)-keep > start {
		if err := emit(data[start : len(data)-keep]); err != nil {
			return err
		}
	}
	m.pending = append(m.pending[:0], data[len(data)-keep:]...)
	return nil
}

// utf8Stream validates UTF-8 split at arbitrary chunk boundaries. Once
// invalid, it stays invalid.
type utf8Stream struct {
	tail [utf8.UTFMax]byte
	n    int
	bad  bool
}

// write reports whether the stream so far, p included, is valid UTF-8.
func (v *utf8Stream) write(p []byte) bool {
	if v.bad {
		return false
	}
	for v.n > 0 && len(p) > 0 { // complete the rune split by the last boundary
		v.tail[v.n] = p[0]
		v.n++
		p = p[1:]
		if utf8.FullRune(v.tail[:v.n]) {
			r, size := utf8.DecodeRune(v.tail[:v.n])
			v.n = 0
			if r == utf8.RuneError && size == 1 {
				v.bad = true
				return false
			}
		}
	}
	if len(p) == 0 {
		return true
	}
	// Hold back an incomplete rune at the end.
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				v.n = copy(v.tail[:], p[i:])
				p = p[:i]
			}
			break
		}
	}
	v.bad = !utf8.Valid(p)
	return !v.bad
}

// close reports whether the whole stream was valid and did not end inside a
// rune.
func (v *utf8Stream) close() bool { return !v.bad && v.n == 0 }
