package fs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// editChunk is how much of the file an edit holds at a time.
const editChunk = 256 << 10

// chunks and chunkWriters recycle the editChunk-sized buffers files are
// read and staged through: an edit reads its file twice and writes it once,
// and allocating them per call was most of a 60 KiB edit's garbage
// (docs/performance.md, "What profiling changed"). What is fed from a
// chunk is copied if kept: readChunks reuses its chunk for every read.
var (
	chunks       = sync.Pool{New: func() any { return new([editChunk]byte) }}
	chunkWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, editChunk) }}
)

var errChanged = errors.New("file changed during the edit")

// EditText applies a literal edit, or a batch; see FileSystem.EditText. Its
// steps, under the target's locks: open the file (openForEdit), check the
// version; then for one edit, with memory bounded for any file size: scan it
// once for the text checks and the match counts (scan), choose the literal
// or CRLF-adapted needle (chooseNeedle), rewrite it into a staged file with
// the matches replaced, copying every other byte exactly (rewriteInto,
// stageEdit), while the request's Keeper keeps the file (startKeeping);
// for a batch (editBatch): load the text, apply the edits in memory
// (applyEdits), stage it. Then let the Keeper prepare, check nothing
// changed the file meanwhile (revalidate), publish (publishEdit) and tell
// the Keeper. A dry run stops before staging (docs/edits.md).
func (l *Local) EditText(ctx context.Context, t Target, edit EditRequest, expected *Version) (EditOutcome, error) {
	unlock, err := l.lockTarget(ctx, t.Key)
	if err != nil {
		return EditOutcome{}, l.lockErr("edit", t.Display, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return EditOutcome{}, aborted("edit", err)
	}
	inMemory := edit.Batch != nil || edit.Rewrite != nil
	if !inMemory && edit.OldString == "" { // the caller validates; never loop on an empty needle
		return EditOutcome{}, fault.New(fault.CodeEditNotFound, "old_string must be a non-empty string")
	}

	o, err := l.openForEdit(t)
	if err != nil {
		return EditOutcome{}, err
	}
	defer o.close(l)
	version := versionOf(&o.st)
	if expected != nil && *expected != version && !sameBytes(ctx, o.f, edit.SeenHash) {
		return EditOutcome{}, staleEdit(t.Display)
	}
	if inMemory {
		return l.editBatch(ctx, o, t, edit, version)
	}
	sc, err := l.scan(ctx, o, edit.OldString, edit.NewString, t.Display, edit.Tolerant)
	if err != nil {
		return EditOutcome{}, err
	}
	m, err := chooseNeedle(sc, edit, t.Display)
	if err != nil {
		if edit.Tolerant && m != nil && m.count == 0 && o.st.Size <= BatchMaxBytes {
			return l.editTolerant(ctx, o, t, edit, version)
		}
		return EditOutcome{}, l.withHint(ctx, o, err, edit)
	}
	sc.sum = edit.Keeper != nil && !edit.DryRun
	fill := l.rewriteInto(ctx, o, m, sc)
	out := EditOutcome{Replacements: m.count, Version: version}
	var kp *keeping
	if edit.DryRun {
		if err := fill(io.Discard); err != nil {
			return EditOutcome{}, l.rewriteErr(err, t.Display)
		}
		if err := revalidate(o, version, t.Display); err != nil {
			return EditOutcome{}, err
		}
	} else {
		kp = startKeeping(ctx, edit.Keeper, Replaced{Path: l.relOf(t), Exists: true, Version: version, Size: o.st.Size, Mode: keptMode(&o.st), Content: o.f})
		defer kp.abandon() // before o.close: Keep reads the file
		tmp, err := l.stageEdit(o, fill, t.Display, kp != nil)
		if err != nil {
			return EditOutcome{}, err
		}
		defer tmp.discard()
		var sum [32]byte
		if sc.sum {
			sc.sha.Sum(sum[:0])
		}
		if out.Version, err = l.publishEdit(ctx, tmp, o, version, t.Display, kp, sum); err != nil {
			return EditOutcome{}, err
		}
		out.Hash, out.Size = hashOf(sc.hash), tmp.size
	}
	if sc.keepBasis {
		rb, ra := sc.before.String(), sc.after.String()
		b, a := NormalizeLF(rb), NormalizeLF(ra)
		out.Before, out.After, out.BeforeRaw, out.AfterRaw = &b, &a, &rb, &ra
	}
	kp.published(&Published{Version: out.Version, Before: out.Before, After: out.After})
	return out, nil
}

// publishEdit lets the Keeper prepare, checks that no writer outside our
// locks changed the file while the staged one was written, publishes it
// and reports its version.
func (l *Local) publishEdit(ctx context.Context, tmp *staged, o *opened, version Version, display string, kp *keeping, sum [32]byte) (Version, error) {
	if err := kp.prepare(ctx, "edit", display, &sum); err != nil {
		return "", err
	}
	if l.hooks.beforePublish != nil {
		l.hooks.beforePublish()
	}
	if err := revalidate(o, version, display); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", aborted("edit", err)
	}
	if err := tmp.publish(); err != nil {
		return "", l.fail("edit", display, err)
	}
	v, err := tmp.commitFor(kp)
	if err != nil {
		kp.published(&Published{}) // published, though its folder's sync failed
		return "", l.fail("edit", display, err)
	}
	o.closeFileLater()
	return v, nil
}

// openForEdit opens the target as read does; a missing target is stale,
// since the policy only lets an edit through after a read saw the file.
func (l *Local) openForEdit(t Target) (*opened, error) {
	o, err := l.openRegular(t, "edit", true)
	if err == errMissing {
		return nil, staleEdit(t.Display)
	}
	return o, err
}

// editScan is what one pass over the file learnt: the match counts of the
// literal needle and of its CRLF adaptation (alt, nil when the same) and,
// for a tolerant edit, its LF adaptation (lfAlt), the kinds of line ending
// the file has, and the diff basis while it stays below the limit.
type editScan struct {
	lit, alt, lfAlt *matcher
	hasCRLF, hasLF  bool
	keepBasis       bool
	size            int64
	before, after   strings.Builder
	hash            *xxh3.Hasher // of the rewritten content
	sum             bool         // sha too, for a Keeper
	sha             hash.Hash    // SHA-256 of the rewritten content, with sum
}

// scan checks the text (no NUL, valid UTF-8, runes split by a chunk
// boundary included) and counts both needles in one pass.
func (l *Local) scan(ctx context.Context, o *opened, old, newString, display string, tolerant bool) (*editScan, error) {
	sc := &editScan{lit: &matcher{needle: []byte(old)}, size: o.st.Size}
	if a := crlfAdapt(old); a != old {
		sc.alt = &matcher{needle: []byte(a)}
	}
	if a := NormalizeLF(old); tolerant && a != old {
		sc.lfAlt = &matcher{needle: []byte(a)}
	}
	// Whether the file has bare LF is asked only where it matters: the LF
	// retry, or a new_string with line endings to fit (a CRLF file is
	// one kind only if none of its lines ends in a bare LF: every line is
	// looked at).
	kinds := tolerant && (sc.lfAlt != nil || strings.ContainsAny(newString, "\r\n"))
	// The diff basis is gathered in builders sized up front: growing slices
	// to ~10 MiB by appending copied the file about eight times over, and
	// Builder.String does not copy again.
	sc.keepBasis = o.st.Size < l.diffMax
	if sc.keepBasis {
		sc.before.Grow(int(o.st.Size))
	}
	var text utf8Stream
	validUTF8, prevCR := true, false
	err := readChunks(ctx, o.f, func(chunk []byte) error {
		if bytes.IndexByte(chunk, 0) >= 0 {
			return fault.New(fault.CodeNotText, fmt.Sprintf(`cannot edit "%s": binary file`, display))
		}
		validUTF8 = validUTF8 && text.write(chunk)
		if !sc.hasCRLF {
			sc.hasCRLF = prevCR && chunk[0] == '\n' || bytes.Contains(chunk, []byte("\r\n"))
		}
		if kinds && !sc.hasLF {
			sc.hasLF = endingsAfter(chunk, prevCR).lf
		}
		prevCR = chunk[len(chunk)-1] == '\r'
		sc.lit.feed(chunk, false, nil)
		if sc.alt != nil {
			sc.alt.feed(chunk, false, nil)
		}
		if sc.lfAlt != nil {
			sc.lfAlt.feed(chunk, false, nil)
		}
		if sc.keepBasis {
			if sc.keepBasis = int64(sc.before.Len()+len(chunk)) < l.diffMax; sc.keepBasis {
				sc.before.Write(chunk)
			} else {
				sc.before = strings.Builder{}
			}
		}
		return nil
	})
	if err != nil {
		return nil, l.fail("edit", display, err)
	}
	if !validUTF8 || !text.close() {
		return nil, fault.New(fault.CodeNotText, fmt.Sprintf(`cannot edit "%s": invalid UTF-8 text`, display))
	}
	return sc, nil
}

// chooseNeedle picks the literal needle, or its CRLF adaptation when the
// literal bytes occur nowhere in a file with CRLF, or for a tolerant edit
// its LF adaptation in a file with bare LF (levels 0 and 1 of SPEC §25),
// and checks the count. The matcher it returns carries the replacement,
// fitted to a one-kind file's line endings when tolerant; on a failed
// count it is returned too, with the error.
func chooseNeedle(sc *editScan, edit EditRequest, display string) (*matcher, error) {
	k := endings{crlf: sc.hasCRLF, lf: sc.hasLF}
	pick := func(needle []byte, repl string, count int) *matcher {
		r := []byte(repl)
		if edit.Tolerant {
			r = fitEndings(r, k, needle[0] == '\n')
		}
		return &matcher{needle: needle, repl: r, count: count}
	}
	m := pick(sc.lit.needle, edit.NewString, sc.lit.count)
	if m.count == 0 && sc.hasCRLF && sc.alt != nil {
		m = pick(sc.alt.needle, crlfAdapt(edit.NewString), sc.alt.count)
	}
	if m.count == 0 && sc.hasLF && sc.lfAlt != nil {
		m = pick(sc.lfAlt.needle, NormalizeLF(edit.NewString), sc.lfAlt.count)
	}
	if err := checkCount(m.count, edit.ReplaceAll, display); err != nil {
		return m, err
	}
	return m, nil
}

// editTolerant is a single edit whose old_string occurs nowhere, even with
// its line endings adapted: the file (at most BatchMaxBytes) is loaded and
// the tolerant levels from LevelPrefixes on are tried (locate); a place
// found is published as a batch's result is.
func (l *Local) editTolerant(ctx context.Context, o *opened, t Target, edit EditRequest, version Version) (EditOutcome, error) {
	text, err := l.loadText(ctx, o, t.Display)
	if err != nil {
		return EditOutcome{}, err
	}
	work := TolerantWork
	res := locate(text, Edit{OldString: edit.OldString, NewString: edit.NewString, ReplaceAll: edit.ReplaceAll}, true, LevelPrefixes, &work)
	if err := checkCount(res.count, edit.ReplaceAll, t.Display); err != nil {
		if edit.Hints {
			err.Hint = hintOf(text, err.Code, edit.OldString, res)
		}
		return EditOutcome{}, err
	}
	if res.grew {
		return EditOutcome{}, fault.New(fault.CodeTooLarge, fmt.Sprintf(
			`cannot edit "%s": the edit would make the file larger than %d MiB, the most a tolerant edit holds in memory`, t.Display, BatchMaxBytes>>20))
	}
	tol := Tolerance{Level: res.level, Count: res.count, Places: res.places}
	return l.publishInMemory(ctx, o, t, edit, version, text, res.out, EditOutcome{Replacements: res.count, Tolerances: []Tolerance{tol}})
}

// rewriteInto is the fill of the staged file: it streams the file again
// with every match of m replaced, keeping the after side of the diff basis.
// A file whose match count changed meanwhile is errChanged. It may run
// more than once (a publication that meets EXDEV stages again).
func (l *Local) rewriteInto(ctx context.Context, o *opened, m *matcher, sc *editScan) func(io.Writer) error {
	grow := int64(m.count) * int64(max(len(m.repl)-len(m.needle), 0))
	return func(out io.Writer) error {
		sc.after = strings.Builder{} // a second run (EXDEV) starts again
		sc.hash = xxh3.New()
		if sc.sum {
			sc.sha = sha256.New()
		}
		if sc.keepBasis {
			sc.after.Grow(int(min(sc.size+grow, l.diffMax))) // the basis stops at diffMax
		}
		bw := chunkWriters.Get().(*bufio.Writer)
		bw.Reset(out)
		defer func() { bw.Reset(nil); chunkWriters.Put(bw) }()
		emit := func(b []byte) error {
			if sc.keepBasis {
				if sc.keepBasis = int64(sc.after.Len()+len(b)) < l.diffMax; sc.keepBasis {
					sc.after.Write(b)
				} else {
					sc.before, sc.after = strings.Builder{}, strings.Builder{}
				}
			}
			sc.hash.Write(b)
			if sc.sum {
				sc.sha.Write(b)
			}
			_, err := bw.Write(b)
			return err
		}
		pm := &matcher{needle: m.needle, repl: m.repl}
		if err := readChunks(ctx, o.f, func(chunk []byte) error { return pm.feed(chunk, false, emit) }); err != nil {
			return err
		}
		if err := pm.feed(nil, true, emit); err != nil {
			return err
		}
		if pm.count != m.count {
			return errChanged
		}
		return bw.Flush()
	}
}

// stageEdit writes the edited file (fill) into a staged file beside the
// target, keeping its mode and owner; with keeping, its sync runs while
// the Keeper prepares (stageSyncing).
func (l *Local) stageEdit(o *opened, fill func(io.Writer) error, display string, keeping bool) (*staged, error) {
	stage := l.stage
	if keeping {
		stage = l.stageSyncing
	}
	tmp, err := stage(o.w.dir, o.w.name, keptMode(&o.st), &o.st, fill)
	if err != nil {
		return nil, l.rewriteErr(err, display)
	}
	return tmp, nil
}

// rewriteErr maps a failed rewrite: a file that changed under us is stale.
func (l *Local) rewriteErr(err error, display string) error {
	if errors.Is(err, errChanged) {
		return staleEdit(display)
	}
	return l.fail("edit", display, err)
}

// revalidate checks that no writer outside our locks changed the file, or
// replaced it, while we streamed it.
func revalidate(o *opened, version Version, display string) error {
	var now unix.Stat_t
	if err := unix.Fstat(int(o.f.Fd()), &now); err != nil || versionOf(&now) != version {
		return staleEdit(display)
	}
	if cur, ok := statAt(o.w.dir, o.w.name); !ok || versionOf(&cur) != version {
		return staleEdit(display)
	}
	return nil
}

// readChunks feeds f from offset 0 to fn in editChunk pieces, checking ctx
// between them.
func readChunks(ctx context.Context, f *os.File, fn func([]byte) error) error {
	b := chunks.Get().(*[editChunk]byte)
	defer chunks.Put(b)
	buf := b[:]
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

func staleEdit(display string) *fault.Error { return StaleError("edit", display) }

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
