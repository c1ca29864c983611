package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// editBatch applies a batch of edits (EditRequest.Batch) to the opened
// file: load the text (loadText), apply the edits in memory (applyEdits),
// then, unless a dry run, stage and publish the result. Memory is bounded
// by BatchMaxBytes for the text before and after each edit.
func (l *Local) editBatch(ctx context.Context, o *opened, t Target, edit EditRequest, version Version) (EditOutcome, error) {
	if o.st.Size > BatchMaxBytes {
		return EditOutcome{}, tooLargeBatch(t.Display)
	}
	text, err := l.loadText(ctx, o, t.Display)
	if err != nil {
		return EditOutcome{}, err
	}
	after, count, err := applyEdits(text, edit.Batch, t.Display, edit.Hints)
	if err != nil {
		return EditOutcome{}, err
	}
	out := EditOutcome{Replacements: count, Version: version}
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
		}, t.Display)
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
		b, a := lfNormalizeString(rb), lfNormalizeString(ra)
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
// before, with one edit's rules: literal, non-overlapping, left to right;
// the CRLF-adapted needle when the literal one occurs nowhere and the text
// has CRLF; exactly one match unless ReplaceAll. It returns the new text
// and the replacements made, or the first failing edit's error prefixed
// "edit <i> of <n>: ". No intermediate text exceeds BatchMaxBytes.
func applyEdits(text []byte, edits []Edit, display string, hints bool) ([]byte, int, error) {
	total, binary := 0, false
	for i, e := range edits {
		prefix := "edit " + strconv.Itoa(i+1) + " of " + strconv.Itoa(len(edits)) + ": "
		if binary {
			// An earlier edit wrote a NUL: as a single edit would, refuse
			// to edit what is now a binary file.
			return nil, 0, fault.New(fault.CodeNotText, fmt.Sprintf(`%scannot edit "%s": binary file`, prefix, display))
		}
		needle, repl := []byte(e.OldString), []byte(e.NewString)
		n := bytes.Count(text, needle)
		if n == 0 && bytes.Contains(text, []byte("\r\n")) {
			if a := crlfAdapt(e.OldString); a != e.OldString {
				needle, repl = []byte(a), []byte(crlfAdapt(e.NewString))
				n = bytes.Count(text, needle)
			}
		}
		if err := checkCount(n, e.ReplaceAll, display); err != nil {
			if hints {
				err.Hint = hintFor(text, err.Code, e.OldString)
			}
			err.Message = prefix + err.Message
			return nil, 0, err
		}
		if int64(len(text))+int64(n)*int64(len(repl)-len(needle)) > BatchMaxBytes {
			return nil, 0, fault.New(fault.CodeTooLarge, fmt.Sprintf(
				`cannot edit "%s": the edits would make the file larger than %d MiB, the most a batch of edits holds in memory`, display, BatchMaxBytes>>20))
		}
		text = bytes.Replace(text, needle, repl, -1)
		total += n
		binary = bytes.IndexByte(repl, 0) >= 0
	}
	return text, total, nil
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

func tooLargeBatch(display string) *fault.Error {
	return fault.New(fault.CodeTooLarge, fmt.Sprintf(
		`cannot edit "%s": the file is larger than %d MiB, the most a batch of edits holds in memory; send the edits one at a time`, display, BatchMaxBytes>>20))
}
