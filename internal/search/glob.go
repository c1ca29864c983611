package search

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/toolfs/toolfs-api/internal/fs"
)

// vcsDirs are never listed by glob: their metadata is noise to a model.
var vcsDirs = []string{".git", ".svn", ".hg", ".bzr", ".jj", ".sl"}

const globRecovery = "The complete result could not be saved; narrow pattern or path to see more."

// privateGlobs hide the provider's own files (fs.Workspace.PrivateGlobs;
// docs/search.md). rg matches a glob relative to the folder it searches,
// not to the root, so each is anchored at any depth. They come after the
// caller's glob: in rg the later glob wins, so no pattern or include can
// bring them back.
func privateGlobs(ws fs.Workspace) []string {
	globs := ws.PrivateGlobs()
	args := make([]string, len(globs))
	for i, g := range globs {
		args[i] = "--glob=!**/" + strings.TrimPrefix(g, "**/")
	}
	return args
}

// globArgs is the original tool-fs's argv after --no-config: files only, oldest
// first, hidden and ignored files included (--no-ignore also reads no ignore
// file anywhere), VCS folders and the server's private files excluded.
func globArgs(private []string, pattern, root string) []string {
	args := make([]string, 0, 9+2*len(vcsDirs)+len(private))
	args = append(args, "--files", "--glob="+pattern, "--sort=modified", "--no-ignore", "--hidden")
	for _, d := range vcsDirs {
		args = append(args, "--glob=!**/"+d, "--glob=!**/"+d+"/**")
	}
	args = append(args, private...)
	args = append(args, "--")
	if root != "" {
		args = append(args, root)
	}
	return args
}

// Glob lists the files under path (default: the session cwd) whose paths
// match pattern, oldest first. cwd is the session cwd, already resolved by
// the caller through fsys. At most 100 paths are shown; a larger result is
// sampled across top-level entries. Errors are *fault.Error: a search code, or the code of
// resolving path (FS_SANDBOX_DENIED for a path outside the root).
func (s *Searcher) Glob(ctx context.Context, fsys fs.FileSystem, cwd fs.Target, pattern string, path *string) (Result, error) {
	pattern = strings.TrimSpace(pattern)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	st, err := s.begin(ctx, "glob", fsys, cwd, pattern, path, nil)
	if err != nil {
		return Result{}, err
	}
	at := st.at
	var paths []string
	if !st.empty {
		_, err = s.run(ctx, "glob", at, globArgs(privateGlobs(fsys), pattern, at.arg), func(r io.Reader) error {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
			sc.Split(scanNewlines)
			for sc.Scan() {
				if line := sc.Text(); line != "" {
					paths = append(paths, at.shown(line))
				}
			}
			return scanErr(sc.Err())
		})
		if err != nil {
			return Result{}, err
		}
	}
	return s.globResult(paths, at.shown(at.arg)), nil
}

// scanNewlines splits on "\n" only: unlike bufio.ScanLines it keeps a "\r"
// that ends a file name (rg --files prints names as they are).
func scanNewlines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// scanErr maps a scanner's too-long token (which only a runaway output can
// produce) to the raw-output overflow.
func scanErr(err error) error {
	if err == bufio.ErrTooLong {
		return errOverflow
	}
	return err
}

// globResult renders paths (in rg's order) found under root.
func (s *Searcher) globResult(paths []string, root string) Result {
	total := len(paths)
	if total == 0 {
		return Result{Output: "No files found", Metadata: PathsMeta{Shape: "paths", Paths: []string{}}}
	}
	if total <= s.globMax {
		return Result{
			Output:   strings.Join(paths, "\n"),
			Metadata: s.boundPaths(PathsMeta{Shape: "paths", Paths: paths, Total: total}),
		}
	}
	page, shown, groups := sampleAcrossTopLevel(paths, root, s.globMax)
	var b strings.Builder
	b.WriteString(strings.Join(page, "\n"))
	b.WriteString("\n\n(Showing ")
	b.WriteString(strconv.Itoa(len(page)))
	b.WriteString(" of ")
	b.WriteString(strconv.Itoa(total))
	b.WriteString(" paths")
	if shown == 0 {
		b.WriteString(".")
	} else {
		b.WriteString(", sampled across ")
		b.WriteString(strconv.Itoa(shown))
		b.WriteString(" of the ")
		b.WriteString(strconv.Itoa(groups))
		b.WriteString(" top-level entries this pattern matched instead of taken in modification-time order.")
		if shown < groups {
			b.WriteString(" Narrow path to inspect a specific subtree.")
		}
	}
	b.WriteString(" ")
	b.WriteString(globRecovery)
	b.WriteString(")")
	return Result{
		Output:   b.String(),
		Metadata: s.boundPaths(PathsMeta{Shape: "paths", Paths: page, Truncated: true, Total: total}),
	}
}

// sampleAcrossTopLevel picks max paths round-robin over their first segment
// below root (groups in first-seen order, each group in rg's order), so one
// huge folder cannot hide the others. The page keeps rg's (mtime) order.
// shown and groups count the top-level entries sampled and matched; shown is
// 0 when the sample is simply the head of the list (a flat result).
func sampleAcrossTopLevel(paths []string, root string, max int) (page []string, shown, groups int) {
	index := map[string]int{}
	var members [][]int
	for i, p := range paths {
		key := topLevel(p, root)
		g, ok := index[key]
		if !ok {
			g = len(members)
			index[key] = g
			members = append(members, nil)
		}
		members[g] = append(members[g], i)
	}
	picked := make([]bool, len(paths))
	n := 0
	for round := 0; n < max; round++ {
		progressed := false
		for g := 0; g < len(members) && n < max; g++ {
			if round < len(members[g]) {
				picked[members[g][round]] = true
				n++
				progressed = true
				if round == 0 {
					shown++
				}
			}
		}
		if !progressed {
			break
		}
	}
	page = make([]string, 0, n)
	head := true
	for i, ok := range picked {
		if ok {
			page = append(page, paths[i])
			head = head && i < n
		}
	}
	if head {
		return page, 0, len(members)
	}
	return page, shown, len(members)
}

// topLevel is the first segment of p below root, as rg printed both.
func topLevel(p, root string) string {
	rest := p
	if root != "" {
		if r, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/"); ok {
			rest = r
		}
	}
	rest = strings.TrimPrefix(rest, "/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}
