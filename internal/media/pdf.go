package media

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The bounds of a PDF read (docs/media.md, "PDFs"). The text is extracted
// by a child process, a re-exec of the server's own binary, so that a
// hostile file (a page tree with a cycle, a decompression bomb, a parser
// bug that loops or recurses without end) costs at most PDFTimeout and
// PDFMemoryBytes, and then only the child.
const (
	// MaxPDFBytes is the largest PDF read; the child holds it in memory.
	MaxPDFBytes = 128 << 20
	// MaxPDFPages is the most pages a PDF's page tree may hold.
	MaxPDFPages = 100_000
	// PDFTimeout bounds one read of a PDF: the child is killed past it.
	PDFTimeout = 10 * time.Second
	// PDFMemoryBytes is the child's data segment and heap (RLIMIT_DATA;
	// RLIMIT_AS would count the address space the Go runtime reserves and
	// never uses, and failed at random at 1 GiB; not in
	// binaries built with -race, whose shadow memory needs terabytes of
	// it: there the other bounds hold alone).
	PDFMemoryBytes = 1 << 30
	// MaxInflateBytes bounds what one page's content streams inflate to.
	MaxInflateBytes = 32 << 20
	// MaxPageTextBytes bounds the text of one page the child sends.
	MaxPageTextBytes = 1 << 20
	// maxPageTreeDepth bounds the nesting of the page tree and the chain
	// of a page's parents: a cycle passes it.
	maxPageTreeDepth = 64
)

// pdfSlots bounds the PDF children running at once.
var pdfSlots = make(chan struct{}, 4)

// The child is recognised as the sandbox's is (internal/sandbox): argv[1]
// is a marker starting with a control character and the environment says
// so too. Request data never reaches either.
const (
	pdfChildMarker = "\x01toolfs-pdf-child"
	pdfChildEnv    = "_TOOLFS_PDF_CHILD"
)

func init() {
	// Any binary linking this package, every go test binary included,
	// must turn into the child when asked to.
	if len(os.Args) == 2 && os.Args[1] == pdfChildMarker && os.Getenv(pdfChildEnv) == "1" {
		os.Exit(runPDFChild(os.Stdin, os.Stdout))
	}
}

// The frames the child sends: a kind byte, a 4-byte big-endian length, the
// payload.
const (
	frameOK        = 0 // the document's page count (4 bytes), or a page's text
	frameEncrypted = 1
	frameBroken    = 2 // the reason
)

// PDF is a PDF opened in its child process. Close it when done; it is not
// safe for concurrent use.
type PDF struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *tailBuffer
	parent context.Context // the caller's
	ctx    context.Context // parent with PDFTimeout
	cancel context.CancelFunc
	pages  int
	closed bool
	waited bool
	err    error // sticky
	// PeakRSS is the child's peak resident memory in bytes (its VmHWM,
	// read just before Close ends it; the rusage of a child started by
	// vfork counts the parent's memory before the exec), known after Close.
	PeakRSS int64
}

// OpenPDF starts a child, sends it the PDF of size bytes read from src
// (read to its end), and waits for its page count. A PDF that needs a
// password is ErrEncrypted, one that cannot be read a *BrokenError, one
// larger than MaxPDFBytes a *TooLargeError.
func OpenPDF(ctx context.Context, src io.Reader, size int64) (*PDF, error) {
	if size > MaxPDFBytes {
		return nil, &TooLargeError{Kind: KindPDF, Bytes: size, MaxBytes: MaxPDFBytes}
	}
	select {
	case pdfSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d, err := startPDF(ctx, src, size)
	if err != nil {
		<-pdfSlots
		return nil, err
	}
	return d, nil
}

func startPDF(ctx context.Context, src io.Reader, size int64) (*PDF, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, PDFTimeout)
	cmd := exec.CommandContext(cctx, exe, pdfChildMarker)
	cmd.Env = []string{pdfChildEnv + "=1", "GOMAXPROCS=1", "GOTRACEBACK=none"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	d := &PDF{cmd: cmd, parent: ctx, ctx: cctx, cancel: cancel, stderr: &tailBuffer{max: 4096}}
	cmd.Stderr = d.stderr
	if d.stdin, err = cmd.StdinPipe(); err != nil {
		cancel()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	d.stdout = bufio.NewReaderSize(out, 64<<10)
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(size))
	_, err = d.stdin.Write(hdr[:])
	if err == nil {
		_, err = io.CopyN(d.stdin, src, size)
		var one [1]byte
		src.Read(one[:]) // reach EOF, so the provider's reader knows its hash
	}
	if err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, os.ErrClosed) {
		// The source failed (the child closing its end early is told by
		// its answer below).
		d.kill()
		return nil, err
	}
	kind, payload, ferr := d.frame()
	switch {
	case ferr != nil:
		d.kill()
		return nil, ferr
	case kind == frameEncrypted:
		d.kill()
		return nil, ErrEncrypted
	case kind == frameBroken:
		d.kill()
		return nil, &BrokenError{Kind: KindPDF, Reason: string(payload)}
	case len(payload) != 4:
		d.kill()
		return nil, &BrokenError{Kind: KindPDF, Reason: "the reader answered nonsense"}
	}
	d.pages = int(binary.BigEndian.Uint32(payload))
	return d, nil
}

// Pages is the document's page count.
func (d *PDF) Pages() int { return d.pages }

// Page is the text of page n (1-based), normalised (docs/media.md): ""
// for a page without a text layer.
func (d *PDF) Page(n int) (string, error) {
	if d.err != nil {
		return "", d.err
	}
	if n < 1 || n > d.pages {
		return "", fmt.Errorf("media: page %d of %d", n, d.pages)
	}
	var req [4]byte
	binary.BigEndian.PutUint32(req[:], uint32(n))
	if _, err := d.stdin.Write(req[:]); err != nil {
		d.err = d.failure(err)
		return "", d.err
	}
	kind, payload, err := d.frame()
	switch {
	case err != nil:
		d.err = err
		return "", err
	case kind == frameBroken:
		d.err = &BrokenError{Kind: KindPDF, Reason: fmt.Sprintf("page %d: %s", n, payload)}
		return "", d.err
	}
	return string(payload), nil
}

// Close ends the child and frees its slot.
func (d *PDF) Close() {
	if d.closed {
		return
	}
	d.closed = true
	d.PeakRSS = peakRSSOf(d.cmd.Process.Pid)
	d.stdin.Close() // the child exits at the end of its input
	d.wait()
	<-pdfSlots
}

// kill ends a child that failed to open (its slot is freed by OpenPDF).
func (d *PDF) kill() {
	d.closed = true
	d.cancel()
	d.wait()
}

func (d *PDF) wait() {
	if d.waited {
		return
	}
	d.waited = true
	d.cmd.Wait()
	d.cancel()
}

// peakRSSOf is a live process's VmHWM in bytes, 0 when unknown.
func peakRSSOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// frame reads one frame of the child's, bounded by MaxPageTextBytes.
func (d *PDF) frame() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(d.stdout, hdr[:]); err != nil {
		return 0, nil, d.failure(err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxPageTextBytes+1024 {
		return 0, nil, &BrokenError{Kind: KindPDF, Reason: "the reader answered nonsense"}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.stdout, b); err != nil {
		return 0, nil, d.failure(err)
	}
	return hdr[0], b, nil
}

// failure is why the child stopped answering: the caller went away, the
// time ran out, or it died (out of memory, a crash).
func (d *PDF) failure(err error) error {
	if d.ctx.Err() != nil {
		d.wait()
		if err := d.parent.Err(); err != nil {
			return err
		}
		return &BrokenError{Kind: KindPDF, Reason: "reading it took longer than " + PDFTimeout.String()}
	}
	d.wait()
	tail := d.stderr.String()
	switch {
	case strings.Contains(tail, "out of memory"), strings.Contains(tail, "cannot allocate memory"):
		return &BrokenError{Kind: KindPDF, Reason: "reading it needs more than " + fmt.Sprint(PDFMemoryBytes>>20) + " MiB"}
	case strings.Contains(tail, "stack exceeds"):
		return &BrokenError{Kind: KindPDF, Reason: "its objects nest too deeply"}
	}
	return &BrokenError{Kind: KindPDF, Reason: "the reader failed"}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(bytes.Clone(t.b)) }
