package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// dialectOf is the edit dialect a request asks for with ?dialect=
// (docs/edits.md, "Edit dialects"): "" when absent or empty (the server's
// own); an unknown name, or the parameter given twice, is refused.
func dialectOf(r *http.Request) (render.Dialect, *fault.Error) {
	if r.URL.RawQuery == "" {
		return "", nil // no query to parse (a map per request)
	}
	values := r.URL.Query()["dialect"]
	switch {
	case len(values) == 0 || len(values) == 1 && values[0] == "":
		return "", nil
	case len(values) > 1:
		return "", fault.New(fault.CodeInvalidArgument, "give dialect at most once: "+render.DialectNames("dialect="))
	}
	d, ok := render.ParseDialect(values[0])
	if !ok {
		return "", fault.New(fault.CodeInvalidArgument, render.MsgDialect(values[0]))
	}
	return d, nil
}

// Frontend views of the catalog (docs/frontends.md): the tool-only OpenAPI
// document at GET /openapi.json and GET /tools?format=. Both are built on
// each request from Executor.Catalog(), the same source as GET /tools, so a
// view can never offer a tool, a description or a schema the catalog does
// not.

// The catalog formats of GET /tools?format= (docs/api.md, "Catalog").
const (
	formatOpenAI    = "openai"
	formatAnthropic = "anthropic"
	formatMCP       = "mcp"
)

// catalogIn is the catalog in a format's shape; "" is the catalog itself.
// Descriptions are the catalog's, without the guidance.
func catalogIn(format string, cat tools.Catalog) (any, *fault.Error) {
	switch format {
	case "":
		return cat, nil
	case formatOpenAI:
		out := make([]openAITool, len(cat.Tools))
		for i, t := range cat.Tools {
			out[i] = openAITool{Type: "function", Function: openAIFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
		}
		return out, nil
	case formatAnthropic:
		out := make([]anthropicTool, len(cat.Tools))
		for i, t := range cat.Tools {
			out[i] = anthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters}
		}
		return out, nil
	case formatMCP:
		out := mcpToolList{Tools: make([]mcpTool, len(cat.Tools))}
		for i, t := range cat.Tools {
			out.Tools[i] = mcpTool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters, Annotations: tools.AnnotationsOf(t.Name)}
		}
		return out, nil
	}
	return nil, fault.New(fault.CodeInvalidArgument, "unknown catalog format "+render.Quote(format)+
		": use format=openai, format=anthropic or format=mcp, or no format for the catalog itself")
}

// openAITool is one OpenAI Chat Completions tool (the OpenAITool schema of
// api/openapi.yaml, members in the order OpenAI documents them).
type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// anthropicTool is one Anthropic Messages tool (the AnthropicTool schema).
type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// mcpToolList is an MCP tools/list result (the MCPToolList schema), with
// the annotations MCP's own tools/list carries (tools.AnnotationsOf).
type mcpToolList struct {
	Tools []mcpTool `json:"tools"`
}

type mcpTool struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	InputSchema json.RawMessage   `json:"inputSchema"`
	Annotations tools.Annotations `json:"annotations"`
}

// toolView is the tool-only OpenAPI 3.0 document of GET /openapi.json
// (api/openapi.yaml, operation openapiToolView): one POST /model/<tool>
// per available tool, in catalog order, and nothing an importer would turn
// into a model argument besides the tool's own parameters.
type toolView struct {
	OpenAPI    string                `json:"openapi"`
	Info       viewInfo              `json:"info"`
	Servers    []viewServer          `json:"servers"`
	Security   []map[string][]string `json:"security,omitempty"`
	Paths      viewPaths             `json:"paths"`
	Components *viewComponents       `json:"components,omitempty"`
}

type viewInfo struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

type viewServer struct {
	URL string `json:"url"`
}

type viewComponents struct {
	SecuritySchemes map[string]viewSecurityScheme `json:"securitySchemes"`
}

type viewSecurityScheme struct {
	Type   string `json:"type"`
	Scheme string `json:"scheme"`
}

// viewPaths keeps the catalog's order (a Go map would sort the paths, and
// importers list tools in document order).
type viewPaths []viewPath

type viewPath struct {
	path string
	post viewOperation
}

func (ps viewPaths) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		item, err := json.Marshal(map[string]viewOperation{"post": p.post})
		if err != nil {
			return nil, err
		}
		b.Write(appendJSONString(nil, p.path))
		b.WriteByte(':')
		b.Write(item)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type viewOperation struct {
	OperationID string                  `json:"operationId"`
	Summary     string                  `json:"summary"`
	Description string                  `json:"description"`
	RequestBody viewRequestBody         `json:"requestBody"`
	Responses   map[string]viewResponse `json:"responses"`
}

type viewRequestBody struct {
	Required bool                 `json:"required"`
	Content  map[string]viewMedia `json:"content"`
}

type viewMedia struct {
	Schema json.RawMessage `json:"schema"`
}

type viewResponse struct {
	Description string               `json:"description"`
	Content     map[string]viewMedia `json:"content"`
}

// The descriptions of the view's document and answers.
const (
	viewDescription = "The toolfs-api file tools. Each operation answers exactly the text the model sees " +
		"(text/plain); a failure answers its error text with the error's HTTP status. " +
		"The session whose reads authorize writes and edits comes from the connection's headers, never from the model."
	viewOK    = "The tool's answer: exactly the text the model sees."
	viewError = "The tool's error text (Error: <message>), with the HTTP status of its code."
)

// newToolView builds the view of cat for a server reached at serverURL.
// A view asked for in a dialect (not "") names read's path with that
// dialect, since importers call the paths the view names and nothing else
// (docs/frontends.md, "Edit dialects").
func newToolView(cat tools.Catalog, version, serverURL string, bearer bool, dialect render.Dialect) toolView {
	text := map[string]viewMedia{"text/plain": {Schema: json.RawMessage(`{"type":"string"}`)}}
	v := toolView{
		OpenAPI: "3.0.3",
		Info:    viewInfo{Title: "toolfs-api tools", Version: version, Description: viewDescription},
		Servers: []viewServer{{URL: serverURL}},
	}
	for _, t := range cat.Tools {
		path := modelPrefix + t.Name
		if dialect != "" && t.Name == tools.ToolRead {
			path += "?dialect=" + string(dialect)
		}
		v.Paths = append(v.Paths, viewPath{path: path, post: viewOperation{
			OperationID: t.Name,
			Summary:     t.Description,
			Description: t.Description + "\n\n" + t.Guidance,
			RequestBody: viewRequestBody{Required: true, Content: map[string]viewMedia{"application/json": {Schema: t.Parameters}}},
			Responses: map[string]viewResponse{
				"200":     {Description: viewOK, Content: text},
				"default": {Description: viewError, Content: text},
			},
		}})
	}
	if bearer {
		v.Security = []map[string][]string{{"bearerAuth": {}}}
		v.Components = &viewComponents{SecuritySchemes: map[string]viewSecurityScheme{"bearerAuth": {Type: "http", Scheme: "bearer"}}}
	}
	return v
}

// serverURL is the view's servers[0].url: --public-url when set, else the
// request's own scheme and Host. X-Forwarded-Proto and X-Forwarded-Host are
// not trusted: any client can send them, and the document tells importers
// where to send the bearer token, so a forged header (kept by a cache in
// front of the server, say) would send it elsewhere. Behind a proxy, set
// --public-url (docs/frontends.md, "Behind a proxy").
func serverURL(public string, r *http.Request) string {
	if public != "" {
		return public
	}
	if r.Host == "" {
		return "/"
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// modelPrefix is where the text-answering tool routes live.
const modelPrefix = "/model/"
