package mcp_test

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "golang.org/x/image/webp" // image.DecodeConfig of what the server sends

	"github.com/toolfs/toolfs-api/internal/media"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// startMedia is a server of the given profile with --read-image-max-bytes
// maxBytes (0: the default) and --read-max-bytes readMax (0: the default);
// more changes the config further.
func startMedia(t *testing.T, profile string, maxBytes int64, readMax int, more ...func(*server.Config)) *harness {
	t.Helper()
	cfg := server.Config{
		Policy: policy.Settings{Enabled: true, TTL: time.Hour, MaxSessions: 100, MaxPathsPerSession: 100},
		Tools:  tools.Settings{Profile: profile, ReadMaxBytes: readMax}, Images: media.ImageLimits{MaxBytes: maxBytes},
		StreamWriteWindow: 10 * time.Second, Sessions: tools.SessionSettings{Default: "default"},
	}
	for _, m := range more {
		m(&cfg)
	}
	srv := servertest.Start(t, cfg)
	return &harness{t: t, srv: srv}
}

func (h *harness) put(rel string, b []byte) string {
	h.t.Helper()
	p := filepath.Join(h.srv.Root, rel)
	require.NoError(h.t, os.WriteFile(p, b, 0o644))
	return p
}

// gradient is a w x h opaque picture that neither compresses to nothing
// nor scales to one colour.
func gradient(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 5), uint8(x ^ y), 255})
		}
	}
	return img
}

// noise is a w x h opaque picture of random pixels: its PNG is about as
// large as its pixels.
func noise(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = uint8(rng.Uint32())
		if i%4 == 3 {
			img.Pix[i] = 255
		}
	}
	return img
}

func encoded(t *testing.T, format string, img image.Image) []byte {
	var b bytes.Buffer
	switch format {
	case "png":
		require.NoError(t, png.Encode(&b, img))
	case "jpeg":
		require.NoError(t, jpeg.Encode(&b, img, nil))
	case "gif":
		require.NoError(t, gif.Encode(&b, img, nil))
	}
	return b.Bytes()
}

type imageMeta struct {
	Path  string `json:"path"`
	Image struct {
		MediaType string `json:"mediaType"`
		Width     int    `json:"width"`
		Height    int    `json:"height"`
		Data      []byte `json:"data"`
	} `json:"image"`
}

func imageText(path, facts string) string {
	return "<path>" + path + "</path>\n<type>image</type>\n<content>\n" + facts + "\n</content>"
}

// TestImageRead: a PNG, JPEG, GIF and WebP, each named so that only its
// bytes tell what it is, read over REST (JSON, streamed text, /model/read)
// and MCP (the Go SDK's client): the exact text block first, then the
// picture, within the caps; the file's own bytes when they fit.
func TestImageRead(t *testing.T) {
	h := startMedia(t, "", 0, 0)
	webp, err := os.ReadFile("../media/testdata/small.webp")
	require.NoError(t, err)
	cases := []struct {
		name, mediaType string
		data            []byte
		w, h            int
	}{
		{"screenshot.txt", "image/png", encoded(t, "png", gradient(40, 30)), 40, 30},
		{"photo", "image/jpeg", encoded(t, "jpeg", gradient(64, 48)), 64, 48},
		{"anim.png", "image/gif", encoded(t, "gif", gradient(20, 10)), 20, 10},
		{"page.dat", "image/webp", webp, 255, 330},
	}
	c := h.connect("")
	for _, tc := range cases {
		t.Run(tc.mediaType, func(t *testing.T) {
			p := h.put(tc.name, tc.data)
			want := imageText(p, tc.mediaType+", "+strconv.Itoa(tc.w)+"x"+strconv.Itoa(tc.h)+" pixels, "+strconv.Itoa(len(tc.data))+" bytes")

			r := h.rest("read", map[string]any{"file_path": tc.name})
			require.Equal(t, http.StatusOK, r.Status, r.Output)
			assert.Equal(t, want, r.Output)
			var m imageMeta
			require.NoError(t, json.Unmarshal(r.Metadata, &m))
			assert.Equal(t, p, m.Path)
			assert.Equal(t, tc.mediaType, m.Image.MediaType)
			assert.Equal(t, [2]int{tc.w, tc.h}, [2]int{m.Image.Width, m.Image.Height})
			assert.Equal(t, tc.data, m.Image.Data, "within the caps, the file's own bytes")

			streamed := h.raw(http.MethodPost, "/tools/read", `{"file_path":"`+tc.name+`"}`, "Content-Type", "application/json", "Accept", "text/plain")
			assert.Equal(t, http.StatusOK, streamed.status)
			assert.Equal(t, want, streamed.body, "a streamed read answers the text alone")
			model := h.raw(http.MethodPost, "/model/read", `{"file_path":"`+tc.name+`"}`, "Content-Type", "application/json")
			assert.Equal(t, want, model.body)

			res := c.result(t, "read", map[string]any{"file_path": tc.name})
			require.False(t, res.IsError)
			require.Len(t, res.Content, 2)
			text, ok := res.Content[0].(*sdk.TextContent)
			require.True(t, ok, "first block is %T", res.Content[0])
			assert.Equal(t, want, text.Text)
			img, ok := res.Content[1].(*sdk.ImageContent)
			require.True(t, ok, "second block is %T", res.Content[1])
			assert.Equal(t, tc.mediaType, img.MIMEType)
			assert.Equal(t, tc.data, img.Data)
		})
	}
}

// TestImageScaledDown: a picture larger than --read-image-max-pixels is
// scaled to 1,568 px on its long side; one whose encoding passes
// --read-image-max-bytes is re-encoded (an opaque PNG as a JPEG) and, if
// need be, made smaller until it fits. The text says what was sent.
func TestImageScaledDown(t *testing.T) {
	t.Run("pixels", func(t *testing.T) {
		// The read caches on, any file at once: the MCP read is served the
		// picture the REST read made (a scale under the race detector on
		// a loaded machine took 6 s).
		h := startMedia(t, "", 0, 0, func(c *server.Config) { c.Cache.Bytes, c.Cache.RacyWindow = 32<<20, time.Nanosecond })
		data := encoded(t, "png", gradient(2000, 500))
		p := h.put("wide.png", data)
		r := h.rest("read", map[string]any{"file_path": "wide.png"})
		require.Equal(t, http.StatusOK, r.Status, r.Output)
		var m imageMeta
		require.NoError(t, json.Unmarshal(r.Metadata, &m))
		assert.Equal(t, imageText(p, "image/png, 2000x500 pixels, "+strconv.Itoa(len(data))+" bytes (sent as image/png, 1568x392 pixels, "+strconv.Itoa(len(m.Image.Data))+" bytes)"), r.Output)
		cfg, format, err := image.DecodeConfig(bytes.NewReader(m.Image.Data))
		require.NoError(t, err)
		assert.Equal(t, "png", format)
		assert.Equal(t, [2]int{1568, 392}, [2]int{cfg.Width, cfg.Height})

		res := h.connect("").result(t, "read", map[string]any{"file_path": "wide.png"})
		require.Len(t, res.Content, 2)
		assert.Equal(t, r.Output, res.Content[0].(*sdk.TextContent).Text)
		assert.Equal(t, m.Image.Data, res.Content[1].(*sdk.ImageContent).Data)
		metrics := h.raw(http.MethodGet, "/metrics", "").body
		assert.Contains(t, metrics, `toolfs_cache_hits_total{cache="media"} 1`)
	})
	t.Run("bytes", func(t *testing.T) {
		h := startMedia(t, "", 64<<10, 0)
		data := encoded(t, "png", noise(600, 600))
		require.Greater(t, len(data), 64<<10)
		h.put("big.png", data)
		r := h.rest("read", map[string]any{"file_path": "big.png"})
		require.Equal(t, http.StatusOK, r.Status, r.Output)
		var m imageMeta
		require.NoError(t, json.Unmarshal(r.Metadata, &m))
		assert.LessOrEqual(t, len(m.Image.Data), 64<<10)
		assert.Equal(t, "image/jpeg", m.Image.MediaType)
		cfg, format, err := image.DecodeConfig(bytes.NewReader(m.Image.Data))
		require.NoError(t, err)
		assert.Equal(t, "jpeg", format)
		assert.Equal(t, [2]int{m.Image.Width, m.Image.Height}, [2]int{cfg.Width, cfg.Height})
		assert.Contains(t, r.Output, "(sent as image/jpeg, "+strconv.Itoa(cfg.Width)+"x"+strconv.Itoa(cfg.Height)+" pixels, "+strconv.Itoa(len(m.Image.Data))+" bytes)")
	})
}

// pixelBomb is a PNG of 33 bytes whose header claims 100,000 x 100,000
// RGBA pixels (40 GB decoded).
func pixelBomb() []byte {
	ihdr := []byte("IHDR\x00\x01\x86\xa0\x00\x01\x86\xa0\x08\x06\x00\x00\x00")
	var crc [4]byte
	c := crc32IEEE(ihdr)
	crc[0], crc[1], crc[2], crc[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return append(append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0d"), ihdr...), crc[:]...)
}

// TestImagePixelBomb: refused from its header at once, 422 FS_TOO_LARGE,
// on both transports.
func TestImagePixelBomb(t *testing.T) {
	h := startMedia(t, "", 0, 0)
	p := h.put("bomb.png", pixelBomb())
	want := `Error: cannot read "` + p + `": image too large (100000x100000 pixels; at most 33554432 pixels can be decoded)`
	start := time.Now()
	r := h.rest("read", map[string]any{"file_path": "bomb.png"})
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status)
	assert.Equal(t, "FS_TOO_LARGE", r.Code)
	assert.Equal(t, want, r.Output)
	text, isErr := h.connect("").call(t, "read", map[string]any{"file_path": "bomb.png"})
	assert.True(t, isErr)
	assert.Equal(t, want, text)
}

// TestImageReadIsObservation: a write over an image needs a read of it,
// and an image read is one.
func TestImageReadIsObservation(t *testing.T) {
	h := startMedia(t, "", 0, 0)
	p := h.put("a.png", encoded(t, "png", gradient(8, 8)))
	w := h.rest("write", map[string]any{"file_path": "a.png", "content": "text now"})
	assert.Equal(t, http.StatusConflict, w.Status)
	assert.Equal(t, "FS_NOT_OBSERVED", w.Code)
	require.Equal(t, http.StatusOK, h.rest("read", map[string]any{"file_path": "a.png"}).Status)
	w = h.rest("write", map[string]any{"file_path": "a.png", "content": "text now"})
	assert.Equal(t, http.StatusOK, w.Status, w.Output)
	assert.Equal(t, "<path>"+p+"</path>\n<type>file</type>\n<content>\nUpdated file\n</content>", w.Output)
}

// TestOriginalProfileReadsNoMedia: the original profile is the original's
// surface: a PNG is a binary file, a PDF too.
func TestOriginalProfileReadsNoMedia(t *testing.T) {
	h := startMedia(t, "original", 0, 0)
	p := h.put("a.png", encoded(t, "png", gradient(8, 8)))
	r := h.rest("read", map[string]any{"file_path": "a.png"})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status)
	assert.Equal(t, `Error: cannot read "`+p+`": binary file`, r.Output)
}

func pdfText(path, body string) string {
	return "<path>" + path + "</path>\n<type>pdf</type>\n<content>\n" + body + "\n</content>"
}

func fixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile("../media/testdata/" + name)
	require.NoError(t, err)
	return b
}

// TestPDFRead: a three-page PDF read page by page, offset and limit
// counting pages, with each of the three footers, over REST and MCP.
func TestPDFRead(t *testing.T) {
	h := startMedia(t, "", 0, 0)
	p := h.put("doc.pdf", fixture(t, "chromium.pdf"))
	page1 := "--- page 1 ---\nBrowser print\nThe quick brown fox jumps over the lazy dog. Ünïcödé ✓ 日本語\n"
	page2 := "--- page 2 ---\nSecond page\nPage two text.\n"
	page3 := "--- page 3 ---\nThird page\nPage three text.\n"
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"whole", map[string]any{"file_path": "doc.pdf"}, pdfText(p, page1+"\n"+page2+"\n"+page3+"\n(End of file - total 3 pages)")},
		{"limit", map[string]any{"file_path": "doc.pdf", "limit": 2}, pdfText(p, page1+"\n"+page2+"\n(Showing pages 1-2 of 3. Use offset=3 to continue.)")},
		{"offset", map[string]any{"file_path": "doc.pdf", "offset": 3}, pdfText(p, page3+"\n(End of file - total 3 pages)")},
	}
	c := h.connect("")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.rest("read", tc.args)
			require.Equal(t, http.StatusOK, r.Status, r.Output)
			assert.Equal(t, tc.want, r.Output)
			text, isErr := c.call(t, "read", tc.args)
			assert.False(t, isErr)
			assert.Equal(t, tc.want, text)
		})
	}
	var m struct {
		Offset     int `json:"offset"`
		TotalPages int `json:"totalPages"`
		Pages      []struct {
			Number int    `json:"number"`
			Text   string `json:"text"`
		} `json:"pages"`
	}
	require.NoError(t, json.Unmarshal(h.rest("read", map[string]any{"file_path": "doc.pdf", "offset": 2, "limit": 1}).Metadata, &m))
	assert.Equal(t, 2, m.Offset)
	assert.Equal(t, 3, m.TotalPages)
	require.Len(t, m.Pages, 1)
	assert.Equal(t, 2, m.Pages[0].Number)
	assert.Equal(t, "Second page\nPage two text.", m.Pages[0].Text)

	r := h.rest("read", map[string]any{"file_path": "doc.pdf", "offset": 4})
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, `Error: offset 4 is out of range for "`+p+`" (3 pages)`, r.Output)
}

// TestPDFReadCapped: --read-max-bytes ends the window before a page that
// would pass it; a first page longer than the cap is cut, so paging always
// advances.
func TestPDFReadCapped(t *testing.T) {
	h := startMedia(t, "", 0, 40)
	p := h.put("doc.pdf", fixture(t, "chromium.pdf"))
	r := h.rest("read", map[string]any{"file_path": "doc.pdf", "offset": 2})
	require.Equal(t, http.StatusOK, r.Status, r.Output)
	assert.Equal(t, pdfText(p, "--- page 2 ---\nSecond page\nPage two text.\n\n(Output capped. Showing pages 2-2. Use offset=3 to continue.)"), r.Output)
	r = h.rest("read", map[string]any{"file_path": "doc.pdf"})
	assert.Equal(t, pdfText(p, "--- page 1 ---\nBrowser print\n... (page truncated to 40 bytes)\n\n(Output capped. Showing pages 1-1. Use offset=2 to continue.)"), r.Output)
}

// TestPDFReadFailures: a page without text, an encrypted PDF, a broken
// one, and a decompression bomb (2 GiB behind two FlateDecode filters in
// 9 KiB), refused in bounded time.
func TestPDFReadFailures(t *testing.T) {
	h := startMedia(t, "", 0, 0)
	scan := h.put("scan.pdf", fixture(t, "scan.pdf"))
	r := h.rest("read", map[string]any{"file_path": "scan.pdf"})
	assert.Equal(t, pdfText(scan, "--- page 1 ---\n(no text on this page)\n\n(End of file - total 1 pages)"), r.Output)

	cases := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"enc.pdf", fixture(t, "enc.pdf"), "encrypted PDF"},
		{"cut.pdf", fixture(t, "gs.pdf")[:1000], "broken PDF (missing %%EOF)"},
		{"bomb.pdf", fixture(t, "bomb.pdf"), "broken PDF (page 1: its content inflates to more than 32 MiB)"},
	}
	c := h.connect("")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := h.put(tc.name, tc.data)
			start := time.Now()
			r := h.rest("read", map[string]any{"file_path": tc.name})
			assert.Less(t, time.Since(start), 10*time.Second, "within the child's time bound")
			assert.Equal(t, http.StatusUnprocessableEntity, r.Status)
			assert.Equal(t, "FS_NOT_TEXT", r.Code)
			want := `Error: cannot read "` + p + `": ` + tc.reason
			assert.Equal(t, want, r.Output)
			text, isErr := c.call(t, "read", map[string]any{"file_path": tc.name})
			assert.True(t, isErr)
			assert.Equal(t, want, text)
		})
	}
}

func crc32IEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
