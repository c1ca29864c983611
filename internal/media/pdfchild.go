package media

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// runPDFChild is the child's life: the PDF's size (8 bytes) and bytes on
// in, its page count (or why not) on out; then for each page number (4
// bytes) on in, that page's text (or why not) on out, until in ends. It
// returns the exit code.
func runPDFChild(in io.Reader, out io.Writer) int {
	limitMemory()
	// A recursion without end in the parser (objects nested a million
	// deep) stops here, as a crash the parent words, long before the
	// runtime's 1 GB default.
	debug.SetMaxStack(64 << 20)
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 1
	}
	size := binary.BigEndian.Uint64(hdr[:])
	if size > MaxPDFBytes {
		return 1
	}
	// The file is held whole, and the library leaves garbage (every
	// object it resolves is parsed again): a soft limit of the file plus
	// 128 MiB makes the collector return memory early rather than let the
	// heap double.
	debug.SetMemoryLimit(int64(size) + 128<<20)
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return 1
	}
	doc, err := openDocument(data)
	switch {
	case errors.Is(err, ErrEncrypted):
		writeFrame(w, frameEncrypted, nil)
	case err != nil:
		writeFrame(w, frameBroken, []byte(err.Error()))
	default:
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(doc.pages)))
		writeFrame(w, frameOK, n[:])
	}
	if w.Flush() != nil || err != nil {
		return 0
	}
	for {
		var req [4]byte
		if _, err := io.ReadFull(r, req[:]); err != nil {
			return 0
		}
		n := int(binary.BigEndian.Uint32(req[:]))
		if n < 1 || n > len(doc.pages) {
			return 1
		}
		text, err := doc.page(n)
		if err != nil {
			writeFrame(w, frameBroken, []byte(err.Error()))
		} else {
			writeFrame(w, frameOK, []byte(text))
		}
		if w.Flush() != nil {
			return 0
		}
	}
}

func writeFrame(w *bufio.Writer, kind byte, payload []byte) {
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	w.Write(hdr[:])
	w.Write(payload)
}

// document is an opened PDF and its pages, found by a bounded walk of
// its page tree.
type document struct {
	r     *pdf.Reader
	pages []pdf.Value
}

// openDocument opens data. The library panics on much malformed input:
// every panic is a broken PDF with the panic's text as the reason.
func openDocument(data []byte) (doc *document, err error) {
	defer recoverAs(&err)
	// The library knows the header "%PDF-1.x" only; a PDF 2.0 file is
	// read as the 1.7 it extends.
	if bytes.HasPrefix(data, []byte("%PDF-2.")) {
		copy(data[5:8], "1.7")
	}
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if bytes.Contains(data, []byte("/Encrypt")) {
			// Encrypted with a password, or with a scheme the library
			// lacks (AES-256): either way, its text cannot be had.
			return nil, ErrEncrypted
		}
		return nil, errors.New(brief(err.Error()))
	}
	doc = &document{r: r}
	root := r.Trailer().Key("Root").Key("Pages")
	if root.IsNull() {
		return nil, errors.New("no page tree")
	}
	visits := 0
	if err := doc.walk(root, 0, &visits); err != nil {
		return nil, err
	}
	return doc, nil
}

// walk collects the pages below v, at depth, depth-first in order. A
// cycle passes maxPageTreeDepth; a tree that fans out into the same kids
// again and again passes the visits' bound.
func (d *document) walk(v pdf.Value, depth int, visits *int) error {
	if depth > maxPageTreeDepth {
		return errors.New("the page tree has a cycle or is too deep")
	}
	*visits++
	if *visits > 2*MaxPDFPages {
		return errors.New("the page tree has too many nodes")
	}
	kids := v.Key("Kids")
	if v.Key("Type").Name() == "Page" || (kids.Kind() != pdf.Array && v.Key("Type").Name() != "Pages") {
		if len(d.pages) == MaxPDFPages {
			return fmt.Errorf("more than %d pages", MaxPDFPages)
		}
		d.pages = append(d.pages, v)
		return nil
	}
	for i := range kids.Len() {
		if err := d.walk(kids.Index(i), depth+1, visits); err != nil {
			return err
		}
	}
	return nil
}

// parentsBounded checks the chain of a page's parents, which the library
// follows without end when it has a cycle (inherited resources).
func parentsBounded(v pdf.Value) error {
	n := 0
	for p := v; !p.IsNull(); p = p.Key("Parent") {
		if n++; n > maxPageTreeDepth+1 {
			return errors.New("the page tree has a cycle")
		}
	}
	return nil
}

// page is the normalised text of page n (1-based).
func (d *document) page(n int) (text string, err error) {
	defer recoverAs(&err)
	p := pdf.Page{V: d.pages[n-1]}
	// Checked here, for the page read, not for every page at the start:
	// each step parses a parent again, the whole Kids array of a large
	// tree's root included.
	if err := parentsBounded(p.V); err != nil {
		return "", err
	}
	if err := inflateBounded(p.V.Key("Contents")); err != nil {
		return "", err
	}
	return normalize(plainText(p)), nil
}

// plainText is the text a page's content shows, in the order it is shown.
// It is the library's GetPlainText with what that lacks: a space for a word
// gap made by a kerning offset in TJ (pdfTeX writes no space glyphs), and
// line breaks where the text moves to another line, judged by the
// baseline (a move of at least 0.6 em; a superscript's is less), not by
// each BT, so runs of one line in several fonts stay one line. Fonts are
// looked up by the page's own resource names (GetPlainText's shared cache
// would mix up two pages' /F1).
func plainText(p pdf.Page) string {
	c := p.V.Key("Contents")
	if c.IsNull() {
		return ""
	}
	var b strings.Builder
	fonts := map[string]pdf.TextEncoding{}
	var enc pdf.TextEncoding
	var (
		y, shownY      float64 // the baseline now, and of the last text shown
		scale          = 1.0   // the text matrix's vertical scale
		size           = 12.0  // the font size set by Tf
		shown, pending bool    // text was shown; a line break may be due
	)
	space := func() {
		if s := b.String(); s != "" && !strings.HasSuffix(s, " ") && !strings.HasSuffix(s, "\n") {
			b.WriteByte(' ')
		}
	}
	newline := func() {
		if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
	}
	show := func(raw string) {
		if pending && shown && math.Abs(y-shownY) >= 0.6*size*scale {
			newline()
		}
		pending, shown, shownY = false, true, y
		if b.Len() > 4*MaxPageTextBytes {
			return // normalize cuts it anyway
		}
		if enc == nil {
			b.WriteString(raw)
			return
		}
		b.WriteString(enc.Decode(raw))
	}
	pdf.Interpret(c, func(stk *pdf.Stack, op string) {
		args := make([]pdf.Value, stk.Len())
		for i := len(args) - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		switch op {
		case "BT":
			y, scale, pending = 0, 1, true
		case "T*":
			newline()
		case "Td", "TD":
			if len(args) == 2 {
				y += args[1].Float64() * scale
				pending = true
			}
		case "Tm":
			if len(args) == 6 {
				y, scale, pending = args[5].Float64(), math.Abs(args[3].Float64()), true
				if scale == 0 {
					scale = 1
				}
			}
		case "Tf":
			if len(args) == 2 {
				name := args[0].Name()
				e, ok := fonts[name]
				if !ok {
					f := p.Font(name)
					if !f.V.IsNull() {
						e = f.Encoder()
					}
					fonts[name] = e
				}
				enc = e
				if s := math.Abs(args[1].Float64()); s > 0 {
					size = s
				}
			}
		case "Tj":
			if len(args) == 1 {
				show(args[0].RawString())
			}
		case "'":
			if len(args) == 1 {
				newline()
				show(args[0].RawString())
			}
		case "\"":
			if len(args) == 3 {
				newline()
				show(args[2].RawString())
			}
		case "TJ":
			if len(args) == 1 {
				v := args[0]
				for i := range v.Len() {
					x := v.Index(i)
					switch x.Kind() {
					case pdf.String:
						show(x.RawString())
					case pdf.Integer, pdf.Real:
						// A word gap: a fifth of an em or more, as
						// pdftotext judges it.
						if x.Float64() < -200 {
							space()
						}
					}
				}
			}
		}
	})
	return b.String()
}

// inflateBounded inflates a page's content streams, counting, before the
// library does: a decompression bomb is refused after MaxInflateBytes
// instead of being read to its end.
func inflateBounded(c pdf.Value) error {
	var streams []pdf.Value
	switch c.Kind() {
	case pdf.Stream:
		streams = []pdf.Value{c}
	case pdf.Array:
		if c.Len() > 10_000 {
			return errors.New("a page has too many content streams")
		}
		for i := range c.Len() {
			streams = append(streams, c.Index(i))
		}
	}
	var total int64
	for _, s := range streams {
		if s.Kind() != pdf.Stream {
			continue
		}
		n, err := io.CopyN(io.Discard, s.Reader(), MaxInflateBytes-total+1)
		total += n
		if total > MaxInflateBytes {
			return fmt.Errorf("its content inflates to more than %d MiB", MaxInflateBytes>>20)
		}
		if err != nil && err != io.EOF {
			return errors.New(brief(err.Error()))
		}
	}
	return nil
}

// recoverAs turns a panic of the library into *err.
func recoverAs(err *error) {
	if v := recover(); v != nil {
		*err = errors.New(brief(fmt.Sprint(v)))
	}
}

// brief is a library message fit for the model: its "malformed PDF: "
// and similar prefixes dropped, valid UTF-8, at most 120 bytes.
func brief(s string) string {
	for _, p := range []string{"malformed PDF: ", "malformed PDF file: ", "not a PDF file: ", "unsupported PDF: "} {
		s = strings.TrimPrefix(s, p)
	}
	return cut(strings.ToValidUTF8(s, "\uFFFD"), 120)
}

// cut is s cut to at most n bytes on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// normalize turns a page's extracted text into what is shown: lines end
// in "\n" (no "\r"), no trailing spaces, no control characters but tabs,
// valid UTF-8, no blank lines at either end and never two in a row, at
// most MaxPageTextBytes.
func normalize(raw string) string {
	raw = strings.ToValidUTF8(raw, "\uFFFD")
	raw = strings.ReplaceAll(raw, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(raw))
	blank := 0
	for line := range strings.Lines(strings.ReplaceAll(raw, "\r", "\n")) {
		line = strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\t' || r == 0x7f {
				return -1
			}
			return r
		}, line)
		line = strings.TrimRight(line, " \t\u00a0")
		if line == "" {
			blank++
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
			if blank > 0 {
				b.WriteByte('\n')
			}
		}
		blank = 0
		b.WriteString(line)
		if b.Len() > MaxPageTextBytes {
			break
		}
	}
	return cut(b.String(), MaxPageTextBytes)
}
