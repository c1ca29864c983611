package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/toolfs/toolfs-api/internal/render"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Bodies are encoded into pooled buffers. A read answer carries its window
// twice (output and metadata.lines, ~100 KiB for a full window), and
// encoding/json spent most of a read's time on reflection and on growing a
// fresh buffer; the read answer now has a hand-written encoder (appendJSON)
// whose bytes are pinned equal to encoding/json's by tests.

// jsonAppender is a body that encodes itself exactly as encoding/json with
// SetEscapeHTML(false) would, trailing newline included.
type jsonAppender interface {
	appendJSON(dst []byte) []byte
}

// bufPool holds encoding buffers; buffers above maxPooledBuf are dropped so
// one huge answer does not pin its memory.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuf = 1 << 20

// writeJSON encodes body without HTML escaping: outputs are full of '<' and
// '>' and must read the same raw as decoded.
func writeJSON(w http.ResponseWriter, status int, contentType string, body any) error {
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	if a, ok := body.(jsonAppender); ok {
		b = a.appendJSON(b)
	} else {
		buf := bytes.NewBuffer(b)
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			return err
		}
		b = buf.Bytes()
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err := w.Write(b)
	if cap(b) <= maxPooledBuf {
		*bp = b[:0]
		bufPool.Put(bp)
	}
	return err
}

// jsonType is the Content-Type value of JSON answers. Its capacity is its
// length, so an Add to it elsewhere copies instead of writing into it.
var jsonType = []string{"application/json"}

// writeBytes writes an encoded body (a read answer kept with its cached
// window: tools.ReadResult.Memo).
func writeBytes(w http.ResponseWriter, status int, contentType string, b []byte) {
	h := w.Header()
	if contentType == "application/json" {
		h["Content-Type"] = jsonType // canonical key, no allocation
	} else {
		h.Set("Content-Type", contentType)
	}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

// spanPool holds appendJSON's offsets of escaped line texts (16 bytes a
// line, so at most 32 KiB for a 2,000-line window).
var spanPool = sync.Pool{New: func() any { return new([]int) }}

// readResult is the success body of a JSON read: the output is
// render.ReadOutput(display, window), written straight into the body; the
// metadata repeats every line's text. Each text is escaped once, in the
// output, and copied from there into the metadata.
type readResult struct{ tools.ReadResult }

func (r readResult) appendJSON(b []byte) []byte {
	m := r.Meta
	size := 128 + 2*len(r.Display) + len(m.Lang)
	for _, l := range r.Window.Lines {
		size += 2*len(l.Text) + 60 // twice, with number, tag, keys and some escapes
	}
	b = slices.Grow(b, size)
	b = append(b, `{"output":"`...)
	b = appendEscaped(b, render.ReadHeader(r.Display))
	sp := spanPool.Get().(*[]int)
	defer spanPool.Put(sp)
	spans := slices.Grow((*sp)[:0], 2*len(r.Window.Lines))[:2*len(r.Window.Lines)] // where each escaped text is in b
	*sp = spans
	for i, l := range r.Window.Lines {
		// "<number>: <text>\n" (render.ReadOutput), escaped; a prefix
		// has nothing to escape
		b = render.AppendLinePrefix(b, l)
		spans[2*i] = len(b)
		b = appendEscaped(b, l.Text)
		spans[2*i+1] = len(b)
		b = append(b, `\n`...)
	}
	b = appendEscaped(b, render.ReadTail(r.Window))
	b = append(b, `","metadata":{"path":`...)
	b = appendJSONString(b, m.Path)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, int64(m.Offset), 10)
	b = append(b, `,"lines":[`...)
	for i, l := range r.Window.Lines { // m.Lines is the same slice (or [] for none)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"number":`...)
		b = strconv.AppendInt(b, int64(l.Number), 10)
		b = append(b, `,"text":"`...)
		b = append(b, b[spans[2*i]:spans[2*i+1]]...)
		if l.Tag != "" {
			b = append(b, `","tag":"`...)
			b = append(b, l.Tag...)
		}
		b = append(b, `"}`...)
	}
	b = append(b, `],"totalLines":`...)
	b = strconv.AppendInt(b, int64(m.TotalLines), 10)
	if m.Lang != "" {
		b = append(b, `,"lang":`...)
		b = appendJSONString(b, m.Lang)
	}
	return append(b, "}}\n"...)
}

// appendJSONString appends s as a JSON string exactly as encoding/json does
// without HTML escaping: \" \\ \b \f \n \r \t, other control bytes as
// \u00XX, U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	return append(appendEscaped(append(b, '"'), s), '"')
}

// appendEscaped appends the inside of appendJSONString(s), without quotes
// (render.AppendJSONEscaped without HTML escaping).
func appendEscaped(b []byte, s string) []byte { return render.AppendJSONEscaped(b, s, false) }
