package media

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"strconv"
	"strings"
	"testing"
)

// peakRSS resets the process's peak resident memory (Linux: clear_refs
// 5) and returns a function that reads how far it rose since, in bytes.
func peakRSS(b *testing.B) func() int64 {
	read := func() int64 {
		s, err := os.ReadFile("/proc/self/status")
		if err != nil {
			b.Skip("no /proc/self/status")
		}
		for line := range strings.Lines(string(s)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n << 10
			}
		}
		return 0
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skip("cannot reset the peak RSS: ", err)
	}
	base := read()
	return func() int64 { return read() - base }
}

// BenchmarkImageLargest reads the largest image the bounds let decode, an
// 8192 x 4096 RGBA PNG (128 MiB of pixels), scaled to 1568 px, and
// reports the peak RSS the read added (docs/media.md, "Cost"):
//
//	go test -run '^$' -bench Largest -benchtime 3x ./internal/media
func BenchmarkImageLargest(b *testing.B) {
	img := image.NewNRGBA(image.Rect(0, 0, 8192, 4096))
	for i := range img.Pix {
		img.Pix[i] = uint8(i / 4099)
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	img, buf = nil, bytes.Buffer{}
	var peak int64
	for b.Loop() {
		rise := peakRSS(b)
		p, err := ReadImage(context.Background(), bytes.NewReader(data), int64(len(data)), KindPNG, ImageLimits{MaxSide: DefaultMaxSide, MaxBytes: DefaultMaxBytes})
		if err != nil {
			b.Fatal(err)
		}
		if p.SentWidth != 1568 {
			b.Fatalf("sent %dx%d", p.SentWidth, p.SentHeight)
		}
		peak = max(peak, rise())
	}
	b.ReportMetric(float64(len(data))/(1<<20), "file-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
}

// BenchmarkPDFLargest reads page 1 of a PDF of MaxPDFBytes (1,000 pages of
// 128 KiB of text each), and reports the parent's and the child's peak
// RSS.
func BenchmarkPDFLargest(b *testing.B) {
	page := stream("", []byte(strings.Repeat("BT /F1 10 Tf 72 700 Td (The quick brown fox jumps over the lazy dog) Tj ET\n", 128<<10/76)))
	n := (MaxPDFBytes - 64<<10) / (len(page) + 200)
	// 1 the catalog, 2 the page tree, 3 the font, then each page and its
	// content.
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "", font}
	var kids strings.Builder
	for i := range n {
		fmt.Fprintf(&kids, "%d 0 R ", 4+2*i)
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i), page)
	}
	objs[1] = "<< /Type /Pages /Kids [" + kids.String() + "] /Count " + strconv.Itoa(n) + " >>"
	data := pdfOf(objs...)
	b.Logf("%d pages, %d bytes", n, len(data))
	var peak, child int64
	for b.Loop() {
		rise := peakRSS(b)
		d, err := OpenPDF(context.Background(), bytes.NewReader(data), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		text, err := d.Page(1)
		if err != nil || !strings.HasPrefix(text, "The quick brown fox") {
			b.Fatalf("%v %.40q", err, text)
		}
		d.Close()
		peak, child = max(peak, rise()), max(child, d.PeakRSS)
	}
	b.ReportMetric(float64(len(data))/(1<<20), "file-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "parent-peak-RSS-MiB")
	b.ReportMetric(float64(child)/(1<<20), "child-peak-RSS-MiB")
}
