package media

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"
)

// The bounds of an image read (docs/media.md, "Images").
const (
	// MaxImageFileBytes is the largest image file read: it is read whole
	// into memory, before anything is decoded.
	MaxImageFileBytes = 64 << 20
	// MaxDecodeBytes bounds what a decoded image may take: the pixel count
	// its header states, times the bytes per pixel of its colour model, is
	// checked before any pixel is decoded, so a small file that claims
	// 100,000 x 100,000 pixels is refused at once.
	MaxDecodeBytes = 128 << 20
	// DefaultMaxSide and DefaultMaxBytes are --read-image-max-pixels and
	// --read-image-max-bytes: the long side and the encoded size of what a
	// model is sent.
	DefaultMaxSide  = 1568
	DefaultMaxBytes = 5 << 20
	// jpegQuality is the quality of a re-encoded JPEG.
	jpegQuality = 85
)

// ImageLimits bound what an image read sends: MaxSide pixels on the long
// side, MaxBytes bytes encoded. Both must be positive.
type ImageLimits struct {
	MaxSide  int
	MaxBytes int64
}

// Picture is a decoded image and what a model is sent of it.
type Picture struct {
	// Kind, Width, Height and Bytes describe the file.
	Kind          Kind
	Width, Height int
	Bytes         int64
	// MediaType, SentWidth, SentHeight and Data are what is sent: the
	// file's own bytes when they fit the limits, else a scaled or
	// re-encoded copy.
	MediaType             string
	SentWidth, SentHeight int
	Data                  []byte
}

// Reencoded says whether what is sent differs from the file.
func (p Picture) Reencoded() bool {
	return p.MediaType != p.Kind.MediaType() || p.SentWidth != p.Width || p.SentHeight != p.Height || int64(len(p.Data)) != p.Bytes
}

// decodeSlots bounds the images decoded at once, so their pixels together
// stay below 2 x MaxDecodeBytes.
var decodeSlots = make(chan struct{}, 2)

// ReadImage reads the image of kind k, size bytes, from src (read to its
// end), checks its header against MaxDecodeBytes, decodes it, and makes
// what a model is sent under lim. A file past a bound is a
// *TooLargeError, one that does not decode a *BrokenError; neither reads
// more than the header's bytes into pixels.
func ReadImage(ctx context.Context, src io.Reader, size int64, k Kind, lim ImageLimits) (Picture, error) {
	if size > MaxImageFileBytes {
		return Picture{}, &TooLargeError{Kind: k, Bytes: size, MaxBytes: MaxImageFileBytes}
	}
	b, err := io.ReadAll(io.LimitReader(src, MaxImageFileBytes+1))
	if err != nil {
		return Picture{}, err
	}
	if int64(len(b)) > MaxImageFileBytes { // grew since its stat
		return Picture{}, &TooLargeError{Kind: k, Bytes: int64(len(b)), MaxBytes: MaxImageFileBytes}
	}
	cfg, err := decodeConfig(k, b)
	if err != nil {
		return Picture{}, &BrokenError{Kind: k, Reason: reason(err)}
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Picture{}, &BrokenError{Kind: k, Reason: "no pixels"}
	}
	maxPixels := MaxDecodeBytes / bytesPerPixel(cfg.ColorModel)
	if int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return Picture{}, &TooLargeError{Kind: k, Width: cfg.Width, Height: cfg.Height, MaxPixels: maxPixels}
	}
	select {
	case decodeSlots <- struct{}{}:
	case <-ctx.Done():
		return Picture{}, ctx.Err()
	}
	defer func() { <-decodeSlots }()
	img, err := decode(k, b)
	if err != nil {
		return Picture{}, &BrokenError{Kind: k, Reason: reason(err)}
	}
	p := Picture{Kind: k, Width: cfg.Width, Height: cfg.Height, Bytes: int64(len(b))}
	// The decoded bounds, not the header's: a GIF's first frame may be
	// smaller than its logical screen.
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if max(w, h) <= lim.MaxSide && int64(len(b)) <= lim.MaxBytes && w == cfg.Width && h == cfg.Height {
		p.MediaType, p.SentWidth, p.SentHeight, p.Data = k.MediaType(), w, h, b
		return p, nil
	}
	return p.fit(ctx, img, lim)
}

// fit scales img to lim.MaxSide on its long side and encodes it: a JPEG
// stays a JPEG, anything else becomes a PNG (lossless, alpha kept), or a
// JPEG when it is opaque and its PNG is over lim.MaxBytes. Until the
// encoding fits lim.MaxBytes the size shrinks by a quarter.
func (p Picture) fit(ctx context.Context, img image.Image, lim ImageLimits) (Picture, error) {
	w, h := scaled(img.Bounds().Dx(), img.Bounds().Dy(), lim.MaxSide)
	opaque := isOpaque(img)
	for {
		if err := ctx.Err(); err != nil {
			return Picture{}, err
		}
		dst := resize(img, w, h, opaque)
		var buf bytes.Buffer
		mediaType := "image/png"
		if p.Kind == KindJPEG {
			mediaType = "image/jpeg"
			if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: jpegQuality}); err != nil {
				return Picture{}, err
			}
		} else {
			if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, dst); err != nil {
				return Picture{}, err
			}
			if int64(buf.Len()) > lim.MaxBytes && opaque {
				buf.Reset()
				mediaType = "image/jpeg"
				if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: jpegQuality}); err != nil {
					return Picture{}, err
				}
			}
		}
		if int64(buf.Len()) <= lim.MaxBytes || (w == 1 && h == 1) {
			p.MediaType, p.SentWidth, p.SentHeight, p.Data = mediaType, w, h, buf.Bytes()
			return p, nil
		}
		w, h = max(1, w*3/4), max(1, h*3/4)
	}
}

// scaled is w x h scaled to maxSide on its long side, never up, each side
// at least 1.
func scaled(w, h, maxSide int) (int, int) {
	if max(w, h) <= maxSide {
		return w, h
	}
	if w >= h {
		return maxSide, max(1, int(int64(h)*int64(maxSide)/int64(w)))
	}
	return max(1, int(int64(w)*int64(maxSide)/int64(h))), maxSide
}

// resize draws img at w x h: an RGBA for an opaque image (the JPEG
// encoder's fast path), else an NRGBA. x/image/draw's BiLinear kernel
// widens its support when it shrinks, so a large downscale averages
// instead of dropping pixels (moiré on screenshots of text).
func resize(img image.Image, w, h int, opaque bool) image.Image {
	r := image.Rect(0, 0, w, h)
	var dst draw.Image
	if opaque {
		dst = image.NewRGBA(r)
	} else {
		dst = image.NewNRGBA(r)
	}
	if w == img.Bounds().Dx() && h == img.Bounds().Dy() {
		draw.Draw(dst, r, img, img.Bounds().Min, draw.Src)
		return dst
	}
	draw.BiLinear.Scale(dst, r, img, img.Bounds(), draw.Src, nil)
	return dst
}

func isOpaque(img image.Image) bool {
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return false
}

func decodeConfig(k Kind, b []byte) (image.Config, error) {
	r := bytes.NewReader(b)
	switch k {
	case KindPNG:
		return png.DecodeConfig(r)
	case KindJPEG:
		return jpeg.DecodeConfig(r)
	case KindGIF:
		return gif.DecodeConfig(r)
	case KindWebP:
		return webp.DecodeConfig(r)
	}
	return image.Config{}, errNotImage
}

func decode(k Kind, b []byte) (img image.Image, err error) {
	defer func() {
		// A decoder's panic on a hostile file is a broken image, not a
		// crash of the server.
		if v := recover(); v != nil {
			img, err = nil, errDecoderPanic
		}
	}()
	r := bytes.NewReader(b)
	switch k {
	case KindPNG:
		return png.Decode(r)
	case KindJPEG:
		return jpeg.Decode(r)
	case KindGIF:
		return gif.Decode(r)
	case KindWebP:
		return webp.Decode(r)
	}
	return nil, errNotImage
}

// bytesPerPixel is what one pixel of a colour model takes decoded (a
// YCbCr JPEG counted as 4:4:4, its worst case).
func bytesPerPixel(m color.Model) int {
	switch m {
	case color.GrayModel, color.AlphaModel:
		return 1
	case color.Gray16Model, color.Alpha16Model:
		return 2
	case color.YCbCrModel:
		return 3
	case color.RGBA64Model, color.NRGBA64Model:
		return 8
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 4 // RGBA, NRGBA, CMYK, NYCbCrA (WebP with alpha: 4:4:4 + alpha at worst)
}
