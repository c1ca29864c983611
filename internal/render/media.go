package render

import (
	"strconv"
	"strings"
)

// The texts of images and PDFs through read (docs/media.md).

// ImageFacts is what an image read's text says: the file's media type,
// pixel size and bytes, and, when what the model is sent differs, what is
// sent.
type ImageFacts struct {
	MediaType     string
	Width, Height int
	Bytes         int64
	// Sent is false when the file's own bytes are sent.
	Sent                  bool
	SentMediaType         string
	SentWidth, SentHeight int
	SentBytes             int64
}

// ImageOutput is an image read's text, in the shape of a read output:
// "<path>…</path>\n<type>image</type>\n<content>\nimage/png, 800x600
// pixels, 12345 bytes\n</content>", and when the image was scaled or
// re-encoded, " (sent as image/jpeg, 1568x1176 pixels, 234567 bytes)"
// after the bytes. It travels before the image itself, so a client that
// drops images still tells the model what is there.
func ImageOutput(display string, f ImageFacts) string {
	var b strings.Builder
	b.WriteString("<path>" + display + "</path>\n<type>image</type>\n<content>\n")
	b.WriteString(imageFacts(f.MediaType, f.Width, f.Height, f.Bytes))
	if f.Sent {
		b.WriteString(" (sent as " + imageFacts(f.SentMediaType, f.SentWidth, f.SentHeight, f.SentBytes) + ")")
	}
	b.WriteString("\n</content>")
	return b.String()
}

func imageFacts(mediaType string, w, h int, n int64) string {
	return mediaType + ", " + strconv.Itoa(w) + "x" + strconv.Itoa(h) + " pixels, " + strconv.FormatInt(n, 10) + " bytes"
}

// NoTextOnPage stands for the text of a PDF page without a text layer (a
// scanned page, a picture).
const NoTextOnPage = "(no text on this page)"

// Page is one shown page of a PDF: its 1-based number and its text (lines
// truncated as a read truncates them; NoTextOnPage when it has none).
type Page struct {
	Number int    `json:"number"`
	Text   string `json:"text"`
}

// PageWindow is a finished read window of a PDF: offset and limit count
// pages, and the byte cap counts the shown pages' texts plus one per
// joining newline, as a text read counts lines.
type PageWindow struct {
	Offset     int
	Pages      []Page
	TotalPages int
	Footer     Footer
}

// PageWindowOf builds the window of pages offset.. (at most limit) of a PDF
// of total pages; text(n) is page n's extracted text. It asks for the pages
// it shows and, when the cap may end the window, the one after. The first
// page is always shown, so paging always advances: one longer than the
// cap is cut at a line break before it (or at the cap) and ends with
// "... (page truncated to <max> bytes)". An offset past the last page is
// an *OffsetOutOfRangeError (offset 1 of a PDF without pages is not).
func PageWindowOf(offset, limit, total int, caps Caps, text func(n int) (string, error)) (PageWindow, error) {
	w := PageWindow{Offset: offset, TotalPages: total, Pages: []Page{}}
	if offset > total && !(offset == 1 && total == 0) {
		return PageWindow{}, &OffsetOutOfRangeError{Offset: offset, Total: total}
	}
	used := 0
	for n := offset; n <= total; n++ {
		if len(w.Pages) == limit {
			w.Footer = FooterLimit
			return w, nil
		}
		raw, err := text(n)
		if err != nil {
			return PageWindow{}, err
		}
		shown := pageText(raw, caps.MaxLineLength)
		cost := len(shown)
		if len(w.Pages) > 0 {
			cost++
		}
		if used+cost > caps.MaxBytes {
			if len(w.Pages) > 0 {
				w.Footer = FooterCapped
				return w, nil
			}
			w.Pages = append(w.Pages, Page{Number: n, Text: cutPage(shown, caps.MaxBytes)})
			if n < total {
				w.Footer = FooterCapped
			}
			return w, nil
		}
		used += cost
		w.Pages = append(w.Pages, Page{Number: n, Text: shown})
	}
	return w, nil
}

// pageText is a page's text as shown: each line truncated as a read
// truncates lines, NoTextOnPage for none.
func pageText(raw string, maxLine int) string {
	if strings.TrimSpace(raw) == "" {
		return NoTextOnPage
	}
	var b strings.Builder
	b.Grow(len(raw))
	for i, line := range strings.Split(raw, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(TruncateLine(line, maxLine))
	}
	return b.String()
}

// cutPage cuts a page's text to at most max bytes, at its last line break
// before max when it has one, else at a character boundary, and says so.
func cutPage(s string, max int) string {
	end := max
	for end > 0 && end < len(s) && s[end]&0xC0 == 0x80 {
		end--
	}
	if i := strings.LastIndexByte(s[:end], '\n'); i > 0 {
		end = i
	}
	return s[:end] + "\n... (page truncated to " + strconv.Itoa(max) + " bytes)"
}

// PageFooterText is a PDF window's one footer line, without a newline:
// the three footers of a text read with pages for lines.
func PageFooterText(w PageWindow) string {
	end := w.Offset - 1
	if n := len(w.Pages); n > 0 {
		end = w.Pages[n-1].Number
	}
	a, b, next := strconv.Itoa(w.Offset), strconv.Itoa(end), strconv.Itoa(end+1)
	switch w.Footer {
	case FooterCapped:
		return "(Output capped. Showing pages " + a + "-" + b + ". Use offset=" + next + " to continue.)"
	case FooterLimit:
		return "(Showing pages " + a + "-" + b + " of " + strconv.Itoa(w.TotalPages) + ". Use offset=" + next + " to continue.)"
	}
	return "(End of file - total " + strconv.Itoa(w.TotalPages) + " pages)"
}

// PDFOutput is a PDF read's text: the read output's shape with the type
// "pdf", each page headed "--- page <n> ---", a blank line between pages
// and before the footer.
func PDFOutput(display string, w PageWindow) string {
	var b strings.Builder
	b.WriteString("<path>" + display + "</path>\n<type>pdf</type>\n<content>\n")
	for i, p := range w.Pages {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("--- page " + strconv.Itoa(p.Number) + " ---\n")
		b.WriteString(p.Text)
		b.WriteByte('\n')
	}
	if len(w.Pages) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString(PageFooterText(w))
	b.WriteString("\n</content>")
	return b.String()
}

// MsgPageOutOfRange is the read message for an offset past a PDF's last
// page.
func MsgPageOutOfRange(offset int, display string, total int) string {
	return "offset " + strconv.Itoa(offset) + ` is out of range for "` + display + `" (` + strconv.Itoa(total) + " pages)"
}

// MsgReadBrokenPDF is the read message for a PDF that cannot be read
// (FS_NOT_TEXT).
func MsgReadBrokenPDF(display, reason string) string {
	return `cannot read "` + display + `": broken PDF (` + reason + ")"
}

// MsgReadEncryptedPDF is the read message for a PDF that needs a password
// (FS_NOT_TEXT).
func MsgReadEncryptedPDF(display string) string {
	return `cannot read "` + display + `": encrypted PDF`
}

// MsgReadBrokenImage is the read message for an image that does not
// decode (FS_NOT_TEXT).
func MsgReadBrokenImage(display, reason string) string {
	return `cannot read "` + display + `": broken image (` + reason + ")"
}

// MsgImageTooLarge is the read message for an image whose header claims
// more pixels than may be decoded (FS_TOO_LARGE).
func MsgImageTooLarge(display string, w, h, maxPixels int) string {
	return `cannot read "` + display + `": image too large (` + strconv.Itoa(w) + "x" + strconv.Itoa(h) + " pixels; at most " + strconv.Itoa(maxPixels) + " pixels can be decoded)"
}

// MsgMediaFileTooLarge is the read message for an image or PDF file
// larger than can be read (FS_TOO_LARGE); what is "image" or "PDF".
func MsgMediaFileTooLarge(display, what string, size, max int64) string {
	return `cannot read "` + display + `": ` + what + " too large (" + strconv.FormatInt(size, 10) + " bytes; at most " + strconv.FormatInt(max, 10) + ")"
}
