// Package media recognises the files a read answers other than as text
// (docs/media.md): images (PNG, JPEG, GIF, WebP), which it decodes within
// bounds and scales down to what a model is sent, and PDFs, whose text it
// extracts page by page in a child process bounded in time and memory. It
// recognises a file by its first bytes, never by its name. It imports
// nothing of this module: its failures are its own error types, which the
// executor words (internal/render).
package media

import (
	"bytes"
	"errors"
	"strconv"
)

// Kind is what a file's first bytes say it is.
type Kind int

// The kinds Sniff tells apart.
const (
	KindNone Kind = iota // anything else: read as text
	KindPNG
	KindJPEG
	KindGIF
	KindWebP
	KindPDF
)

// SniffBytes is how many leading bytes Sniff needs at most.
const SniffBytes = 16

// Sniff says what head, a file's first bytes (SniffBytes of them, or the
// whole file when it is shorter), is. Only the format's signature counts:
// a PNG named a.txt is an image, a text named a.png is text.
func Sniff(head []byte) Kind {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return KindPNG
	case bytes.HasPrefix(head, []byte("\xff\xd8\xff")):
		return KindJPEG
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return KindGIF
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		return KindWebP
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return KindPDF
	}
	return KindNone
}

// IsImage says whether k is one of the image kinds.
func (k Kind) IsImage() bool { return k >= KindPNG && k <= KindWebP }

// MediaType is k's media type ("" for KindNone).
func (k Kind) MediaType() string {
	switch k {
	case KindPNG:
		return "image/png"
	case KindJPEG:
		return "image/jpeg"
	case KindGIF:
		return "image/gif"
	case KindWebP:
		return "image/webp"
	case KindPDF:
		return "application/pdf"
	}
	return ""
}

// TooLargeError is a file past a bound of this package: an image whose
// pixels would take more than MaxDecodeBytes decoded, or a file larger
// than MaxImageFileBytes or MaxPDFBytes. The executor answers it as
// FS_TOO_LARGE.
type TooLargeError struct {
	Kind Kind
	// Width and Height are an image's pixel size as its header states it
	// (0 for a file refused by its byte size), MaxPixels the most this
	// image's colour model may have.
	Width, Height, MaxPixels int
	// Bytes and MaxBytes are the file's size and its bound, when the byte
	// size refused it.
	Bytes, MaxBytes int64
}

func (e *TooLargeError) Error() string {
	if e.Width > 0 {
		return "media: " + strconv.Itoa(e.Width) + "x" + strconv.Itoa(e.Height) + " pixels, more than " + strconv.Itoa(e.MaxPixels)
	}
	return "media: " + strconv.FormatInt(e.Bytes, 10) + " bytes, more than " + strconv.FormatInt(e.MaxBytes, 10)
}

// BrokenError is a file of a recognised kind that cannot be read: Reason
// says why, in a few words fit for the model.
type BrokenError struct {
	Kind   Kind
	Reason string
}

func (e *BrokenError) Error() string { return "media: broken " + e.Kind.MediaType() + ": " + e.Reason }

// ErrEncrypted is a PDF that cannot be opened without a password.
var ErrEncrypted = errors.New("media: encrypted PDF")
