package tools

import (
	"strconv"

	"github.com/toolfs/toolfs-api/internal/render"
)

// Catalog is the tool list a frontend hands a model (docs/api.md,
// "Catalog"): the available tools in catalog order, and the tools this
// server has but cannot run now, with the reason.
type Catalog struct {
	Tools       []render.Tool     `json:"tools"`
	Unavailable []UnavailableTool `json:"unavailable,omitempty"`
}

// UnavailableTool names a tool that cannot run now and why.
type UnavailableTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Allowed is c with only the tools a caller may call, in c's order: one
// that cannot write (a token without toolfs:write, docs/identity.md)
// does not see the tools that write (Writes). A call of a tool it does not
// see is still refused as before.
func (c Catalog) Allowed(canWrite bool) Catalog {
	if canWrite {
		return c
	}
	out := Catalog{Tools: make([]render.Tool, 0, len(c.Tools)), Unavailable: c.Unavailable}
	for _, t := range c.Tools {
		if !Writes(t.Name) {
			out.Tools = append(out.Tools, t)
		}
	}
	return out
}

// Catalog lists the tools of the server's edit dialect (CatalogIn).
func (x *Executor) Catalog() Catalog { return x.CatalogIn("") }

// CatalogIn lists the tools of dialect d ("" = the server's): one edit
// tool, or all three with DialectAll (docs/edits.md, "Edit dialects").
// Without ripgrep, glob and grep leave the list and are named under
// Unavailable, so a frontend never offers a model a tool that cannot run.
func (x *Executor) CatalogIn(d render.Dialect) Catalog {
	searchable := x.searchable()
	c := Catalog{Tools: render.Catalog(x.caps.Limit, searchable, x.profile, x.fence.Fenced(), x.DialectOf(Call{Dialect: d}))}
	if !searchable {
		reason := "ripgrep (rg) was not found at start-up; install it or set --rg-path"
		if x.search != nil {
			reason = x.search.UnavailableReason()
		}
		c.Unavailable = []UnavailableTool{{ToolGlob, reason}, {ToolGrep, reason}}
	}
	return c
}

// Annotations are a tool's behaviour hints for clients that show, confirm
// or filter tools by them: the MCP tool annotations of tools/list and of
// GET /tools?format=mcp (docs/mcp.md). Every tool works inside the
// workspace root only, so none is open-world. DestructiveHint is left out
// of the JSON of a read-only tool, where MCP gives it no meaning, and
// written, false included, for every other (MCP reads an absent one as
// true: mkdir's false must be said).
type Annotations struct {
	ReadOnlyHint    bool `json:"readOnlyHint"`
	DestructiveHint bool `json:"destructiveHint"`
	OpenWorldHint   bool `json:"openWorldHint"`
}

// MarshalJSON writes a as MCP's tool annotations.
func (a Annotations) MarshalJSON() ([]byte, error) {
	if a.ReadOnlyHint {
		return []byte(`{"readOnlyHint":true,"openWorldHint":` + strconv.FormatBool(a.OpenWorldHint) + `}`), nil
	}
	return []byte(`{"readOnlyHint":false,"destructiveHint":` + strconv.FormatBool(a.DestructiveHint) + `,"openWorldHint":` + strconv.FormatBool(a.OpenWorldHint) + `}`), nil
}

// AnnotationsOf returns the hints of the named tool: read, glob and grep
// are read-only; write and edit change files (destructive: they replace
// content), as do move and delete; mkdir only adds a folder (SPEC §26).
// An unknown name gets the hints of a mutating tool, the cautious default.
func AnnotationsOf(name string) Annotations {
	switch name {
	case ToolRead, ToolGlob, ToolGrep, ToolChanges:
		return Annotations{ReadOnlyHint: true}
	case ToolMkdir:
		return Annotations{}
	}
	return Annotations{DestructiveHint: true}
}
