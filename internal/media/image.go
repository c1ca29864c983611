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

// resize draws img at w x h. A large reduction first averages k x k
// blocks (boxShrink), so every source pixel counts and nothing aliases,
// down to less than twice the size wanted; x/image/draw's ApproxBiLinear
// does the rest, which at a ratio under 2 samples every pixel too. Its
// Kernel scalers would do it in one step but hold a float64 RGBA per
// source row and destination column: 205 MB for an 8192 x 4096 source.
// The result is an RGBA for an opaque image (the JPEG encoder's fast
// path), else an NRGBA.
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
	if k := min(img.Bounds().Dx()/w, img.Bounds().Dy()/h); k >= 2 {
		img = boxShrink(img, k)
	}
	draw.ApproxBiLinear.Scale(dst, r, img, img.Bounds(), draw.Src, nil)
	return dst
}

// boxShrink averages img's k x k blocks into one pixel each, premultiplied
// (a partial block at the right or bottom edge is dropped: at most k-1 of
// thousands of pixels). One pass over the source, a row of sums and the
// result in memory.
func boxShrink(img image.Image, k int) *image.RGBA {
	b := img.Bounds()
	ow, oh := b.Dx()/k, b.Dy()/k
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	sums := make([]uint32, 4*ow)
	row := make([]uint8, 4*ow*k) // one source row, premultiplied RGBA
	n := uint32(k * k)
	for oy := range oh {
		clear(sums)
		for dy := range k {
			rgbaRow(img, b.Min.X, b.Min.Y+oy*k+dy, ow*k, row)
			for i := 0; i < len(row); i += 4 {
				o := (i / 4 / k) * 4
				sums[o] += uint32(row[i])
				sums[o+1] += uint32(row[i+1])
				sums[o+2] += uint32(row[i+2])
				sums[o+3] += uint32(row[i+3])
			}
		}
		p := out.Pix[oy*out.Stride:]
		for i, s := range sums {
			p[i] = uint8((s + n/2) / n)
		}
	}
	return out
}

// rgbaRow fills row with the n premultiplied RGBA pixels of img's row y
// from x0, reading the decoders' own types directly.
func rgbaRow(img image.Image, x0, y, n int, row []uint8) {
	switch m := img.(type) {
	case *image.RGBA:
		copy(row, m.Pix[m.PixOffset(x0, y):])
	case *image.NRGBA:
		src := m.Pix[m.PixOffset(x0, y):]
		for i := 0; i < 4*n; i += 4 {
			a := uint32(src[i+3])
			row[i] = uint8((uint32(src[i])*a + 127) / 255)
			row[i+1] = uint8((uint32(src[i+1])*a + 127) / 255)
			row[i+2] = uint8((uint32(src[i+2])*a + 127) / 255)
			row[i+3] = uint8(a)
		}
	case *image.YCbCr:
		for i := range n {
			yi, ci := m.YOffset(x0+i, y), m.COffset(x0+i, y)
			r, g, bl := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			row[4*i], row[4*i+1], row[4*i+2], row[4*i+3] = r, g, bl, 255
		}
	case *image.Gray:
		src := m.Pix[m.PixOffset(x0, y):]
		for i := range n {
			v := src[i]
			row[4*i], row[4*i+1], row[4*i+2], row[4*i+3] = v, v, v, 255
		}
	default:
		for i := range n {
			r, g, bl, a := img.At(x0+i, y).RGBA()
			row[4*i], row[4*i+1], row[4*i+2], row[4*i+3] = uint8(r>>8), uint8(g>>8), uint8(bl>>8), uint8(a>>8)
		}
	}
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
