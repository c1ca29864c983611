package render

import "strings"

// Dialect is the edit format a client's models are offered (docs/edits.md,
// "Edit dialects"): the catalog lists one edit tool, the dialect's, since
// a model offered two edit formats mixes them; DialectAll lists every one.
type Dialect string

// The edit dialects. The zero Dialect is DialectStrReplace.
const (
	// DialectStrReplace lists edit (str_replace, as Claude models are
	// trained on): the default.
	DialectStrReplace Dialect = "str_replace"
	// DialectApplyPatch lists apply_patch (Codex's patch grammar, as the
	// GPT-5 family is trained on).
	DialectApplyPatch Dialect = "apply_patch"
	// DialectAnchors lists edit_lines and makes read answer with anchored
	// lines (<n>#<tag>: <text>).
	DialectAnchors Dialect = "anchors"
	// DialectAll lists every edit tool, and read answers with anchors so
	// that edit_lines can be used.
	DialectAll Dialect = "all"
)

// Dialects are the accepted dialect names, in the order messages list them.
var Dialects = []Dialect{DialectStrReplace, DialectApplyPatch, DialectAnchors, DialectAll}

// ParseDialect accepts the names of Dialects.
func ParseDialect(s string) (Dialect, bool) {
	for _, d := range Dialects {
		if string(d) == s {
			return d, true
		}
	}
	return "", false
}

// MsgDialect is the message of an unknown ?dialect= name.
func MsgDialect(name string) string {
	return "unknown edit dialect " + quoted(name) + ": use " + DialectNames("dialect=") +
		", or no dialect for the server's own (--edit-dialect)"
}

// DialectNames lists the dialect names, each after prefix, as "a, b, c or d".
func DialectNames(prefix string) string {
	names := make([]string, len(Dialects))
	for i, d := range Dialects {
		names[i] = prefix + string(d)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func quoted(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + s + `"`
}

// Anchored reports whether read answers with anchored lines in d.
func (d Dialect) Anchored() bool { return d == DialectAnchors || d == DialectAll }

// orDefault is d, or DialectStrReplace for the zero Dialect.
func (d Dialect) orDefault() Dialect {
	if d == "" {
		return DialectStrReplace
	}
	return d
}

// lists reports whether the catalog of d lists decl: a tool of every
// dialect (no Decl.Dialect), or d's own edit tool, or any with DialectAll.
func (d Dialect) lists(decl Decl) bool {
	d = d.orDefault()
	return decl.Dialect == "" || d == DialectAll || decl.Dialect == d
}

// editTool is the name write's guidance recommends for targeted changes
// in d: the dialect's own edit tool, edit where several are listed.
func (d Dialect) editTool() string {
	for _, decl := range Tools {
		if decl.Dialect != "" && decl.Dialect == d.orDefault() {
			return decl.Name
		}
	}
	return "edit"
}
