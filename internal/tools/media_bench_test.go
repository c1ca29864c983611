package tools_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfs/toolfs-api/internal/tools"
)

// BenchmarkReadMedia is the cost of one read through the executor (caches
// off) of an image against a text read of a file of the same bytes, and
// of one PDF page (docs/media.md, "Cost"):
//
//	go test -run '^$' -bench ReadMedia -benchmem -count 6 ./internal/tools
func BenchmarkReadMedia(b *testing.B) {
	root := tempRoot(b)
	x, _, _ := cachedExecutor(b, root, tools.CacheConfig{})
	write := func(name string, data []byte) int {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
		return len(data)
	}
	small := pngOf(b, noisy(400, 300))    // within the caps: decoded, sent as it is
	photo := jpegOf(b, noisy(3000, 2000)) // scaled to 1568 and re-encoded
	write("small.png", small)
	write("small.txt", textOf(len(small)))
	write("photo.jpg", photo)
	write("photo.txt", textOf(len(photo)))
	pdf, err := os.ReadFile("../media/testdata/chromium.pdf")
	if err != nil {
		b.Fatal(err)
	}
	write("doc.pdf", pdf)
	for _, tc := range []struct{ name, args string }{
		{fmt.Sprintf("text=%dB", len(small)), `{"file_path":"small.txt"}`},
		{fmt.Sprintf("png=400x300,%dB", len(small)), `{"file_path":"small.png"}`},
		{fmt.Sprintf("text=%dB", len(photo)), `{"file_path":"photo.txt"}`},
		{fmt.Sprintf("jpeg=3000x2000,%dB", len(photo)), `{"file_path":"photo.jpg"}`},
		{"pdf=1page", `{"file_path":"doc.pdf","limit":1}`},
		{"pdf=3pages", `{"file_path":"doc.pdf"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				rd, terr := x.Read(context.Background(), tools.Call{Transport: "bench"}, []byte(tc.args))
				if terr != nil {
					b.Fatal(tools.Output(terr))
				}
				if _, terr := rd.Window(context.Background()); terr != nil {
					b.Fatal(tools.Output(terr))
				}
			}
		})
	}
}

func noisy(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			v := uint8(x/4 + y/4)
			img.SetRGBA(x, y, color.RGBA{v + uint8(rng.IntN(16)), v, uint8(x ^ y), 255})
		}
	}
	return img
}

func pngOf(b testing.TB, img image.Image) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func jpegOf(b testing.TB, img image.Image) []byte {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// textOf is n bytes of 80-byte lines.
func textOf(n int) []byte {
	line := strings.Repeat("x", 79) + "\n"
	return []byte(strings.Repeat(line, n/80+1)[:n])
}
