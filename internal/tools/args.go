package tools

import (
	"math"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/render"
)

// Argument messages the original does not have; ours, in its style
// (docs/api.md, "Errors").
const (
	msgContent     = "content must be a string"
	msgNewString   = "new_string must be a string"
	msgReplaceAll  = "replace_all must be a boolean"
	msgPattern     = "pattern must be a non-empty string"
	msgPath        = "path must be a non-empty string when given"
	msgInclude     = "include must be a non-empty glob when given"
	msgFilePathNUL = "file_path must not contain a NUL byte"
	msgDryRun      = "dry_run must be a boolean"
	msgEditsType   = "edits must be an array of {old_string, new_string, replace_all} objects"
)

// Argument messages of a batch edit (docs/edits.md); items are named by
// their 0-based JSON path.
const (
	msgBothForms  = "provide either old_string and new_string, or edits, not both"
	msgEditsCount = "edits must contain between 1 and 100 edits"
	// MaxEdits is the most edits one call may carry.
	MaxEdits = 100
)

// Arguments are checked in two passes, as the contract's schema and then
// the original's checks did: first every member's JSON type (and a number's
// minimum of 1), in the tool's parameter order, then the values in the same
// order. So {"file_path": "", "offset": "x"} reports offset, the first type
// error, while {"file_path": "", "offset": 1.5} reports file_path.

type readArgs struct {
	path          string
	offset, limit int
}

func (x *Executor) readArgs(raw []byte) (readArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return readArgs{}, err
	}
	path, _, pathOK := a.str("file_path")
	offset, hasOffset, offsetOK := a.number("offset")
	limit, hasLimit, limitOK := a.number("limit")
	switch {
	case !pathOK:
		return readArgs{}, argError(render.MsgFilePath)
	case hasOffset && !offsetOK:
		return readArgs{}, argError(render.MsgOffset)
	case hasLimit && !limitOK:
		return readArgs{}, argError(render.MsgLimit)
	}
	if err := checkFilePath(path); err != nil {
		return readArgs{}, err
	}
	r := readArgs{path: path, offset: 1, limit: x.caps.Limit}
	if hasOffset {
		if r.offset, err = positiveInt(offset, render.MsgOffset); err != nil {
			return readArgs{}, err
		}
	}
	if hasLimit {
		if r.limit, err = positiveInt(limit, render.MsgLimit); err != nil {
			return readArgs{}, err
		}
		if r.limit > x.caps.Limit {
			return readArgs{}, argError(render.MsgLimitMax(x.caps.Limit))
		}
	}
	return r, nil
}

type writeArgs struct {
	path    string // file_path as sent: diffs name it so
	content string
	dryRun  bool
	esc     escalation
}

func writeArgsOf(raw []byte) (writeArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return writeArgs{}, err
	}
	path, _, pathOK := a.str("file_path")
	content, _, contentOK := a.str("content")
	dryRun, hasDry, dryOK := a.boolean("dry_run")
	switch {
	case !pathOK:
		return writeArgs{}, argError(render.MsgFilePath)
	case !contentOK:
		return writeArgs{}, argError(msgContent)
	case hasDry && !dryOK:
		return writeArgs{}, argError(msgDryRun)
	}
	if err := checkFilePath(path); err != nil {
		return writeArgs{}, err
	}
	return writeArgs{path: path, content: content, dryRun: dryRun, esc: escalationOf(a)}, nil
}

type editArgs struct {
	path, oldString, newString string
	replaceAll                 bool
	batch                      []fs.Edit // nil: the single form
	dryRun                     bool
	esc                        escalation
}

func editArgsOf(raw []byte) (editArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return editArgs{}, err
	}
	var e editArgs
	var pathOK, hasOld, oldOK, hasNew, newOK, hasAll, allOK, hasDry, dryOK bool
	e.path, _, pathOK = a.str("file_path")
	e.oldString, hasOld, oldOK = a.str("old_string")
	e.newString, hasNew, newOK = a.str("new_string")
	e.replaceAll, hasAll, allOK = a.boolean("replace_all")
	edits := a.get("edits")
	e.dryRun, hasDry, dryOK = a.boolean("dry_run")
	e.esc = escalationOf(a)
	switch {
	case !pathOK:
		return editArgs{}, argError(render.MsgFilePath)
	case edits == nil && !oldOK, hasOld && !oldOK:
		return editArgs{}, argError(render.MsgOldString)
	case edits == nil && !newOK, hasNew && !newOK:
		return editArgs{}, argError(msgNewString)
	case hasAll && !allOK:
		return editArgs{}, argError(msgReplaceAll)
	case edits != nil && edits[0] != '[':
		return editArgs{}, argError(msgEditsType)
	case hasDry && !dryOK:
		return editArgs{}, argError(msgDryRun)
	}
	if err := checkFilePath(e.path); err != nil {
		return editArgs{}, err
	}
	if edits != nil {
		// A replace_all of true beside edits would be silently ignored, so
		// it counts as the other form too (docs/edits.md).
		if hasOld || hasNew || e.replaceAll {
			return editArgs{}, argError(msgBothForms)
		}
		if e.batch, err = editItemsOf(edits); err != nil {
			return editArgs{}, err
		}
		return e, nil
	}
	switch {
	case e.oldString == "":
		return editArgs{}, argError(render.MsgOldString)
	case e.oldString == e.newString:
		return editArgs{}, argError(render.MsgStringsEqual)
	}
	return e, nil
}

// editItemsOf checks the items of edits (a JSON array) in order, each with
// a single edit's checks, named by its JSON path.
func editItemsOf(raw []byte) ([]fs.Edit, *fault.Error) {
	var items [][]byte
	for i := skipSpace(raw, 1); i < len(raw) && raw[i] != ']'; {
		end := valueEnd(raw, i)
		if len(items) == MaxEdits {
			return nil, argError(msgEditsCount)
		}
		items = append(items, raw[i:end])
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	if len(items) == 0 {
		return nil, argError(msgEditsCount)
	}
	out := make([]fs.Edit, 0, len(items))
	for i, item := range items {
		at := "edits[" + strconv.Itoa(i) + "]"
		if item[0] != '{' {
			return nil, argError(at + " must be an object with old_string and new_string")
		}
		a, err := decodeArgs(item)
		if err != nil {
			return nil, argError(at + ": " + err.Message)
		}
		var e fs.Edit
		var oldOK, newOK, hasAll, allOK bool
		e.OldString, _, oldOK = a.str("old_string")
		e.NewString, _, newOK = a.str("new_string")
		e.ReplaceAll, hasAll, allOK = a.boolean("replace_all")
		switch {
		case !oldOK || e.OldString == "":
			return nil, argError(at + "." + render.MsgOldString)
		case !newOK:
			return nil, argError(at + "." + msgNewString)
		case hasAll && !allOK:
			return nil, argError(at + "." + msgReplaceAll)
		case e.OldString == e.NewString:
			return nil, argError(at + "." + render.MsgStringsEqual)
		}
		out = append(out, e)
	}
	return out, nil
}

// searchArgs are glob's and grep's arguments after the type pass; their
// values are checked by internal/search, in the original's order.
type searchArgs struct {
	pattern       string
	path, include *string
}

func searchArgsOf(raw []byte, grep bool) (searchArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return searchArgs{}, err
	}
	var s searchArgs
	pattern, _, patternOK := a.str("pattern")
	path, hasPath, pathOK := a.str("path")
	include, hasInclude, includeOK := a.str("include")
	switch {
	case !patternOK:
		return searchArgs{}, argError(msgPattern)
	case hasPath && !pathOK:
		return searchArgs{}, argError(msgPath)
	case grep && hasInclude && !includeOK:
		return searchArgs{}, argError(msgInclude)
	}
	s.pattern = pattern
	if hasPath {
		s.path = &path
	}
	if grep && hasInclude {
		s.include = &include
	}
	return s, nil
}

// positiveInt converts a number argument of at least 1: a value that is not
// a whole number (or that float64 cannot hold exactly) is refused with
// message.
func positiveInt(f float64, message string) (int, *fault.Error) {
	// 2^53 is refused too: 2^53+1 parses to it, so it may not be what was sent.
	if f < 1 || f != math.Trunc(f) || f >= 1<<53 || math.IsNaN(f) {
		return 0, argError(message)
	}
	return int(f), nil
}

// checkFilePath applies the original's file_path check, and refuses NUL
// bytes (no path can contain one; the kernel would truncate it).
func checkFilePath(p string) *fault.Error {
	if strings.TrimSpace(p) == "" {
		return argError(render.MsgFilePath)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return argError(msgFilePathNUL)
	}
	return nil
}
