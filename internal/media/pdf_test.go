package media

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readPDF opens data in its child and returns every page's text.
func readPDF(t testing.TB, data []byte) ([]string, error) {
	t.Helper()
	d, err := OpenPDF(context.Background(), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var pages []string
	for n := 1; n <= d.Pages(); n++ {
		s, err := d.Page(n)
		if err != nil {
			return pages, err
		}
		pages = append(pages, s)
	}
	return pages, nil
}

// TestPDFProducers reads the PDFs of five producers (testdata, made with
// the commands in docs/media.md): a browser's print, a word processor,
// LaTeX, Ghostscript, and a scanned page (an image, no text).
func TestPDFProducers(t *testing.T) {
	cases := []struct {
		file  string
		pages []string
	}{
		{"chromium.pdf", []string{
			"Browser print\nThe quick brown fox jumps over the lazy dog. Ünïcödé ✓ 日本語",
			"Second page\nPage two text.",
			"Third page\nPage three text.",
		}},
		{"libreoffice.pdf", []string{
			"Word processor page one. The quick brown fox jumps over the lazy dog.",
			"Page two from LibreOffice Writer.",
		}},
		{"latex.pdf", []string{
			"1 LaTeX page one\nThe quick brown fox jumps over the lazy dog. Ligatures: office, file, flow. Math\na2+b2=c2.\n1",
			"2 Page two\nSecond page of the LaTeX document.\n2",
		}},
		{"gs.pdf", []string{"Ghostscript page one: hello PDF", "Ghostscript page two", ""}},
		{"scan.pdf", []string{""}},
		{"enc-owner.pdf", nil}, // AES-256, owner password only: the library lacks AES-256
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + c.file)
			require.NoError(t, err)
			pages, err := readPDF(t, data)
			if c.pages == nil {
				assert.ErrorIs(t, err, ErrEncrypted)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.pages, pages)
		})
	}
}

func TestPDFEncrypted(t *testing.T) {
	data, err := os.ReadFile("testdata/enc.pdf")
	require.NoError(t, err)
	_, err = readPDF(t, data)
	assert.ErrorIs(t, err, ErrEncrypted)
}

// pdfOf assembles a PDF of the given objects (numbered from 1) with a
// correct cross-reference table; root is the catalog's number.
func pdfOf(objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

func stream(dict string, data []byte) string {
	return fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
}

func deflate(t testing.TB, data []byte, zeros int64) []byte {
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevel(&b, zlib.BestCompression)
	w.Write(data)
	chunk := make([]byte, 1<<20)
	for zeros > 0 {
		n := min(zeros, int64(len(chunk)))
		w.Write(chunk[:n])
		zeros -= n
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

const font = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"

// bombPDF is a PDF whose one page's content is 2 GiB of zeros behind two
// FlateDecode filters: 2 KiB on disk. TestMakeBomb wrote testdata/bomb.pdf
// with it (35 s).
func bombPDF(t testing.TB) []byte {
	return pdfOf(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		font,
		stream("/Filter [/FlateDecode /FlateDecode]", deflate(t, deflate(t, nil, 2<<30), 0)),
	)
}

func TestMakeBomb(t *testing.T) {
	if os.Getenv("TOOLFS_MAKE_BOMB") == "" {
		t.Skip("TOOLFS_MAKE_BOMB=1 writes testdata/bomb.pdf")
	}
	require.NoError(t, os.WriteFile("testdata/bomb.pdf", bombPDF(t), 0o644))
}

// TestPDFHostile: every hostile PDF is a broken PDF with its reason, in
// bounded time, and the child's memory stays bounded.
func TestPDFHostile(t *testing.T) {
	content := []byte("BT /F1 12 Tf 72 700 Td (Hello) Tj ET")
	bomb, err := os.ReadFile("testdata/bomb.pdf")
	require.NoError(t, err)
	cases := []struct {
		name   string
		pdf    []byte
		reason string
	}{
		{"page tree cycle", pdfOf(
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			"<< /Type /Pages /Kids [2 0 R] /Count 1 /Parent 2 0 R >>",
		), "the page tree has a cycle or is too deep"},
		{"parent cycle", pdfOf(
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 4 0 R >>",
			"<< /Type /Page /Parent 2 0 R /Contents 5 0 R >>",
			"<< /Type /Pages /Kids [2 0 R] /Count 1 /Parent 2 0 R >>",
			stream("", content),
		), "page 1: the page tree has a cycle"},
		{"decompression bomb", bomb, "page 1: its content inflates to more than 32 MiB"},
		{"truncated", pdfOf("<< /Type /Catalog /Pages 2 0 R >>")[:40], "missing %%EOF"},
		{"not a PDF after its header", []byte("%PDF-1.4\n" + strings.Repeat("x", 200) + "\n%%EOF\n"), "missing final startxref"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			d, err := OpenPDF(context.Background(), bytes.NewReader(c.pdf), int64(len(c.pdf)))
			if err == nil {
				_, err = d.Page(1)
				d.Close()
				t.Logf("child peak RSS %d MiB", d.PeakRSS>>20)
				assert.Less(t, d.PeakRSS, int64(PDFMemoryBytes))
			}
			var broken *BrokenError
			require.True(t, errors.As(err, &broken), "%v", err)
			assert.Equal(t, c.reason, broken.Reason)
			assert.Less(t, time.Since(start), PDFTimeout)
		})
	}
}

// prevCycle is a PDF whose cross-reference section names itself as the
// one before it: the library's NewReader loops on it without end, where no
// guard of ours can reach.
func prevCycle() []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%" + strings.Repeat("-", 100) + "\n")
	x := b.Len()
	fmt.Fprintf(&b, "xref\n0 1\n0000000000 65535 f \ntrailer\n<< /Size 1 /Root 1 0 R /Prev %d >>\nstartxref\n%d\n%%%%EOF\n", x, x)
	return b.Bytes()
}

// TestPDFPrevCycle: a child that does not answer within PDFTimeout is
// killed and the read is a broken PDF saying so.
func TestPDFPrevCycle(t *testing.T) {
	if testing.Short() {
		t.Skip("takes PDFTimeout")
	}
	start := time.Now()
	_, err := readPDF(t, prevCycle())
	var broken *BrokenError
	require.True(t, errors.As(err, &broken), "%v", err)
	assert.Equal(t, "reading it took longer than 10s", broken.Reason)
	assert.Less(t, time.Since(start), PDFTimeout+3*time.Second)
}

func TestPDFTooLarge(t *testing.T) {
	_, err := OpenPDF(context.Background(), strings.NewReader(""), MaxPDFBytes+1)
	var tl *TooLargeError
	require.True(t, errors.As(err, &tl))
	assert.Equal(t, int64(MaxPDFBytes), tl.MaxBytes)
}

// TestPDFCancel: a caller that goes away ends the child at once.
func TestPDFCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	b := prevCycle()
	_, err := OpenPDF(ctx, bytes.NewReader(b), int64(len(b)))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 3*time.Second)
}

// FuzzPDF: whatever the bytes, a PDF read ends in bounded time with pages
// or a broken, encrypted or too-large error, and the server never panics.
func FuzzPDF(f *testing.F) {
	for _, name := range []string{"gs.pdf", "libreoffice.pdf", "scan.pdf", "enc.pdf"} {
		data, err := os.ReadFile("testdata/" + name)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add(pdfOf("<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 1 >>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pages, err := readPDF(t, data)
		var broken *BrokenError
		var tl *TooLargeError
		if err != nil && !errors.As(err, &broken) && !errors.Is(err, ErrEncrypted) && !errors.As(err, &tl) {
			t.Fatalf("unexpected error %T %v", err, err)
		}
		for _, p := range pages {
			assert.LessOrEqual(t, len(p), MaxPageTextBytes)
		}
	})
}
