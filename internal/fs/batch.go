package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// editBatch applies a batch of edits (EditRequest.Batch) or a Rewrite to
// the opened file: load the text (loadText), apply the edits in memory
// (applyEdits, or the Rewrite), then, unless a dry run, stage and publish
// the result. Memory is bounded by BatchMaxBytes for the text before and
// after each edit.
func (l *Local) editBatch(ctx context.Context, o *opened, t Target, edit EditRequest, version Version) (EditOutcome, error) {
	if o.st.Size > BatchMaxBytes {
		if edit.Rewrite != nil {
			return EditOutcome{}, tooLargeRewrite(t.Display, "file is")
		}
		return EditOutcome{}, tooLargeBatch(t.Display)
	}
	text, err := l.loadText(ctx, o, t.Display)
	if err != nil {
		return EditOutcome{}, err
	}
	var after []byte
	var tols []Tolerance
	count := 1
	if edit.Rewrite != nil {
		if after, err = edit.Rewrite(text); err != nil {
			return EditOutcome{}, err
		}
		if len(after) > BatchMaxBytes {
			return EditOutcome{}, tooLargeRewrite(t.Display, "edits would make the file")
		}
	} else if after, count, tols, err = applyEdits(text, edit.Batch, t.Display, edit.Hints, edit.Tolerant); err != nil {
		return EditOutcome{}, err
	}
	return l.publishInMemory(ctx, o, t, edit, version, text, after, EditOutcome{Replacements: count, Tolerances: tols})
}

// publishInMemory stages and publishes after, the edited text, in place of
// text (unless a dry run), and fills out's version, hash, size and diff
// bases: the end of a batch, and of a single edit found at a tolerant level.
func (l *Local) publishInMemory(ctx context.Context, o *opened, t Target, edit EditRequest, version Version, text, after []byte, out EditOutcome) (EditOutcome, error) {
	out.Version = version
	var kp *keeping
	if edit.DryRun {
		if err := revalidate(o, version, t.Display); err != nil {
			return EditOutcome{}, err
		}
	} else {
		kp = startKeeping(ctx, edit.Keeper, Replaced{Path: l.relOf(t), Exists: true, Version: version, Size: o.st.Size, Mode: keptMode(&o.st), Content: o.f})
		defer kp.abandon() // before o.close: Keep reads the file
		tmp, err := l.stageEdit(o, func(w io.Writer) error {
			_, err := w.Write(after)
			return err
		}, t.Display, kp != nil)
		if err != nil {
			return EditOutcome{}, err
		}
		defer tmp.discard()
		var sum [32]byte
		if kp != nil {
			sum = sha256.Sum256(after)
		}
		if out.Version, err = l.publishEdit(ctx, tmp, o, version, t.Display, kp, sum); err != nil {
			return EditOutcome{}, err
		}
		out.Hash, out.Size = HashBytes(after), int64(len(after))
	}
	if int64(len(text)) < l.diffMax && int64(len(after)) < l.diffMax {
		rb, ra := string(text), string(after)
		b, a := NormalizeLF(rb), NormalizeLF(ra)
		out.Before, out.After, out.BeforeRaw, out.AfterRaw = &b, &a, &rb, &ra
	}
	kp.published(&Published{Version: out.Version, Before: out.Before, After: out.After})
	return out, nil
}

// loadText reads the whole opened file (at most BatchMaxBytes) and checks
// it is text, with the messages of a single edit.
func (l *Local) loadText(ctx context.Context, o *opened, display string) ([]byte, error) {
	buf := make([]byte, 0, o.st.Size)
	err := readChunks(ctx, o.f, func(chunk []byte) error {
		if len(buf)+len(chunk) > BatchMaxBytes {
			return tooLargeBatch(display) // it grew since the open
		}
		buf = append(buf, chunk...)
		return nil
	})
	if err != nil {
		return nil, l.fail("edit", display, err)
	}
	if bytes.IndexByte(buf, 0) >= 0 {
		return nil, fault.New(fault.CodeNotText, fmt.Sprintf(`cannot edit "%s": binary file`, display))
	}
	if !utf8.Valid(buf) {
		return nil, fault.New(fault.CodeNotText, fmt.Sprintf(`cannot edit "%s": invalid UTF-8 text`, display))
	}
	return buf, nil
}

// applyEdits applies edits in order, each to the result of the ones
// before, with one edit's rules (locate: literal, non-overlapping, left to
// right; then, when tolerant, the levels of SPEC §25; exactly one place
// unless ReplaceAll). It returns the new text, the replacements made and
// the edits found at a disclosed level, or the first failing edit's error
// prefixed "edit <i> of <n>: ". No intermediate text exceeds BatchMaxBytes.
func applyEdits(text []byte, edits []Edit, display string, hints, tolerant bool) ([]byte, int, []Tolerance, error) {
	total, binary, work := 0, false, TolerantWork
	var tols []Tolerance
	for i, e := range edits {
		prefix := "edit " + strconv.Itoa(i+1) + " of " + strconv.Itoa(len(edits)) + ": "
		if binary {
			// An earlier edit wrote a NUL: as a single edit would, refuse
			// to edit what is now a binary file.
			return nil, 0, nil, fault.New(fault.CodeNotText, fmt.Sprintf(`%scannot edit "%s": binary file`, prefix, display))
		}
		res := locate(text, e, tolerant, LevelLiteral, &work)
		if err := checkCount(res.count, e.ReplaceAll, display); err != nil {
			if hints {
				err.Hint = hintOf(text, err.Code, e.OldString, res)
			}
			err.Message = prefix + err.Message
			return nil, 0, nil, err
		}
		if res.grew {
			return nil, 0, nil, fault.New(fault.CodeTooLarge, fmt.Sprintf(
				`cannot edit "%s": the edits would make the file larger than %d MiB, the most a batch of edits holds in memory`, display, BatchMaxBytes>>20))
		}
		if res.level >= LevelPrefixes {
			tols = append(tols, Tolerance{Item: i + 1, Level: res.level, Count: res.count, Places: res.places})
		}
		text = res.out
		total += res.count
		binary = strings.IndexByte(e.NewString, 0) >= 0
	}
	return text, total, tols, nil
}

// hintOf is the hint of a failed locate: the most similar region of a
// miss, or the first lines of an ambiguous edit's places.
func hintOf(text []byte, code fault.Code, old string, res located) *fault.Hint {
	if code != fault.CodeAmbiguousEdit {
		return hintFor(text, code, old)
	}
	starts := make([]int, len(res.places))
	for i, p := range res.places {
		starts[i] = p[0]
	}
	return &fault.Hint{MatchLines: starts}
}

// checkCount is one edit's rule on its number of matches.
func checkCount(n int, replaceAll bool, display string) *fault.Error {
	switch {
	case n == 0:
		return fault.New(fault.CodeEditNotFound, fmt.Sprintf(`old_string was not found in "%s"`, display))
	case n > 1 && !replaceAll:
		return fault.New(fault.CodeAmbiguousEdit, fmt.Sprintf(
			`old_string matched %d times in "%s"; provide a more specific old_string or set replace_all to true`, n, display))
	}
	return nil
}

// tooLargeRewrite refuses a Rewrite (edit_lines) of a file too large to
// hold: what is (the "file is", or the "edits would make the file") larger.
func tooLargeRewrite(display, what string) *fault.Error {
	return fault.New(fault.CodeTooLarge, fmt.Sprintf(
		`cannot edit "%s": the %s larger than %d MiB, the most an edit by line anchors holds in memory`, display, what, BatchMaxBytes>>20))
}

func tooLargeBatch(display string) *fault.Error {
	return fault.New(fault.CodeTooLarge, fmt.Sprintf(
		`cannot edit "%s": the file is larger than %d MiB, the most a batch of edits holds in memory; send the edits one at a time`, display, BatchMaxBytes>>20))
}
