package render

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestContractMatchesTheDeclaration holds api/openapi.yaml's tool request
// schemas to the declaration (Tools): the same properties in the same
// order, with their types, descriptions (plus Note), enums, limits,
// nullability and required lists, and no other keys. The contract shows
// the whole accepted surface: every profile's and the fence's arguments.
func TestContractMatchesTheDeclaration(t *testing.T) {
	b, err := os.ReadFile("../../api/openapi.yaml")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(b, &doc))
	schemas := child(child(doc.Content[0], "components"), "schemas")
	require.NotNil(t, schemas, "components.schemas")
	limit := strconv.Itoa(DefaultCaps().Limit)
	for _, d := range Tools {
		name := ""
		for _, part := range strings.Split(d.Name, "_") { // edit_lines: EditLinesRequest
			name += strings.ToUpper(part[:1]) + part[1:]
		}
		name += "Request"
		t.Run(name, func(t *testing.T) {
			checkSchema(t, schemas, name, child(schemas, name), d.Params, limit)
		})
	}
}

// TestRevertEscalationMatchesTheContract: revert's escalation arguments
// (render.HistoryTools, the MCP revert tool) are RevertRequest's, as
// write's are WriteRequest's (docs/sandbox.md); to and dry_run are the
// contract's integer and boolean, checked by TestCheckpoint* instead.
func TestRevertEscalationMatchesTheContract(t *testing.T) {
	b, err := os.ReadFile("../../api/openapi.yaml")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(b, &doc))
	schemas := child(child(doc.Content[0], "components"), "schemas")
	props := child(child(schemas, "RevertRequest"), "properties")
	require.NotNil(t, props, "RevertRequest.properties")
	var fenced []Param
	only := &yaml.Node{Kind: yaml.MappingNode}
	for _, p := range ParamsOf("revert") {
		if p.Fenced {
			require.NotNil(t, child(props, p.Name), "RevertRequest."+p.Name)
			fenced = append(fenced, p)
			only.Content = append(only.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p.Name}, child(props, p.Name))
		}
	}
	require.Len(t, fenced, 2)
	s := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "type"}, {Kind: yaml.ScalarNode, Value: "object"},
		{Kind: yaml.ScalarNode, Value: "properties"}, only,
	}}
	checkSchema(t, schemas, "RevertRequest", s, fenced, "")
}

// checkSchema compares the object schema s (named at) with params.
func checkSchema(t *testing.T, schemas *yaml.Node, at string, s *yaml.Node, params []Param, limit string) {
	t.Helper()
	require.NotNil(t, s, at)
	assert.Equal(t, "object", scalar(child(s, "type")), at+".type")
	props := child(s, "properties")
	require.NotNil(t, props, at+".properties")
	var names, wantRequired []string
	for i := 0; i+1 < len(props.Content); i += 2 {
		names = append(names, props.Content[i].Value)
	}
	required := seq(child(s, "required"))
	var want []string
	for _, p := range params {
		want = append(want, p.Name)
		if p.Required && p.Unless == "" {
			wantRequired = append(wantRequired, p.Name)
		}
	}
	assert.Equal(t, want, names, at+": the properties and their order")
	assert.Equal(t, wantRequired, required, at+".required")
	for _, p := range params {
		prop := child(props, p.Name)
		if prop == nil {
			continue
		}
		where := at + "." + p.Name
		keys := map[string]string{}
		for i := 0; i+1 < len(prop.Content); i += 2 {
			keys[prop.Content[i].Value] = prop.Content[i+1].Value
		}
		wantKeys := map[string]string{"type": p.Type, "description": strings.ReplaceAll(p.Description, LimitMark, limit)}
		if p.Note != "" {
			wantKeys["description"] += " " + p.Note
		}
		if p.Nullable() {
			wantKeys["nullable"] = "true"
		}
		switch p.Type {
		case "number":
			wantKeys["format"] = "double"
			if p.Min != 0 {
				wantKeys["minimum"] = strconv.Itoa(p.Min)
			}
		case "array":
			wantKeys["minItems"], wantKeys["maxItems"], wantKeys["items"] = strconv.Itoa(p.Min), strconv.Itoa(p.Max), ""
		}
		if p.Enum != nil {
			wantKeys["enum"] = ""
			assert.Equal(t, p.Enum, seq(child(prop, "enum")), where+".enum")
		}
		assert.Equal(t, wantKeys, keys, where)
		if p.Type == "array" {
			ref := scalar(child(child(prop, "items"), "$ref"))
			item := strings.TrimPrefix(ref, "#/components/schemas/")
			checkSchema(t, schemas, item, child(schemas, item), p.Items, limit)
		}
	}
}

// child returns the value of key in the mapping n; nil when absent.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

func seq(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, c.Value)
	}
	return out
}
