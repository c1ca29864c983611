// Package diagnostics runs the checkers of --diagnostics on a file after a
// write or edit, on the new version and on the version before, confined by
// Landlock like the search process, and tells only the problems the change
// introduced (docs/diagnostics.md).
package diagnostics

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolfs/toolfs-api/internal/fs"
	"github.com/toolfs/toolfs-api/internal/sandbox"
)

// Defaults of Config.
const (
	DefaultTimeout        = 5 * time.Second
	DefaultMaxOutputBytes = 1 << 20
	DefaultCacheEntries   = 512
	defaultCacheBytes     = 16 << 20
)

// Config configures a Runner.
type Config struct {
	// Root is the workspace root; checkers may read everything beneath it.
	Root string
	// Checkers are the checkers of the --diagnostics file (ParseConfig).
	Checkers []CheckerConfig
	// Timeout bounds one check, every checker and both versions together
	// (--diagnostics-timeout); 0 is DefaultTimeout.
	Timeout time.Duration
	// MaxOutputBytes bounds what one run may print, stdout and stderr
	// together; past it the run is killed. 0 is DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// MaxConcurrent bounds the checker processes running at once; 0 is
	// the number of CPUs, at least 2.
	MaxConcurrent int
	// Sandbox is what to do without Landlock; "" is sandbox.Require.
	Sandbox sandbox.Requirement
	// Path is where checker names are looked up, and the checkers' PATH;
	// "" is the server's $PATH.
	Path string
	// TempDir holds the checkers' private folders; "" is os.TempDir().
	TempDir string
	// CacheEntries bounds the cache of answers by version; 0 is
	// DefaultCacheEntries.
	CacheEntries int
	// Logger hears why a checker did not start; nil discards.
	Logger *slog.Logger
}

// Runner runs the checkers. It is safe for concurrent use; Close removes
// its private folders.
type Runner struct {
	root     string
	rootFD   *os.File
	checkers []*checker
	timeout  time.Duration
	maxOut   int64
	sem      chan struct{}
	exe      string
	confined bool
	// unavailable is why no checker can run ("" when they can).
	unavailable string
	state       string
	cache       *cache
	log         *slog.Logger
	seq         atomic.Uint64
	// onStart, when set, hears each checker process's pid (tests).
	onStart func(pid int)
}

// checker is a configured checker, resolved at start-up.
type checker struct {
	CheckerConfig
	bin     string
	files   []string
	glob    globMatcher
	home    string
	env     []string
	overlay bool
}

// Change is one successful write or edit, as Check needs it.
type Change struct {
	// Path is the file's real absolute path (symlinks resolved), inside
	// the root.
	Path string
	// Created is true when there was no file before.
	Created bool
	// Before and After are the file's bytes before and after the change.
	Before, After []byte
	// Unchecked, when set, is why the change cannot be checked (ReasonTooLarge):
	// every matching checker reports it as its reason, and none runs.
	Unchecked string
}

// ReasonTooLarge is the reason of a change whose versions the server does
// not hold in memory (the file at or above the diff-basis limit, 10 MiB).
const ReasonTooLarge = "was not run: the file is 10 MiB or larger"

// New resolves every checker (its program in Path, the files it needs to
// start, its read paths) and proves the sandbox. An error names the
// field at fault ("checkers[0].command[0]: ..."); the caller adds the
// flag.
func New(cfg Config) (*Runner, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = max(2, runtime.NumCPU())
	}
	if cfg.Path == "" {
		cfg.Path = os.Getenv("PATH")
	}
	if cfg.CacheEntries <= 0 {
		cfg.CacheEntries = DefaultCacheEntries
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch cfg.Sandbox {
	case "":
		cfg.Sandbox = sandbox.Require
	case sandbox.Require, sandbox.BestEffort:
	default:
		return nil, fmt.Errorf("unknown sandbox mode %q", cfg.Sandbox)
	}
	root, err := filepath.Abs(cfg.Root)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	r := &Runner{
		root: root, timeout: cfg.Timeout, maxOut: cfg.MaxOutputBytes,
		sem: make(chan struct{}, cfg.MaxConcurrent), log: cfg.Logger,
		cache: newCache(cfg.CacheEntries, defaultCacheBytes),
	}
	for i, cc := range cfg.Checkers {
		c, err := resolveChecker(cc, cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("checkers[%d].%w", i, err)
		}
		r.checkers = append(r.checkers, c)
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	r.rootFD = os.NewFile(uintptr(fd), root)
	if r.state, err = os.MkdirTemp(cfg.TempDir, "toolfs-diagnostics-"); err != nil {
		r.rootFD.Close()
		return nil, err
	}
	for _, c := range r.checkers {
		if err := r.prepare(c, cfg.Path); err != nil {
			r.Close()
			return nil, err
		}
	}
	if len(r.checkers) > 0 {
		r.proveSandbox(cfg.Sandbox)
	}
	return r, nil
}

func resolveChecker(cc CheckerConfig, path string) (*checker, error) {
	bin, err := sandbox.LookPath(cc.Command[0], path)
	if err != nil {
		return nil, fmt.Errorf("command[0]: %q was not found in PATH", cc.Command[0])
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return nil, fmt.Errorf("command[0]: %w", err)
	}
	if fi, err := os.Stat(bin); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("command[0]: %s is not an executable file", bin)
	}
	files, err := sandbox.ProgramFiles(bin, path)
	if err != nil {
		return nil, fmt.Errorf("command[0]: cannot list the files it needs to start: %w", err)
	}
	for i, p := range cc.Read {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("read[%d]: %w", i, err)
		}
		// A program the checker runs needs its libraries too.
		if fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if more, err := sandbox.ProgramFiles(p, path); err == nil {
				files = append(files, more...)
			}
		}
	}
	c := &checker{CheckerConfig: cc, bin: bin, files: files, glob: newGlobMatcher(cc.Glob)}
	for _, a := range cc.Command {
		if strings.Contains(a, "{overlay}") {
			c.overlay = true
		}
	}
	return c, nil
}

// prepare makes the checker's private folder and its environment.
func (r *Runner) prepare(c *checker, path string) error {
	c.home = filepath.Join(r.state, c.Name)
	for _, d := range []string{c.home, filepath.Join(c.home, "tmp"), filepath.Join(c.home, versionsDir)} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	vars := strings.NewReplacer("{tmp}", c.home, "{root}", r.root)
	env := map[string]string{
		"PATH":                path,
		"HOME":                c.home,
		"TMPDIR":              filepath.Join(c.home, "tmp"),
		"XDG_CACHE_HOME":      filepath.Join(c.home, ".cache"),
		"XDG_CONFIG_HOME":     filepath.Join(c.home, ".config"),
		"LANG":                "C.UTF-8",
		"NO_COLOR":            "1",
		"PYTHONPYCACHEPREFIX": filepath.Join(c.home, ".cache", "pycache"),
		"GOTELEMETRY":         "off",
		"GOTOOLCHAIN":         "local",
	}
	for k, v := range c.Env {
		env[k] = vars.Replace(v)
	}
	for k, v := range env {
		c.env = append(c.env, k+"="+v)
	}
	sort.Strings(c.env)
	return nil
}

// proveSandbox decides whether checkers run confined.
func (r *Runner) proveSandbox(mode sandbox.Requirement) {
	exe, err := sandbox.Self()
	if err == nil {
		r.exe = exe
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = prove(ctx, exe)
		cancel()
	}
	switch {
	case err == nil:
		r.confined = true
	case mode == sandbox.BestEffort:
		r.log.Warn("diagnostics checkers run unconfined (--search-sandbox best-effort)", "reason", err.Error())
	default:
		r.unavailable = "the checkers cannot be confined (" + err.Error() + "); they need Landlock (--search-sandbox require)"
		r.log.Warn("diagnostics unavailable", "reason", r.unavailable)
	}
}

// prove is sandbox.Prove; tests play a kernel that cannot confine.
var prove = sandbox.Prove

// Unavailable says why no checker can run, "" when they can.
func (r *Runner) Unavailable() string { return r.unavailable }

// Confined reports whether checkers run under Landlock.
func (r *Runner) Confined() bool { return r.confined }

// Checkers are the checkers' names, in configuration order.
func (r *Runner) Checkers() []string {
	names := make([]string, len(r.checkers))
	for i, c := range r.checkers {
		names[i] = c.Name
	}
	return names
}

// Close removes the private folders. Checks must have returned.
func (r *Runner) Close() error {
	err := os.RemoveAll(r.state)
	r.rootFD.Close()
	return err
}

// Check runs every checker whose glob matches the changed file on its new
// version and its version before, within the timeout, and reports what the
// change introduced. It returns by the timeout (plus the time to reap what
// it killed), whatever the checkers do; the zero Report when no checker
// matches.
func (r *Runner) Check(ctx context.Context, ch Change) Report {
	rel, ok := within(r.root, ch.Path)
	if !ok || rel == "." {
		return Report{}
	}
	var matching []*checker
	for _, c := range r.checkers {
		if c.glob.match(filepath.ToSlash(rel)) {
			matching = append(matching, c)
		}
	}
	if len(matching) == 0 {
		return Report{}
	}
	if ch.Unchecked != "" {
		results := make([]Result, len(matching))
		for i, c := range matching {
			results[i] = Result{Checker: c.Name, Unavailable: ch.Unchecked}
		}
		return newReport(results, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	results := make([]Result, len(matching))
	all := make([][]Problem, len(matching))
	var wg sync.WaitGroup
	for i, c := range matching {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], all[i] = r.checkOne(ctx, c, ch, rel)
		}()
	}
	wg.Wait()
	return newReport(results, all)
}

// checkOne runs one checker on both versions at once and compares them.
func (r *Runner) checkOne(ctx context.Context, c *checker, ch Change, rel string) (Result, []Problem) {
	res := Result{Checker: c.Name}
	if r.unavailable != "" {
		res.Unavailable = reasonNoStart
		return res, nil
	}
	var before outcome
	beforeKey := cacheKey(c.Name, ch.Path, ch.Before)
	cached := false
	if ch.Created {
		cached = true // nothing before: no problems
	} else if ps, ok := r.cache.get(beforeKey); ok {
		before, cached = outcome{problems: ps}, true
	}
	var after outcome
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		after = r.runAfter(ctx, c, ch, rel)
	}()
	if !cached {
		before = r.runVersion(ctx, c, ch, rel, ch.Before, true)
		if before.failure == "" {
			r.cache.put(beforeKey, before.problems)
		}
	}
	wg.Wait()
	switch {
	case after.failure != "":
		res.Unavailable = after.failure
		return res, nil
	case before.failure != "":
		res.Unavailable = before.failure + onBefore
		return res, nil
	}
	if after.fresh {
		r.cache.put(cacheKey(c.Name, ch.Path, ch.After), after.problems)
	}
	introduced, resolved := compare(before.problems, after.problems, ch.Before, ch.After)
	res.Fresh, res.Introduced, res.Resolved = after.fresh, introduced, resolved
	return res, introduced
}

// outcome is one run's answer: its problems, or why it gave none.
type outcome struct {
	problems []Problem
	failure  string
	// fresh: the problems are those of exactly the version asked for.
	fresh bool
}

// versionsDir holds, in a checker's private folder, the copies of the
// versions it is run on, one folder per run.
const versionsDir = ".toolfs-versions"

// runAfter runs c on the new version: on the file itself (so the checker
// finds its configuration and its package beside it) when it still holds
// exactly ch.After, and stays unchanged during the run; on a copy when it
// already changed again. A change during the run makes the answer stale.
func (r *Runner) runAfter(ctx context.Context, c *checker, ch Change, rel string) outcome {
	id, same := r.sameContent(rel, ch.After)
	if !same {
		return r.runVersion(ctx, c, ch, rel, ch.After, true)
	}
	out := r.runVersion(ctx, c, ch, rel, ch.After, false)
	if out.failure == "" {
		now, _ := r.sameContent(rel, nil)
		out.fresh = now == id
	}
	return out
}

// fileID is what tells one version of a file from another (a version, as
// docs/api.md defines it).
type fileID struct {
	dev, ino       uint64
	size           int64
	mtime, ctimeNs int64
}

// sameContent opens the file beneath the root, following no symlink, and
// reports its identity and whether it holds exactly want (want nil: the
// identity only).
func (r *Runner) sameContent(rel string, want []byte) (fileID, bool) {
	fd, err := fs.OpenBeneath(int(r.rootFD.Fd()), rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return fileID{}, false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileID{}, false
	}
	id := fileID{st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano()}
	if want == nil {
		return id, true
	}
	if st.Size != int64(len(want)) {
		return id, false
	}
	buf := make([]byte, len(want)+1)
	n, _ := readFull(f, buf)
	return id, n == len(want) && string(buf[:n]) == string(want)
}

func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// runVersion runs c once on content: as a copy in c's private folder
// (same base name) when copy is set, else on the file itself. The working
// folder is always the file's own folder in the root.
func (r *Runner) runVersion(ctx context.Context, c *checker, ch Change, rel string, content []byte, copy bool) outcome {
	realDir := filepath.Dir(ch.Path)
	dfd, err := fs.OpenBeneath(int(r.rootFD.Fd()), filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		r.log.Warn("diagnostics checker did not start", "checker", c.Name, "reason", "the file's folder: "+err.Error())
		return outcome{failure: reasonNoStart}
	}
	dir := os.NewFile(uintptr(dfd), realDir)
	defer dir.Close()
	file := ch.Path
	var scratch string
	if copy || c.overlay {
		scratch = filepath.Join(c.home, versionsDir, fmt.Sprint(r.seq.Add(1)))
		if err := os.Mkdir(scratch, 0o700); err != nil {
			r.log.Warn("diagnostics checker did not start", "checker", c.Name, "reason", err.Error())
			return outcome{failure: reasonNoStart}
		}
		defer os.RemoveAll(scratch)
	}
	if copy {
		file = filepath.Join(scratch, filepath.Base(ch.Path))
		if err := os.WriteFile(file, content, 0o600); err != nil {
			r.log.Warn("diagnostics checker did not start", "checker", c.Name, "reason", err.Error())
			return outcome{failure: reasonNoStart}
		}
	}
	overlay := ""
	if c.overlay {
		overlay = filepath.Join(scratch, "overlay.json")
		if err := os.WriteFile(overlay, overlayJSON(ch.Path, file), 0o600); err != nil {
			r.log.Warn("diagnostics checker did not start", "checker", c.Name, "reason", err.Error())
			return outcome{failure: reasonNoStart}
		}
	}
	var input *os.File
	if c.Stdin {
		if input, err = r.openVersion(rel, file, copy); err != nil {
			r.log.Warn("diagnostics checker did not start", "checker", c.Name, "reason", "its input: "+err.Error())
			return outcome{failure: reasonNoStart}
		}
		defer input.Close()
	}
	vars := strings.NewReplacer("{file}", file, "{path}", ch.Path, "{dir}", realDir, "{root}", r.root, "{overlay}", overlay, "{tmp}", c.home)
	argv := make([]string, len(c.Command))
	for i, a := range c.Command {
		argv[i] = vars.Replace(a)
	}
	run := r.exec(ctx, c, argv, dir, input)
	if run.failure != "" {
		return outcome{failure: run.failure}
	}
	p := parse(c.Format, run.stdout, run.stderr, subject{file: file, real: ch.Path, dir: realDir, content: content, stdin: c.Stdin})
	switch {
	case p.parsable:
	case run.signal != "":
		return outcome{failure: reasonSignal(run.signal)}
	case !containsInt(c.OKExit, run.code):
		return outcome{failure: reasonExit(run.code)}
	}
	return outcome{problems: p.problems, fresh: true}
}

// openVersion opens what a checker reads on stdin: the copy, or the file
// itself beneath the root (following no symlink).
func (r *Runner) openVersion(rel, file string, copy bool) (*os.File, error) {
	if copy {
		return os.Open(file)
	}
	fd, err := fs.OpenBeneath(int(r.rootFD.Fd()), rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), file)
	// Blocking again: the checker reads it as an ordinary stdin.
	if err := unix.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// overlayJSON is a go command -overlay file putting file in place of real
// (an empty overlay when they are the same).
func overlayJSON(real, file string) []byte {
	if real == file {
		return []byte(`{"Replace":{}}`)
	}
	b, _ := json.Marshal(map[string]map[string]string{"Replace": {real: file}})
	return b
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// within is p relative to root, if p is root or beneath it.
func within(root, p string) (string, bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	rel, err := filepath.Rel(root, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}
