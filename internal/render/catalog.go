package render

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Tool is one catalog entry: what a frontend hands a model about a tool.
// Parameters is the JSON input schema, byte for byte as the original tool-fs's.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Guidance    string          `json:"guidance"`
}

// Profile chooses the surface the catalog advertises (docs/edits.md,
// "Profiles").
type Profile string

// The two profiles.
const (
	// ProfileExtended (the default) adds dry_run to write and edit and edits
	// to edit, after the original tool-fs's properties, and hints on edit misses.
	ProfileExtended Profile = "extended"
	// ProfileOriginal is the original tool-fs's surface byte for byte.
	ProfileOriginal Profile = "original"
)

// ParseProfile accepts "extended" and "original".
func ParseProfile(s string) (Profile, bool) {
	switch p := Profile(s); p {
	case ProfileExtended, ProfileOriginal:
		return p, true
	}
	return "", false
}

// Catalog returns the declared tools (Tools) the dialect lists, without
// the search ones when search is false. limit is the configured read
// limit, quoted in read's schema. The profile and the dialect are applied
// here and nowhere else: every view of the catalog (REST, MCP, OpenAPI)
// reads it. fenced (a sandbox mode other than off) adds write's and
// edit's escalation arguments. The original profile is the original's
// surface whatever the dialect: it lists edit alone.
func Catalog(limit int, search bool, profile Profile, fenced bool, dialect Dialect) []Tool {
	ext := profile != ProfileOriginal
	if !ext {
		dialect = DialectStrReplace
	}
	tools := make([]Tool, 0, len(Tools))
	for _, d := range Tools {
		if d.Search && !search || d.Extended && !ext || !dialect.lists(d) {
			continue
		}
		tools = append(tools, entryOf(d, limit, profile, fenced, dialect))
	}
	return tools
}

// entryOf is d's catalog entry in profile, fenced or not, in dialect
// (write's guidance names the dialect's edit tool).
func entryOf(d Decl, limit int, profile Profile, fenced bool, dialect Dialect) Tool {
	ext := profile != ProfileOriginal
	var shown []Param
	for _, p := range d.Params {
		if p.Extended && !ext || p.Fenced && !fenced {
			continue
		}
		shown = append(shown, p)
	}
	guidance := strings.ReplaceAll(d.Guidance, EditToolMark, dialect.editTool())
	return Tool{Name: d.Name, Description: d.Description, Parameters: schema(shown, strconv.Itoa(limit)), Guidance: guidance}
}

// schema builds {"type":"object","properties":{...},"required":[...]} over
// params, keys in declaration order (a Go map would sort them). A required
// argument whose stand-in is among params is not listed as required.
func schema(params []Param, limit string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i, p := range params {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(p.Name))
		b.WriteString(`:{"type":`)
		b.Write(jsonString(p.Type))
		if p.Enum != nil {
			b.WriteString(`,"enum":[`)
			for i, v := range p.Enum {
				if i > 0 {
					b.WriteByte(',')
				}
				b.Write(jsonString(v))
			}
			b.WriteByte(']')
		}
		b.WriteString(`,"description":`)
		b.Write(jsonString(strings.ReplaceAll(p.Description, LimitMark, limit)))
		if p.Type == "array" {
			b.WriteString(`,"minItems":` + strconv.Itoa(p.Min) + `,"maxItems":` + strconv.Itoa(p.Max) + `,"items":`)
			b.Write(schema(p.Items, limit))
		}
		b.WriteByte('}')
	}
	b.WriteString(`},"required":[`)
	n := 0
	for _, p := range params {
		if !p.Required || p.Unless != "" && has(params, p.Unless) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.Write(jsonString(p.Name))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func has(params []Param, name string) bool {
	for _, p := range params {
		if p.Name == name {
			return true
		}
	}
	return false
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}
