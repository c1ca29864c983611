package mcp

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// placeholderPrefix starts every placeholder. The nonce, drawn at start-up
// and never sent, keeps a client's id or any text from being taken for one.
var placeholderPrefix = "toolfs-answer-" + rand.Text() + "-"

// held keeps a request's answers, each encoded once as the JSON the SDK
// would have made of it, while the SDK carries a short placeholder in its
// place: the SDK encodes a result three or four times over (the content,
// the result, the JSON-RPC response, a batch), each pass over the whole of
// a 51 KB read window (docs/performance.md, "MCP at the speed of REST").
// splice puts them back as the SDK writes its answer, which it does in one
// Write per message. The zero value holds nothing; a nil *held holds
// nothing and swaps nothing.
type held struct {
	mu   sync.Mutex
	list [][]byte
}

// lower gives res with its texts and structured content replaced by
// placeholders. A text is encoded here once, byte for byte as the SDK
// encodes it (json.Marshal: HTML characters escaped, as TextContent's own
// encoder leaves them); structured content is held as it is, so it must be
// what the SDK would send, compact with HTML characters escaped (call
// encodes it so). text, when not nil, is the first content's text already
// encoded (adapter.call). With no held, res is returned as it is.
func (h *held) lower(res *sdk.CallToolResult, text []byte) *sdk.CallToolResult {
	if h == nil {
		return res
	}
	out := *res
	out.Content = make([]sdk.Content, len(res.Content))
	for i, c := range res.Content {
		out.Content[i] = c
		t, ok := c.(*sdk.TextContent)
		if !ok || t.Meta != nil || t.Annotations != nil {
			continue
		}
		b := text
		if i > 0 || b == nil {
			var err error
			if b, err = json.Marshal(t.Text); err != nil {
				continue
			}
		}
		out.Content[i] = &sdk.TextContent{Text: h.hold(b)}
	}
	if raw, ok := res.StructuredContent.(json.RawMessage); ok {
		out.StructuredContent = json.RawMessage(strconv.Quote(h.hold(raw)))
	}
	return &out
}

// hold keeps encoded and returns its placeholder.
func (h *held) hold(encoded []byte) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.list = append(h.list, encoded)
	return placeholderPrefix + strconv.Itoa(len(h.list)-1)
}

// splice returns p with every placeholder, quotes included, replaced by
// the JSON it holds; p itself when it has none.
func (h *held) splice(p []byte) []byte {
	if h == nil {
		return p
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.list) == 0 {
		return p
	}
	quoted := `"` + placeholderPrefix
	var out []byte
	rest := p
	for {
		i := bytes.Index(rest, []byte(quoted))
		if i < 0 {
			break
		}
		j := i + len(quoted)
		k := j
		for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
			k++
		}
		n, err := strconv.Atoi(string(rest[j:k]))
		if err != nil || k >= len(rest) || rest[k] != '"' || n >= len(h.list) {
			out = append(out, rest[:j]...)
			rest = rest[j:]
			continue
		}
		if out == nil {
			size := len(p)
			for _, b := range h.list {
				size += len(b)
			}
			out = make([]byte, 0, size)
		}
		out = append(append(out, rest[:i]...), h.list[n]...)
		rest = rest[k+1:]
	}
	if out == nil {
		return p
	}
	return append(out, rest...)
}
