package sandbox

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RuntimeFiles lists the files an ELF program needs to start: the binary
// itself, its ELF interpreter and every shared library it loads, found as
// the dynamic loader finds them (DT_RUNPATH/DT_RPATH, /etc/ld.so.conf, the
// default folders). A static binary needs only itself.
func RuntimeFiles(bin string) ([]string, error) {
	dirs := libraryDirs()
	var files []string
	seen := map[string]bool{}
	queue := []string{bin}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		files = append(files, p)
		f, err := elf.Open(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		interp, needed, own, err := dynamicInfo(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		if interp != "" {
			queue = append(queue, interp)
		}
		for _, lib := range needed {
			found, err := findLibrary(lib, append(own, dirs...), f)
			if err != nil {
				return nil, fmt.Errorf("%s needs %s: %w", p, lib, err)
			}
			queue = append(queue, found)
		}
	}
	return files, nil
}

// dynamicInfo reads an ELF object's interpreter, needed libraries and own
// search folders ($ORIGIN expanded).
func dynamicInfo(f *elf.File, path string) (interp string, needed, dirs []string, err error) {
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return "", nil, nil, fmt.Errorf("%s: interpreter: %w", path, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if f.Section(".dynamic") == nil && f.Type != elf.ET_DYN {
		return interp, nil, nil, nil
	}
	needed, _ = f.DynString(elf.DT_NEEDED)
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(path))
				d = strings.ReplaceAll(d, "${ORIGIN}", filepath.Dir(path))
				if d != "" {
					dirs = append(dirs, d)
				}
			}
		}
	}
	return interp, needed, dirs, nil
}

// findLibrary finds a needed library of the same class and machine as the
// object that needs it.
func findLibrary(name string, dirs []string, by *elf.File) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		ok := f.Class == by.Class && f.Machine == by.Machine
		f.Close()
		if ok {
			return p, nil
		}
	}
	return "", errors.New("not found")
}

// libraryDirs are the loader's folders: /etc/ld.so.conf (with its includes)
// and the default ones.
func libraryDirs() []string {
	var dirs []string
	var read func(path string, depth int)
	read = func(path string, depth int) {
		b, err := os.ReadFile(path)
		if err != nil || depth > 4 {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			line = strings.TrimSpace(line)
			if inc, ok := strings.CutPrefix(line, "include"); ok && (strings.HasPrefix(inc, " ") || strings.HasPrefix(inc, "\t")) {
				pattern := strings.TrimSpace(inc)
				if !filepath.IsAbs(pattern) {
					pattern = filepath.Join(filepath.Dir(path), pattern)
				}
				matches, _ := filepath.Glob(pattern)
				for _, m := range matches {
					read(m, depth+1)
				}
				continue
			}
			if filepath.IsAbs(line) {
				dirs = append(dirs, line)
			}
		}
	}
	read("/etc/ld.so.conf", 0)
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// maxScriptDepth bounds a chain of scripts whose interpreters are scripts.
const maxScriptDepth = 4

// ProgramFiles lists the files a program needs to start, like RuntimeFiles,
// and also for a script: the script itself, then its "#!" interpreter's
// files; an interpreter that is env(1) followed by a program name (as in
// "#!/usr/bin/env node") adds that program as found in path (a
// PATH-style list). Files an interpreter opens later (a language's own
// library folders) are not found here: the caller lists them.
func ProgramFiles(bin, path string) ([]string, error) {
	return programFiles(bin, path, 0)
}

func programFiles(bin, path string, depth int) ([]string, error) {
	interp, arg, script, err := shebang(bin)
	if err != nil {
		return nil, err
	}
	if !script {
		return RuntimeFiles(bin)
	}
	if depth >= maxScriptDepth {
		return nil, fmt.Errorf("%s: too many nested interpreters", bin)
	}
	files := []string{bin}
	more, err := programFiles(interp, path, depth+1)
	if err != nil {
		return nil, fmt.Errorf("%s: interpreter: %w", bin, err)
	}
	files = append(files, more...)
	if filepath.Base(interp) == "env" && arg != "" && !strings.HasPrefix(arg, "-") {
		prog, err := LookPath(arg, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", bin, arg, err)
		}
		more, err := programFiles(prog, path, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", bin, arg, err)
		}
		files = append(files, more...)
	}
	return dedupe(files), nil
}

// shebang reads a script's "#!" line: the interpreter and its first
// argument. script is false for anything else (an ELF binary).
func shebang(bin string) (interp, arg string, script bool, err error) {
	f, err := os.Open(bin)
	if err != nil {
		return "", "", false, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 256).ReadSlice('\n')
	if !bytes.HasPrefix(line, []byte("#!")) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("%s: the \"#!\" line is too long", bin)
	}
	fields := strings.Fields(string(line[2:]))
	if len(fields) == 0 || !filepath.IsAbs(fields[0]) {
		return "", "", false, fmt.Errorf("%s: the \"#!\" line names no absolute interpreter", bin)
	}
	if len(fields) > 1 {
		arg = fields[1]
	}
	return fields[0], arg, true, nil
}

// LookPath finds name in a PATH-style list of folders, as exec.LookPath
// does in $PATH; a name with a slash is returned as it is. Relative folders
// in the list are skipped.
func LookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func dedupe(files []string) []string {
	seen := make(map[string]bool, len(files))
	out := files[:0]
	for _, f := range files {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}
