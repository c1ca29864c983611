package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// picture is a w x h image with a gradient, so it neither compresses to
// nothing nor scales to one colour.
func picture(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	return img
}

func encodePNG(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	require.NoError(t, jpeg.Encode(&b, img, nil))
	return b.Bytes()
}

func encodeGIF(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	require.NoError(t, gif.Encode(&b, img, nil))
	return b.Bytes()
}

// pngHeaderOnly is a valid PNG signature and IHDR chunk claiming w x h
// RGBA pixels, with no pixel data: a "pixel bomb" of 33 bytes (a real one
// would add a few KiB of compressed zeros; the header is what is checked).
func pngHeaderOnly(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], 13)
	b.Write(n[:])
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	binary.BigEndian.PutUint32(n[:], crc32.ChecksumIEEE(chunk))
	b.Write(n[:])
	return b.Bytes()
}

var lim = ImageLimits{MaxSide: DefaultMaxSide, MaxBytes: DefaultMaxBytes}

func TestSniff(t *testing.T) {
	webp, err := os.ReadFile("testdata/small.webp")
	require.NoError(t, err)
	cases := []struct {
		name string
		head []byte
		want Kind
	}{
		{"png", encodePNG(t, picture(2, 2)), KindPNG},
		{"jpeg", encodeJPEG(t, picture(2, 2)), KindJPEG},
		{"gif", encodeGIF(t, picture(2, 2)), KindGIF},
		{"webp", webp, KindWebP},
		{"pdf", []byte("%PDF-1.7\n"), KindPDF},
		{"text", []byte("hello\n"), KindNone},
		{"text naming a format", []byte("PNG is a format"), KindNone},
		{"empty", nil, KindNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Sniff(c.head[:min(len(c.head), SniffBytes)]))
		})
	}
}

func TestReadImage(t *testing.T) {
	small := encodePNG(t, picture(40, 30))
	p, err := ReadImage(context.Background(), bytes.NewReader(small), int64(len(small)), KindPNG, lim)
	require.NoError(t, err)
	assert.False(t, p.Reencoded())
	assert.Equal(t, small, p.Data, "an image within the limits is sent as it is")
	assert.Equal(t, [4]int{40, 30, 40, 30}, [4]int{p.Width, p.Height, p.SentWidth, p.SentHeight})

	big := encodeJPEG(t, picture(4000, 1000))
	p, err = ReadImage(context.Background(), bytes.NewReader(big), int64(len(big)), KindJPEG, lim)
	require.NoError(t, err)
	assert.True(t, p.Reencoded())
	assert.Equal(t, "image/jpeg", p.MediaType)
	assert.Equal(t, [2]int{1568, 392}, [2]int{p.SentWidth, p.SentHeight})
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(p.Data))
	require.NoError(t, err)
	assert.Equal(t, [2]int{1568, 392}, [2]int{cfg.Width, cfg.Height})

	// Over the byte limit: smaller until it fits.
	tight := ImageLimits{MaxSide: 4000, MaxBytes: 20 << 10}
	noisy := encodePNG(t, picture(1000, 1000))
	p, err = ReadImage(context.Background(), bytes.NewReader(noisy), int64(len(noisy)), KindPNG, tight)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(p.Data), 20<<10)
	_, _, err = image.Decode(bytes.NewReader(p.Data))
	require.NoError(t, err)
}

// TestPixelBomb: a 33-byte PNG claiming 100,000 x 100,000 pixels is
// refused from its header at once, without allocating its pixels.
func TestPixelBomb(t *testing.T) {
	bomb := pngHeaderOnly(100_000, 100_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := ReadImage(context.Background(), bytes.NewReader(bomb), int64(len(bomb)), KindPNG, lim)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	var tl *TooLargeError
	require.True(t, errors.As(err, &tl), "%v", err)
	assert.Equal(t, TooLargeError{Kind: KindPNG, Width: 100_000, Height: 100_000, MaxPixels: MaxDecodeBytes / 4}, *tl)
	assert.Less(t, elapsed, 100*time.Millisecond)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))
}

func TestBrokenImage(t *testing.T) {
	good := encodePNG(t, picture(64, 64))
	cut := good[:len(good)/2]
	_, err := ReadImage(context.Background(), bytes.NewReader(cut), int64(len(cut)), KindPNG, lim)
	var broken *BrokenError
	require.True(t, errors.As(err, &broken), "%v", err)
	assert.Equal(t, "invalid format: not enough pixel data", broken.Reason)
}

// FuzzImage: whatever the bytes, an image read ends with a picture or a
// broken or too-large error, and never panics.
func FuzzImage(f *testing.F) {
	f.Add(encodePNG(f, picture(8, 8)))
	f.Add(encodeJPEG(f, picture(8, 8)))
	f.Add(encodeGIF(f, picture(8, 8)))
	f.Add(pngHeaderOnly(100_000, 100_000))
	f.Fuzz(func(t *testing.T, data []byte) {
		k := Sniff(data[:min(len(data), SniffBytes)])
		if !k.IsImage() {
			k = KindPNG
		}
		p, err := ReadImage(context.Background(), bytes.NewReader(data), int64(len(data)), k, ImageLimits{MaxSide: 64, MaxBytes: 64 << 10})
		var broken *BrokenError
		var tl *TooLargeError
		switch {
		case err == nil:
			assert.LessOrEqual(t, max(p.SentWidth, p.SentHeight), 64)
		case errors.As(err, &broken), errors.As(err, &tl):
		default:
			t.Fatalf("unexpected error %T %v", err, err)
		}
	})
}

// TestResizeKeepsColours: a reduction through boxShrink and ApproxBiLinear
// keeps a uniform colour, from each decoder's own pixel type, alpha
// included.
func TestResizeKeepsColours(t *testing.T) {
	c := color.NRGBA{200, 100, 50, 255}
	half := color.NRGBA{200, 100, 50, 128}
	fill := func(img interface{ Set(x, y int, c color.Color) }, w, h int, c color.Color) {
		for y := range h {
			for x := range w {
				img.Set(x, y, c)
			}
		}
	}
	nrgba, rgba, gray := image.NewNRGBA(image.Rect(0, 0, 1000, 700)), image.NewRGBA(image.Rect(0, 0, 1000, 700)), image.NewGray(image.Rect(0, 0, 1000, 700))
	fill(nrgba, 1000, 700, half)
	fill(rgba, 1000, 700, c)
	fill(gray, 1000, 700, color.Gray{77})
	ycc, err := jpeg.Decode(bytes.NewReader(encodeJPEG(t, rgba)))
	require.NoError(t, err)
	cases := []struct {
		name   string
		img    image.Image
		opaque bool
		want   color.NRGBA
	}{
		{"nrgba", nrgba, false, half},
		{"rgba", rgba, true, c},
		{"ycbcr", ycc, true, c},
		{"gray", gray, true, color.NRGBA{77, 77, 77, 255}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := resize(tc.img, 100, 70, tc.opaque)
			got := color.NRGBAModel.Convert(out.At(50, 35)).(color.NRGBA)
			for i, d := range []int{int(got.R) - int(tc.want.R), int(got.G) - int(tc.want.G), int(got.B) - int(tc.want.B), int(got.A) - int(tc.want.A)} {
				assert.LessOrEqual(t, max(d, -d), 3, "channel %d: got %v want %v", i, got, tc.want)
			}
		})
	}
}
