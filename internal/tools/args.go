package tools

import (
	"math"
	"strings"

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

func (x *Executor) readArgs(raw []byte) (readArgs, *Error) {
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
}

func writeArgsOf(raw []byte) (writeArgs, *Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return writeArgs{}, err
	}
	path, _, pathOK := a.str("file_path")
	content, _, contentOK := a.str("content")
	switch {
	case !pathOK:
		return writeArgs{}, argError(render.MsgFilePath)
	case !contentOK:
		return writeArgs{}, argError(msgContent)
	}
	if err := checkFilePath(path); err != nil {
		return writeArgs{}, err
	}
	return writeArgs{path: path, content: content}, nil
}

type editArgs struct {
	path, oldString, newString string
	replaceAll                 bool
}

func editArgsOf(raw []byte) (editArgs, *Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return editArgs{}, err
	}
	var e editArgs
	var pathOK, oldOK, newOK, hasAll, allOK bool
	e.path, _, pathOK = a.str("file_path")
	e.oldString, _, oldOK = a.str("old_string")
	e.newString, _, newOK = a.str("new_string")
	e.replaceAll, hasAll, allOK = a.boolean("replace_all")
	switch {
	case !pathOK:
		return editArgs{}, argError(render.MsgFilePath)
	case !oldOK:
		return editArgs{}, argError(render.MsgOldString)
	case !newOK:
		return editArgs{}, argError(msgNewString)
	case hasAll && !allOK:
		return editArgs{}, argError(msgReplaceAll)
	}
	if err := checkFilePath(e.path); err != nil {
		return editArgs{}, err
	}
	switch {
	case e.oldString == "":
		return editArgs{}, argError(render.MsgOldString)
	case e.oldString == e.newString:
		return editArgs{}, argError(render.MsgStringsEqual)
	}
	return e, nil
}

// searchArgs are glob's and grep's arguments after the type pass; their
// values are checked by internal/search, in the original's order.
type searchArgs struct {
	pattern       string
	path, include *string
}

func searchArgsOf(raw []byte, grep bool) (searchArgs, *Error) {
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
func positiveInt(f float64, message string) (int, *Error) {
	// 2^53 is refused too: 2^53+1 parses to it, so it may not be what was sent.
	if f < 1 || f != math.Trunc(f) || f >= 1<<53 || math.IsNaN(f) {
		return 0, argError(message)
	}
	return int(f), nil
}

// checkFilePath applies the original's file_path check, and refuses NUL
// bytes (no path can contain one; the kernel would truncate it).
func checkFilePath(p string) *Error {
	if strings.TrimSpace(p) == "" {
		return argError(render.MsgFilePath)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return argError(msgFilePathNUL)
	}
	return nil
}
