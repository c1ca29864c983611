package tools

import (
	"math"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/jsonscan"
	"github.com/toolfs/toolfs-api/internal/render"
)

// The messages of a batch edit (docs/edits.md) beyond the declared ones;
// items are named by their 0-based JSON path.
const msgBothForms = "provide either old_string and new_string, or edits, not both"

// msgFilePathNUL is ours: no path can contain a NUL byte (docs/api.md,
// "Argument messages").
const msgFilePathNUL = "file_path must not contain a NUL byte"

// The declared arguments of each tool (render.Tools), looked up once.
var (
	readParams  = render.ParamsOf(ToolRead)
	writeParams = render.ParamsOf(ToolWrite)
	editParams  = render.ParamsOf(ToolEdit)
	globParams  = render.ParamsOf(ToolGlob)
	grepParams  = render.ParamsOf(ToolGrep)
	itemParams  = paramOf(editParams, "edits").Items

	editLinesParams = render.ParamsOf(ToolEditLines)
	lineItemParams  = paramOf(editLinesParams, "edits").Items
)

// Arguments are checked in two passes, as the contract's schema and then
// the original tool-fs's checks did: first every declared argument's JSON
// type (and a number's minimum), in declaration order, by typePass; then
// the values in the same order, by each tool. So {"file_path": "",
// "offset": "x"} reports offset, the first type error, while
// {"file_path": "", "offset": 1.5} reports file_path.

// maxParams bounds the arguments of one tool, so the type pass's values
// live on the stack.
const maxParams = 8

// typed is one declared argument after the type pass.
type typed struct {
	raw     []byte // nil: absent or null
	str     string
	num     float64
	boolean bool
}

func (v typed) present() bool { return v.raw != nil }

// values are a tool's declared arguments after the type pass, by name.
type values struct {
	params []render.Param
	v      [maxParams]typed
}

// of returns the declared argument name; it panics on an undeclared name,
// a programming error every test of the tool reaches.
func (vs *values) of(name string) typed {
	for i, p := range vs.params {
		if p.Name == name {
			return vs.v[i]
		}
	}
	panic("tools: argument " + name + " is not declared")
}

// typePass checks a's members against params in declaration order: a
// required argument must be sent (unless its stand-in is), and a sent one
// must have its declared type; the first failure is that argument's
// Message. Deferred arguments are only collected.
func (vs *values) typePass(a args) *fault.Error {
	params := vs.params
	for i, p := range params {
		vs.v[i].raw = a.get(p.Name)
	}
	for i, p := range params {
		v := &vs.v[i]
		if p.Deferred {
			continue
		}
		if v.raw == nil {
			if p.Required && (p.Unless == "" || vs.of(p.Unless).raw == nil) {
				return argError(p.Message)
			}
			continue
		}
		ok := false
		switch p.Type {
		case "string":
			v.str, ok = jsonscan.Unquote(v.raw)
			ok = ok && !(p.NonEmpty && v.str == "")
		case "number":
			v.num, ok = numberOf(v.raw)
			ok = ok && v.num >= float64(p.Min)
		case "boolean":
			v.boolean, ok = booleanOf(v.raw)
		case "array":
			ok = v.raw[0] == '['
		}
		if !ok {
			return argError(p.Message)
		}
	}
	return nil
}

// paramOf returns the declared argument name of params.
func paramOf(params []render.Param, name string) render.Param {
	for _, p := range params {
		if p.Name == name {
			return p
		}
	}
	panic("tools: argument " + name + " is not declared")
}

type readArgs struct {
	path          string
	offset, limit int
}

func (x *Executor) readArgs(raw []byte) (readArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return readArgs{}, err
	}
	vs := values{params: readParams}
	if err := vs.typePass(a); err != nil {
		return readArgs{}, err
	}
	path, offset, limit := vs.of("file_path"), vs.of("offset"), vs.of("limit")
	if err := checkFilePath(path.str); err != nil {
		return readArgs{}, err
	}
	r := readArgs{path: path.str, offset: 1, limit: x.caps.Limit}
	if offset.present() {
		if r.offset, err = positiveInt(offset.num, render.MsgOffset); err != nil {
			return readArgs{}, err
		}
	}
	if limit.present() {
		if r.limit, err = positiveInt(limit.num, render.MsgLimit); err != nil {
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
	vs := values{params: writeParams}
	if err := vs.typePass(a); err != nil {
		return writeArgs{}, err
	}
	w := writeArgs{path: vs.of("file_path").str, content: vs.of("content").str, dryRun: vs.of("dry_run").boolean, esc: escalationOf(&vs)}
	if err := checkFilePath(w.path); err != nil {
		return writeArgs{}, err
	}
	return w, nil
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
	vs := values{params: editParams}
	if err := vs.typePass(a); err != nil {
		return editArgs{}, err
	}
	oldArg, newArg, edits := vs.of("old_string"), vs.of("new_string"), vs.of("edits")
	e := editArgs{
		path: vs.of("file_path").str, oldString: oldArg.str, newString: newArg.str,
		replaceAll: vs.of("replace_all").boolean, dryRun: vs.of("dry_run").boolean, esc: escalationOf(&vs),
	}
	if err := checkFilePath(e.path); err != nil {
		return editArgs{}, err
	}
	if edits.present() {
		// A replace_all of true beside edits would be silently ignored, so
		// it counts as the other form too (docs/edits.md).
		if oldArg.present() || newArg.present() || e.replaceAll {
			return editArgs{}, argError(msgBothForms)
		}
		if e.batch, err = editItemsOf(edits.raw); err != nil {
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
// the declared item arguments' type pass and a single edit's value check,
// named by its JSON path.
func editItemsOf(raw []byte) ([]fs.Edit, *fault.Error) {
	items, err := arrayItems(raw)
	if err != nil {
		return nil, err
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
		vs := values{params: itemParams}
		if err := vs.typePass(a); err != nil {
			return nil, argError(at + "." + err.Message)
		}
		e := fs.Edit{OldString: vs.of("old_string").str, NewString: vs.of("new_string").str, ReplaceAll: vs.of("replace_all").boolean}
		if e.OldString == e.NewString {
			return nil, argError(at + "." + render.MsgStringsEqual)
		}
		out = append(out, e)
	}
	return out, nil
}

// arrayItems cuts raw, an edits array (its type checked), into its items:
// 1 to render.MaxEdits of them.
func arrayItems(raw []byte) ([][]byte, *fault.Error) {
	var items [][]byte
	for at, end := range jsonscan.Elements(raw, 0) {
		if len(items) == render.MaxEdits {
			return nil, argError(render.MsgEditsCount)
		}
		items = append(items, raw[at:end])
	}
	if len(items) == 0 {
		return nil, argError(render.MsgEditsCount)
	}
	return items, nil
}

type editLinesArgs struct {
	path   string // file_path as sent: diffs name it so
	edits  []render.LineEdit
	dryRun bool
	esc    escalation
}

// editLinesArgsOf checks edit_lines's arguments (docs/edits.md, "Anchored
// lines"): the type pass, then each item in order (its type pass, its op,
// its anchors, what its op needs), then that no two items overlap.
func editLinesArgsOf(raw []byte) (editLinesArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return editLinesArgs{}, err
	}
	vs := values{params: editLinesParams}
	if err := vs.typePass(a); err != nil {
		return editLinesArgs{}, err
	}
	e := editLinesArgs{path: vs.of("file_path").str, dryRun: vs.of("dry_run").boolean, esc: escalationOf(&vs)}
	if err := checkFilePath(e.path); err != nil {
		return editLinesArgs{}, err
	}
	items, err := arrayItems(vs.of("edits").raw)
	if err != nil {
		return editLinesArgs{}, err
	}
	for i, item := range items {
		le, err := lineEditOf(i, item)
		if err != nil {
			return editLinesArgs{}, err
		}
		e.edits = append(e.edits, le)
	}
	if i, j, ok := render.Overlap(e.edits); ok {
		return editLinesArgs{}, argError(render.MsgLineEditsOverlap(i, j))
	}
	return e, nil
}

// lineEditOf checks the item i of edit_lines's edits.
func lineEditOf(i int, item []byte) (render.LineEdit, *fault.Error) {
	at := "edits[" + strconv.Itoa(i) + "]"
	if item[0] != '{' {
		return render.LineEdit{}, argError(render.MsgLineItem(at))
	}
	a, err := decodeArgs(item)
	if err != nil {
		return render.LineEdit{}, argError(at + ": " + err.Message)
	}
	vs := values{params: lineItemParams}
	if err := vs.typePass(a); err != nil {
		return render.LineEdit{}, argError(at + "." + err.Message)
	}
	opName := vs.of("op").str
	op, ok := render.ParseLineOp(opName)
	if !ok {
		return render.LineEdit{}, argError(at + "." + render.MsgLineOp)
	}
	anchor := func(name, msg string) (render.LineRef, bool, *fault.Error) {
		v := vs.of(name)
		if !v.present() {
			return render.LineRef{}, false, nil
		}
		r, ok := render.ParseAnchor(v.str)
		if !ok {
			return render.LineRef{}, true, argError(at + "." + msg)
		}
		return r, true, nil
	}
	start, hasStart, err := anchor("start", render.MsgLineStart)
	if err != nil {
		return render.LineEdit{}, err
	}
	end, hasEnd, err := anchor("end", render.MsgLineEnd)
	if err != nil {
		return render.LineEdit{}, err
	}
	where, hasAt, err := anchor("at", render.MsgLineAt)
	if err != nil {
		return render.LineEdit{}, err
	}
	e := render.LineEdit{Op: op, Text: vs.of("text").str}
	if op == render.LineReplace {
		switch {
		case hasAt:
			return render.LineEdit{}, argError(render.MsgLineTakes(at, opName))
		case !hasStart:
			return render.LineEdit{}, argError(render.MsgLineNeeds(at, opName))
		case !hasEnd:
			end = start
		case end.Number < start.Number:
			return render.LineEdit{}, argError(at + "." + render.MsgLineEndBefore)
		}
		e.Start, e.End = start, end
		return e, nil
	}
	switch {
	case hasStart || hasEnd:
		return render.LineEdit{}, argError(render.MsgLineTakes(at, opName))
	case !hasAt:
		return render.LineEdit{}, argError(render.MsgLineNeeds(at, opName))
	case len(render.SplitText(e.Text)) == 0:
		return render.LineEdit{}, argError(render.MsgLineInsertEmpty(at, opName))
	}
	e.Start, e.End = where, where
	return e, nil
}

// searchArgs are glob's and grep's arguments after the type pass; their
// values are checked by internal/search, in the original tool-fs's order.
type searchArgs struct {
	pattern       string
	path, include *string
}

func searchArgsOf(raw []byte, grep bool) (searchArgs, *fault.Error) {
	a, err := decodeArgs(raw)
	if err != nil {
		return searchArgs{}, err
	}
	vs := values{params: globParams}
	if grep {
		vs.params = grepParams
	}
	if err := vs.typePass(a); err != nil {
		return searchArgs{}, err
	}
	s := searchArgs{pattern: vs.of("pattern").str}
	if path := vs.of("path"); path.present() {
		s.path = &path.str
	}
	if grep {
		if include := vs.of("include"); include.present() {
			s.include = &include.str
		}
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

// checkFilePath applies the original tool-fs's file_path check, and refuses NUL
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
