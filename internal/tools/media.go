package tools

import (
	"context"
	"errors"
	"io"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/media"
	"github.com/toolfs/toolfs-api/internal/render"
)

// CacheMedia is the cache of image and PDF answers, by version (and, for a
// PDF, offset, limit and caps).
const CacheMedia = "media"

// ReadImage is an image read's picture as the model is sent it
// (metadata.image; MCP's image block): Data is the encoded image, base64
// in JSON.
type ReadImage struct {
	MediaType string `json:"mediaType"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	Data      []byte `json:"data"`
}

// mediaAnswer is the answer of an image or PDF read: its text and, for an
// image, the picture; for a PDF, the page window.
type mediaAnswer struct {
	output string
	image  *ReadImage
	pages  *render.PageWindow
}

func (m *mediaAnswer) size() int64 {
	n := int64(len(m.output))
	if m.image != nil {
		n += int64(len(m.image.Data))
	}
	if m.pages != nil {
		for _, p := range m.pages.Pages {
			n += int64(len(p.Text)) + 24
		}
	}
	return n
}

// contentBytes is what the answer carries of the file: the picture's
// encoded bytes, the pages' text (a trace span's bytes read).
func (m *mediaAnswer) contentBytes() int64 {
	var n int64
	if m.image != nil {
		n += int64(len(m.image.Data))
	}
	if m.pages != nil {
		for _, p := range m.pages.Pages {
			n += int64(len(p.Text))
		}
	}
	return n
}

// sniff says what the opened file's first bytes are, for the extended
// profile (the original reads every file as text): one pread that moves
// nothing.
func (x *Executor) sniff(f io.Reader, size int64) media.Kind {
	ra, ok := f.(io.ReaderAt)
	if x.profile == render.ProfileOriginal || !ok || size < 3 {
		return media.KindNone
	}
	var head [media.SniffBytes]byte
	n, _ := ra.ReadAt(head[:], 0)
	return media.Sniff(head[:n])
}

// mediaKey is the cache key of a media answer: a picture depends on the
// version alone, a PDF window also on the window.
func (r *Reading) mediaKey() cacheKey {
	if r.kind.IsImage() {
		return cacheKey{cache: CacheMedia, version: r.info.Version}
	}
	return cacheKey{cache: CacheMedia, version: r.info.Version, offset: r.offset, limit: r.limit, caps: r.x.caps}
}

// readMedia answers an image or PDF read (docs/media.md) and records it
// as a text read would be: the observation of the version read, the
// footer of a PDF window, the call.
func (r *Reading) readMedia(ctx context.Context) (ReadResult, *fault.Error) {
	c := r.x.cache
	var ans *mediaAnswer
	var h fs.Hash
	if c != nil {
		if e, ok := c.get(r.mediaKey()); ok {
			ans, h = e.media, e.hash
		}
	}
	if ans == nil {
		var err error
		if r.kind.IsImage() {
			ans, err = r.image(ctx)
		} else {
			ans, err = r.pdf(ctx)
		}
		r.file.Close()
		if err != nil {
			return ReadResult{}, r.x.fail(r.c, ToolRead, r.mediaFailure(err))
		}
		h = r.contentHash()
		if c != nil && c.cacheable(r.info, r.at) {
			c.put(&cached{key: r.mediaKey(), media: ans, hash: h, size: ans.size()})
		}
	} else {
		r.file.Close()
	}
	r.x.storeFailed("observe", r.x.gateOf(r.c).ObservePresent(r.c.key(), r.target.Key, r.info.Version, h))
	if ans.pages != nil {
		r.x.obs.ReadFooter(ans.pages.Footer.String())
	}
	if r.c.Span != nil {
		r.c.Span.Read(ans.contentBytes())
	}
	r.x.done(r.c, ToolRead, CodeOK)
	d := r.target.Display
	meta := ReadMetadata{Path: d, Offset: 1, Lines: []render.Line{}, Image: ans.image}
	if p := ans.pages; p != nil {
		meta.Offset, meta.Pages, meta.TotalPages = p.Offset, p.Pages, &p.TotalPages
	}
	return ReadResult{Display: d, Meta: meta, media: ans}, nil
}

func (r *Reading) image(ctx context.Context) (*mediaAnswer, error) {
	p, err := media.ReadImage(ctx, r.file, r.info.Size, r.kind, r.x.images)
	if err != nil {
		return nil, err
	}
	f := render.ImageFacts{MediaType: p.Kind.MediaType(), Width: p.Width, Height: p.Height, Bytes: p.Bytes}
	if p.Reencoded() {
		f.Sent, f.SentMediaType, f.SentWidth, f.SentHeight, f.SentBytes = true, p.MediaType, p.SentWidth, p.SentHeight, int64(len(p.Data))
	}
	return &mediaAnswer{
		output: render.ImageOutput(r.target.Display, f),
		image:  &ReadImage{MediaType: p.MediaType, Width: p.SentWidth, Height: p.SentHeight, Data: p.Data},
	}, nil
}

func (r *Reading) pdf(ctx context.Context) (*mediaAnswer, error) {
	doc, err := media.OpenPDF(ctx, r.file, r.info.Size)
	if err != nil {
		return nil, err
	}
	defer doc.Close()
	w, err := render.PageWindowOf(r.offset, r.limit, doc.Pages(), r.x.caps, doc.Page)
	if err != nil {
		return nil, err
	}
	return &mediaAnswer{output: render.PDFOutput(r.target.Display, w), pages: &w}, nil
}

// mediaFailure words what went wrong reading an image or PDF.
func (r *Reading) mediaFailure(err error) *fault.Error {
	d := r.target.Display
	var tooLarge *media.TooLargeError
	var broken *media.BrokenError
	var oor *render.OffsetOutOfRangeError
	switch {
	case errors.As(err, &tooLarge) && tooLarge.Width > 0:
		return fault.New(fault.CodeTooLarge, render.MsgImageTooLarge(d, tooLarge.Width, tooLarge.Height, tooLarge.MaxPixels))
	case errors.As(err, &tooLarge):
		what := "image"
		if tooLarge.Kind == media.KindPDF {
			what = "PDF"
		}
		return fault.New(fault.CodeTooLarge, render.MsgMediaFileTooLarge(d, what, tooLarge.Bytes, tooLarge.MaxBytes))
	case errors.As(err, &broken) && broken.Kind == media.KindPDF:
		return &fault.Error{Code: fault.CodeNotText, Message: render.MsgReadBrokenPDF(d, broken.Reason), Err: err}
	case errors.As(err, &broken):
		return &fault.Error{Code: fault.CodeNotText, Message: render.MsgReadBrokenImage(d, broken.Reason), Err: err}
	case errors.Is(err, media.ErrEncrypted):
		return fault.New(fault.CodeNotText, render.MsgReadEncryptedPDF(d))
	case errors.As(err, &oor):
		return fault.New(fault.CodeNotFound, render.MsgPageOutOfRange(oor.Offset, d, oor.Total))
	}
	return errorOf(err)
}

// streamMedia answers a streamed read of an image or PDF with its text
// alone (a text/plain body cannot carry a picture; docs/media.md): the
// whole answer is known before the first byte leaves, so a failure is an
// ordinary error answer.
func (r *Reading) streamMedia(ctx context.Context, sink LineSink) (begun bool, _ *fault.Error) {
	res, err := r.readMedia(ctx)
	if err != nil {
		return false, err
	}
	out := res.Output()
	if ts, ok := sink.(TextSink); ok {
		if err := ts.Text([]byte(out)); err != nil {
			return true, r.abort(err)
		}
		return true, nil
	}
	if err := sink.Begin(out); err != nil {
		return true, r.abort(err)
	}
	if err := sink.End(""); err != nil {
		return true, r.abort(err)
	}
	return true, nil
}
