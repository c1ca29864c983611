package render_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/toolfs/toolfs-api/internal/render"
)

// A streaming read: copy the file into a Windower, send each batch of Ready
// lines as it comes (the header only with the first), then the tail.
func ExampleWindower() {
	file := strings.NewReader("alpha\r\nbeta\ngamma\ndelta\n")
	w := render.NewWindower(2, 2, render.DefaultCaps())
	out := os.Stdout
	started := false
	send := func(lines []render.Line) {
		for _, l := range lines {
			if !started {
				fmt.Fprint(out, render.ReadHeader("/w/notes.txt"))
				started = true
			}
			fmt.Fprintf(out, "%d: %s\n", l.Number, l.Text)
		}
	}
	buf := make([]byte, 4) // any chunk size gives the same window
	for {
		n, err := file.Read(buf)
		if _, werr := w.Write(buf[:n]); werr != nil {
			fmt.Println(werr) // ErrBinary or ErrInvalidUTF8: abort
			return
		}
		send(w.Ready())
		if errors.Is(err, io.EOF) {
			break
		}
	}
	win, err := w.Close()
	if err != nil {
		fmt.Println(err)
		return
	}
	send(w.Ready())
	if !started {
		fmt.Fprint(out, render.ReadHeader("/w/notes.txt"))
	}
	fmt.Fprint(out, render.ReadTail(win))
	// Output:
	// <path>/w/notes.txt</path>
	// <type>file</type>
	// <content>
	// 2: beta
	// 3: gamma
	//
	// (Showing lines 2-3 of 4. Use offset=4 to continue.)
	// </content>
}

func ExampleDiffs() {
	for _, d := range render.Diffs("config.txt", "mode=DEBUG\nlevel=info\n", "mode=RELEASE\nlevel=info\n") {
		fmt.Printf("%q -> %q\n", *d.OldText, d.NewText)
	}
	// Output:
	// "mode=DEBUG\nlevel=info" -> "mode=RELEASE\nlevel=info"
}
