package patch

import (
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
)

// Operation is one operation of the Responses API's apply_patch_call
// (SPEC §25): Type "create_file" (Diff: the new file's lines, each after
// "+"), "update_file" (Diff: V4A hunks, as an Update's) or "delete_file"
// (Diff ignored).
type Operation struct {
	Type string
	Path string
	Diff string
}

// The operation types of the Responses API.
const (
	TypeCreate = "create_file"
	TypeUpdate = "update_file"
	TypeDelete = "delete_file"
)

// The argument messages of operations (docs/edits.md, "apply_patch").
const (
	msgOpsCount = "operations must contain between 1 and 1000 operations"
)

func msgOpType(i int) string {
	return "operations[" + strconv.Itoa(i) + "].type must be one of create_file, update_file, delete_file"
}

func msgOpPath(i int) string {
	return "operations[" + strconv.Itoa(i) + "].path must be a non-empty string"
}

// opError is a parse error of operation i's diff at its line n (0: the
// diff as a whole): "invalid patch: operations[<i>].diff line <n>: <reason>".
func opError(i, n int, reason string) *fault.Error {
	at := "operations[" + strconv.Itoa(i) + "].diff"
	if n > 0 {
		at += " line " + strconv.Itoa(n)
	}
	return fault.New(fault.CodeInvalidArgument, "invalid patch: "+at+": "+reason)
}

// FromOperations turns the operations into one patch, applied as one
// (SPEC §25): each is a File whose Line is its index. A create_file's
// content is its lines joined as OpenAI's Agents SDK joins them (by "\n",
// or "\r\n" when the diff has it; a final "+" line alone gives the final
// newline); an update_file's diff is read as an Update's hunks.
func FromOperations(ops []Operation) (*Patch, error) {
	if len(ops) == 0 || len(ops) > MaxFiles {
		return nil, fault.New(fault.CodeInvalidArgument, msgOpsCount)
	}
	p := &Patch{}
	names := map[string]bool{}
	size, hunks := 0, 0
	for i, o := range ops {
		if o.Path == "" {
			return nil, fault.New(fault.CodeInvalidArgument, msgOpPath(i))
		}
		if strings.IndexByte(o.Path, 0) >= 0 {
			return nil, fault.New(fault.CodeInvalidArgument, "operations["+strconv.Itoa(i)+"].path must not contain a NUL byte")
		}
		if size += len(o.Diff) + len(o.Path); size > MaxBytes {
			return nil, opError(i, 0, reasonTooLarge)
		}
		f := File{Path: o.Path, Line: i}
		switch o.Type {
		case TypeCreate:
			c, err := createContent(i, o.Diff)
			if err != nil {
				return nil, err
			}
			f.Op, f.Content = OpAdd, c
		case TypeDelete:
			f.Op = OpDelete
		case TypeUpdate:
			r := hunkReader{limit: MaxHunks - hunks, errLine: func(n int, reason string) *fault.Error { return opError(i, n, reason) }}
			for _, l := range splitLines(o.Diff) {
				if err := r.read(l); err != nil {
					return nil, err
				}
			}
			hs, err := r.close()
			if err != nil {
				return nil, err
			}
			if len(hs) == 0 {
				return nil, opError(i, 0, `the update of `+quote(o.Path)+` has no hunk`)
			}
			hunks += len(hs)
			f.Op, f.Hunks = OpUpdate, hs
		default:
			return nil, fault.New(fault.CodeInvalidArgument, msgOpType(i))
		}
		if k := sameName(o.Path); names[k] {
			return nil, fault.New(fault.CodeInvalidArgument, "invalid patch: operations["+strconv.Itoa(i)+"].path: "+reasonTwice(o.Path))
		} else {
			names[k] = true
		}
		p.Files = append(p.Files, f)
	}
	return p, nil
}

// createContent is a create_file diff's content (see FromOperations).
func createContent(i int, diff string) (string, error) {
	nl := "\n"
	if strings.Contains(diff, "\r\n") {
		nl = "\r\n"
	}
	lines := splitLines(diff)
	parts := make([]string, 0, len(lines))
	for _, l := range lines {
		if !strings.HasPrefix(l.text, "+") {
			return "", opError(i, l.n, reasonAddLine)
		}
		parts = append(parts, l.text[1:])
	}
	return strings.Join(parts, nl), nil
}
