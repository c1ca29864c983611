package fs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ignoredIn applies .gitignore files (folder → text, "" the root) to path
// as a listing does: the rules of every folder from the root down to the
// entry's, deeper ones first, and an entry below an ignored folder is
// ignored with it (a listing never opens that folder).
func ignoredIn(files map[string]string, path string, isDir bool) bool {
	g := &ignoring{work: ignoreWork{left: 1 << 40}}
	var chain *ruleChain
	dir := ""
	parts := strings.Split(path, "/")
	for i, name := range parts {
		if text, ok := files[dir]; ok {
			if r, _ := compileIgnore(text, 1<<30); len(r.flags) > 0 {
				chain = &ruleChain{up: chain, rules: r, dir: dir}
			}
		}
		dir = joinRel(dir, name)
		last := i == len(parts)-1
		if g.ignored(chain, dir, isDir || !last) {
			return true
		}
	}
	return false
}

func TestIgnoreRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		path  string
		dir   bool
		want  bool
	}{
		{"literal name at any depth", map[string]string{"": "foo\n"}, "a/b/foo", false, true},
		{"literal name is not a prefix", map[string]string{"": "foo\n"}, "foobar", false, false},
		{"suffix", map[string]string{"": "*.log\n"}, "a/x.log", false, true},
		{"suffix needs the dot", map[string]string{"": "*.log\n"}, "xlog", false, false},
		{"star alone", map[string]string{"": "*\n"}, "anything", false, true},
		{"prefix", map[string]string{"": "build*\n"}, "build-out", false, true},
		{"prefix is not infix", map[string]string{"": "build*\n"}, "xbuild", false, false},
		{"escaped star is literal", map[string]string{"": "a\\*\n"}, "ab", false, false},
		{"escaped star matches a star", map[string]string{"": "a\\*\n"}, "a*", false, true},
		{"question mark", map[string]string{"": "?.c\n"}, "x.c", false, true},
		{"question mark is one byte", map[string]string{"": "?.c\n"}, "xy.c", false, false},
		{"class", map[string]string{"": "[Dd]ebug\n"}, "Debug", false, true},
		{"class range", map[string]string{"": "v[0-9]\n"}, "v7", false, true},
		{"negated class", map[string]string{"": "v[!0-9]\n"}, "v7", false, false},
		{"caret negates too", map[string]string{"": "v[^0-9]\n"}, "vx", false, true},
		{"posix class", map[string]string{"": "[[:digit:]]x\n"}, "5x", false, true},
		{"bracket first is literal", map[string]string{"": "[]]\n"}, "]", false, true},
		{"unterminated class never matches", map[string]string{"": "a[b\n"}, "a[b", false, false},
		{"unknown posix class never matches", map[string]string{"": "[[:nope:]]\n"}, "a", false, false},
		{"dir-only matches a folder", map[string]string{"": "build/\n"}, "build", true, true},
		{"dir-only skips a file", map[string]string{"": "build/\n"}, "build", false, false},
		{"dir-only covers what is inside", map[string]string{"": "build/\n"}, "build/x.o", false, true},
		{"anchored at the root", map[string]string{"": "/foo\n"}, "foo", false, true},
		{"anchored not deeper", map[string]string{"": "/foo\n"}, "a/foo", false, false},
		{"middle slash anchors", map[string]string{"": "doc/*.txt\n"}, "doc/a.txt", false, true},
		{"middle slash anchors, not deeper", map[string]string{"": "doc/*.txt\n"}, "x/doc/a.txt", false, false},
		{"star stops at a slash", map[string]string{"": "doc/*.txt\n"}, "doc/x/a.txt", false, false},
		{"leading globstar", map[string]string{"": "**/foo\n"}, "a/b/foo", false, true},
		{"leading globstar, zero folders", map[string]string{"": "**/foo\n"}, "foo", false, true},
		{"leading globstar with a path", map[string]string{"": "**/a/b\n"}, "x/a/b", false, true},
		{"middle globstar", map[string]string{"": "a/**/b\n"}, "a/x/y/b", false, true},
		{"middle globstar, zero folders", map[string]string{"": "a/**/b\n"}, "a/b", false, true},
		{"trailing globstar", map[string]string{"": "a/**\n"}, "a/x", false, true},
		{"trailing globstar, not the folder", map[string]string{"": "a/**\n"}, "a", true, false},
		{"double star inside a name is a star", map[string]string{"": "a**b\n"}, "axxb", false, true},
		{"double star inside a name stops at a slash", map[string]string{"": "/a**b\n"}, "a/b", false, false},
		{"last rule wins", map[string]string{"": "*.log\n!keep.log\n"}, "keep.log", false, false},
		{"last rule wins the other way", map[string]string{"": "!keep.log\n*.log\n"}, "keep.log", false, true},
		{"deeper file wins", map[string]string{"": "*.log\n", "a": "!keep.log\n"}, "a/keep.log", false, false},
		{"deeper file only below it", map[string]string{"": "*.log\n", "a": "!keep.log\n"}, "keep.log", false, true},
		{"deeper file anchors to its folder", map[string]string{"a": "/x\n"}, "a/x", false, true},
		{"deeper file anchors to its folder, not the root", map[string]string{"a": "/x\n"}, "x", false, false},
		{"no re-include below an ignored folder", map[string]string{"": "build/\n!build/keep\n"}, "build/keep", false, true},
		{"comment", map[string]string{"": "#foo\n"}, "#foo", false, false},
		{"escaped hash", map[string]string{"": "\\#foo\n"}, "#foo", false, true},
		{"escaped bang", map[string]string{"": "\\!foo\n"}, "!foo", false, true},
		{"trailing spaces dropped", map[string]string{"": "foo  \n"}, "foo", false, true},
		{"escaped trailing space kept", map[string]string{"": "foo\\ \n"}, "foo ", false, true},
		{"crlf", map[string]string{"": "foo\r\nbar\r\n"}, "bar", false, true},
		{"no final newline", map[string]string{"": "foo\nbar"}, "bar", false, true},
		{"blank and bang-only lines are no rules", map[string]string{"": "\n!\n/\n"}, "x", false, false},
		{"escaped slash anchors and matches a slash", map[string]string{"": "a\\/b\n"}, "a/b", false, true},
		{"bytes, not UTF-8", map[string]string{"": "caf\xe9\n"}, "caf\xe9", false, true},
		{"case matters", map[string]string{"": "README\n"}, "readme", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ignoredIn(tc.files, tc.path, tc.dir))
		})
	}
}

// refMatch is git's wildmatch with WM_PATHNAME, written the obvious way
// (exponential, for tests): the oracle of FuzzIgnoreRules. at is where p
// starts in the whole pattern (a "**" is special only after a "/" or at
// the start).
func refMatch(pat string, at int, t string) bool {
	p := pat[at:]
	if p == "" {
		return t == ""
	}
	switch p[0] {
	case '*':
		q := strings.TrimLeft(p, "*")
		stars := len(p) - len(q)
		next := at + stars
		sepAfter := q == "" || q[0] == '/' || strings.HasPrefix(q, "\\/")
		if stars >= 2 && (at == 0 || pat[at-1] == '/') && sepAfter {
			if q == "" {
				return true
			}
			skip := 1
			if q[0] == '\\' {
				skip = 2
			}
			if refMatch(pat, next+skip, t) {
				return true
			}
			for i := range len(t) {
				if t[i] == '/' && refMatch(pat, next+skip, t[i+1:]) {
					return true
				}
			}
			return false
		}
		for i := 0; i <= len(t); i++ {
			if refMatch(pat, next, t[i:]) {
				return true
			}
			if i < len(t) && t[i] == '/' {
				break
			}
		}
		return false
	case '?':
		return t != "" && t[0] != '/' && refMatch(pat, at+1, t[1:])
	case '[':
		if t == "" {
			return false
		}
		in, end, ok := matchClass(pat, at, t[0])
		return ok && in && refMatch(pat, end, t[1:])
	case '\\':
		return len(p) > 1 && t != "" && t[0] == p[1] && refMatch(pat, at+2, t[1:])
	}
	return t != "" && t[0] == p[0] && refMatch(pat, at+1, t[1:])
}

// refIgnored is one file's verdict by the obvious reading of gitignore(5):
// each line parsed on its own, the last matching rule wins; -1 no match,
// 0 re-included, 1 ignored.
func refIgnored(text, rel string, isDir bool) int {
	name := rel[strings.LastIndexByte(rel, '/')+1:]
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := trimTrailingSpace(strings.TrimSuffix(lines[i], "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		neg := line[0] == '!'
		if neg {
			line = line[1:]
		}
		dirOnly := strings.HasSuffix(line, "/")
		if dirOnly {
			line = line[:len(line)-1]
		}
		if line == "" || dirOnly && !isDir {
			continue
		}
		var hit bool
		if strings.Contains(line, "/") {
			hit = refMatch(strings.TrimPrefix(line, "/"), 0, rel)
		} else {
			hit = refMatch(line, 0, name)
		}
		if hit {
			if neg {
				return 0
			}
			return 1
		}
	}
	return -1
}

// FuzzIgnoreRules checks the compiled matcher (tables, globs, budget)
// against refIgnored, and that no input runs past the budget or panics.
func FuzzIgnoreRules(f *testing.F) {
	for _, s := range []struct {
		text, path string
		dir        bool
	}{
		{"*.log\n!keep.log\n", "a/keep.log", false},
		{"build/\n/foo\nbar*\n", "foo", true},
		{"a/**/b\n**/c\n[a-c]?\n", "a/x/b", false},
		{"\\#x\n\\!y\nz\\ \n", "z ", false},
		{"[[:alpha:]]*[!0-9]\n", "ab", false},
		{"**\n!/x/**\n", "x/y", true},
		{"a\\/b\n*\\*\n", "a/b", false},
	} {
		f.Add(s.text, s.path, s.dir)
	}
	f.Fuzz(func(t *testing.T, text, path string, isDir bool) {
		if len(text) > 512 || len(path) > 64 || path == "" || strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "//") || strings.ContainsAny(path, "\n\x00") {
			return
		}
		name := path[strings.LastIndexByte(path, '/')+1:]
		r, _ := compileIgnore(text, 1<<30)
		w := ignoreWork{left: 1 << 40}
		got := -1
		if n := r.match(path, name, isDir, &w); n >= 0 {
			got = 1
			if r.flags[n]&ruleNegate != 0 {
				got = 0
			}
		}
		if want := refIgnored(text, path, isDir); got != want {
			t.Fatalf("rules %q, path %q (dir %v): got %d, want %d", text, path, isDir, got, want)
		}
		// A small budget stops it, never far past the budget.
		small := ignoreWork{left: 50}
		r.match(path, name, isDir, &small)
		if small.left < -600 {
			t.Fatalf("spent %d past a budget of 50", -small.left)
		}
	})
}

// TestIgnoreMatchesGit compares listings' verdicts with git's own
// (git check-ignore) on random rules over a fixed tree: what git ignores,
// the matcher ignores, and nothing else.
func TestIgnoreMatchesGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	tree := []string{"a/", "a/b/", "a/b/c.txt", "a/b/d.log", "a/x", "b/", "b/a/", "b/a/b", "ab", "ba.log", "c.txt", "x/", "x/y/", "x/y/z", "[x]", "a b", "#c", "!d"}
	var paths []string
	dirs := map[string]bool{}
	for _, p := range tree {
		if d, ok := strings.CutSuffix(p, "/"); ok {
			require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
			dirs[d] = true
			paths = append(paths, d)
			continue
		}
		require.NoError(t, os.WriteFile(filepath.Join(root, p), nil, 0o644))
		paths = append(paths, p)
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+root, "XDG_CONFIG_HOME="+root)
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stdin = strings.NewReader(strings.Join(paths, "\n") + "\n")
		err := cmd.Run()
		return out.String(), err
	}
	_, err := git("init", "-q")
	require.NoError(t, err)

	atoms := []string{"a", "b", "c", "x", "*", "**", "?", "/", ".log", ".txt", "[ab]", "[!a]", "[x]", "\\[", "!", "#", " ", "\\ ", "z"}
	rng := rand.New(rand.NewPCG(41, 1))
	rounds := 300
	if testing.Short() {
		rounds = 40
	}
	for round := range rounds {
		files := map[string]string{}
		for _, dir := range []string{"", "a", "x/y"} {
			if rng.IntN(3) == 0 && dir != "" {
				os.Remove(filepath.Join(root, dir, ".gitignore"))
				continue
			}
			var b strings.Builder
			for range 1 + rng.IntN(4) {
				for range 1 + rng.IntN(4) {
					b.WriteString(atoms[rng.IntN(len(atoms))])
				}
				b.WriteByte('\n')
			}
			files[dir] = b.String()
			require.NoError(t, os.WriteFile(filepath.Join(root, dir, ".gitignore"), []byte(b.String()), 0o644))
		}
		out, err := git("check-ignore", "--no-index", "--stdin")
		if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) {
			t.Fatalf("git check-ignore: %v", err)
		}
		var want, got []string
		if out != "" {
			want = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		}
		for _, p := range paths {
			if ignoredIn(files, p, dirs[p]) {
				got = append(got, p)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !assert.Equal(t, want, got, "round %d, rules %q", round, files) {
			return
		}
	}
}

// cpuNow is the CPU time this process has used.
func cpuNow(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestIgnoreWorkBounded: rules crafted for the matcher's worst cases stop
// at the budget, and a budget of DefaultIgnoreMaxWork costs well under a
// second of CPU (measured 0.1–0.15 s a case; 0.6–0.7 s under -race).
func TestIgnoreWorkBounded(t *testing.T) {
	long := strings.Repeat("*a", 1<<18) + "b"
	many := strings.Repeat("*a*a*a*a*a*b\n", (1<<20)/13)
	lens := &strings.Builder{}
	for n := 1; n <= 255; n++ {
		fmt.Fprintf(lens, "*%s\n%s*\n", strings.Repeat("a", n), strings.Repeat("a", n))
	}
	name := strings.Repeat("a", 255)
	for _, tc := range []struct{ name, text, path string }{
		{"one 512 KiB glob", long, name},
		{"1 MiB of backtracking globs", many, name},
		{"every suffix and prefix length", strings.Repeat(lens.String(), 8), "z" + name[1:]},
		{"anchored globstars", strings.Repeat("**/a*/**/a*/**/b\n", 1<<14), strings.Repeat("a/", 200) + "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := compileIgnore(tc.text, 1<<30)
			base := tc.path[strings.LastIndexByte(tc.path, '/')+1:]
			w := ignoreWork{left: DefaultIgnoreMaxWork}
			cpu0, start := cpuNow(t), time.Now()
			for !w.exhausted() {
				r.match(tc.path, base, false, &w)
			}
			took, cpu := time.Since(start), cpuNow(t)-cpu0
			t.Logf("%d rules: the default budget spent in %s (%s of CPU)", len(r.flags), took.Round(time.Millisecond), cpu.Round(time.Millisecond))
			assert.Greater(t, w.left, int64(-1000), "stops at the budget")
			limit := time.Second
			if raceEnabled {
				limit *= 3 // the detector's own work: 0.6–0.7 s measured
			}
			assert.Less(t, cpu, limit)
		})
	}
}

// listNames lists the root with opts and returns the entries' paths.
func listNames(t *testing.T, f *fixture, path string, opts ListOptions) ([]string, Listing) {
	t.Helper()
	l, err := f.l.List(t.Context(), f.resolve(t, "list", path), opts)
	require.NoError(t, err)
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Path)
	}
	return names, l
}

// TestListIgnoreBounds: the listing's budgets of rule bytes, rules and
// matching work, each said in the Listing; the rules over a listed folder
// are read from the root down, and a listed folder that is itself ignored
// lists nothing.
func TestListIgnoreBounds(t *testing.T) {
	f := newFixture(t, ".gitignore = *.log\nbig/\n", "a.log", "b.txt", "big/x", "sub/.gitignore = !keep.log\n/own\n",
		"sub/keep.log", "sub/drop.log", "sub/own/y", "sub/deep/.gitignore = *.txt\n", "sub/deep/z.txt", "sub/deep/z.md")
	opts := ListOptions{Depth: 8, MaxEntries: 100, GitIgnore: true}
	names, l := listNames(t, f, ".", opts)
	assert.Equal(t, []string{".gitignore", "b.txt", "sub", "sub/.gitignore", "sub/deep", "sub/deep/.gitignore", "sub/deep/z.md", "sub/keep.log"}, names)
	assert.False(t, l.Truncated)
	assert.Empty(t, l.IgnoreSkipped)

	names, _ = listNames(t, f, "sub/deep", opts)
	assert.Equal(t, []string{"sub/deep/.gitignore", "sub/deep/z.md"}, names, "the rules over the folder apply")
	names, _ = listNames(t, f, "big", opts)
	assert.Empty(t, names, "an ignored folder lists nothing")
	names, _ = listNames(t, f, "sub/own", opts)
	assert.Empty(t, names, "a folder ignored by a deeper file lists nothing")

	// Bytes: the root's 11 fit; sub's 15 do not (11 left); sub/deep's 6 do.
	byBytes := opts
	byBytes.IgnoreMaxBytes = 11 + 11
	names, l = listNames(t, f, ".", byBytes)
	assert.Equal(t, []string{"sub/.gitignore"}, l.IgnoreSkipped)
	assert.Contains(t, names, "sub/own/y", "sub's rules are not applied")
	assert.NotContains(t, names, "sub/deep/z.txt", "sub/deep's are")
	assert.False(t, l.Truncated)

	// Rules: the root's 2 fit; sub's 2 do not (1 left); sub/deep's 1 does.
	byRules := opts
	byRules.IgnoreMaxRules = 3
	_, l = listNames(t, f, ".", byRules)
	assert.Equal(t, []string{"sub/.gitignore"}, l.IgnoreSkipped)

	// Work: a tiny budget stops the listing at once, saying so.
	byWork := opts
	byWork.IgnoreMaxWork = 30
	names, l = listNames(t, f, ".", byWork)
	assert.True(t, l.Truncated)
	assert.Equal(t, CutIgnoreWork, l.TruncatedBy)
	assert.Less(t, len(names), 8)

	byEntries := opts
	byEntries.MaxEntries = 2
	_, l = listNames(t, f, ".", byEntries)
	assert.Equal(t, CutEntries, l.TruncatedBy)
}

// TestListIgnoreCache: a .gitignore is compiled once per version and kept
// for later listings only past the racy window; a new version is read
// again.
func TestListIgnoreCache(t *testing.T) {
	f := newFixture(t, ".gitignore = a\n", "a", "b")
	opts := ListOptions{Depth: 1, MaxEntries: 100, GitIgnore: true, IgnoreCache: true, IgnoreRacyWindow: time.Hour}
	names, _ := listNames(t, f, ".", opts)
	assert.Equal(t, []string{".gitignore", "b"}, names)
	assert.Zero(t, f.l.ignores.lru.Len(), "changed within the racy window: not kept")

	opts.IgnoreRacyWindow = 0
	listNames(t, f, ".", opts)
	require.Equal(t, 1, f.l.ignores.lru.Len())
	cached := f.l.ignores.lru.Front().Value.(*ignoreCached).rules
	listNames(t, f, ".", opts)
	assert.Same(t, cached, f.l.ignores.lru.Front().Value.(*ignoreCached).rules, "the second listing used the kept rules")

	require.NoError(t, os.WriteFile(f.path(".gitignore"), []byte("b\n"), 0o644))
	names, _ = listNames(t, f, ".", opts)
	assert.Equal(t, []string{".gitignore", "a"}, names, "a new version is read again")
	assert.Equal(t, 2, f.l.ignores.lru.Len())

	opts.IgnoreCache = false
	require.NoError(t, os.WriteFile(f.path(".gitignore"), []byte("c\n"), 0o644))
	listNames(t, f, ".", opts)
	assert.Equal(t, 2, f.l.ignores.lru.Len(), "nothing kept with the cache off")
}
