package fs

import (
	"math/bits"
	"slices"
	"strings"
)

// This file is the .gitignore matcher of ?ignore=git listings
// (docs/files.md, "Ignore rules"): git's rules as git and rg apply them
// (last matching rule wins, "!" re-includes, a trailing "/" is dir-only, a
// "/" at the start or in the middle anchors a rule to its file's folder,
// "**" spans folders, wildcards never match "/"), compiled once per file
// version so that a listing's cost is bounded by its work budget, not by
// what a crafted file holds.

// rule flags, by rule number.
const (
	ruleNegate   uint8 = 1 << iota // "!pattern": re-includes
	ruleDirOnly                    // "pattern/": matches folders only
	ruleAnchored                   // a glob matched against the path below the file's folder
)

// nameMax is the longest name a Linux filesystem holds (NAME_MAX): a key
// longer than that matches no name and is dropped.
const nameMax = 255

// ignoreRules are one .gitignore file's rules, compiled. Rules of the
// common shapes sit in sorted tables that a name is looked up in (literal
// names, "*suffix", "prefix*", literal paths), so a file of many such rules
// costs an entry a few binary searches; the rest are globs tried from the
// last one back, only while they could beat what the tables found. Rules
// are numbered in file order, counting only those that can match; the
// highest matching number wins. Immutable once built, so listings share it
// through the cache.
type ignoreRules struct {
	text     string    // the file's text, which keys and globs are mostly parts of
	flags    []uint8   // by rule number
	names    []ruleKey // not anchored, literal: the entry's name
	suffixes []ruleKey // not anchored, "*" then a literal
	prefixes []ruleKey // not anchored, a literal then "*"
	paths    []ruleKey // anchored, literal: the path below the file's folder
	sufLens  lengthSet // the lengths of suffixes' keys
	preLens  lengthSet
	globs    []ruleGlob // every other rule, in rule order
	size     int64      // the memory it holds, roughly: the cache's account
}

// ruleKey is one key of a table: the last rule with that key that matches
// anything, and the last dir-only one (-1: none).
type ruleKey struct {
	key      string
	any, dir int32
}

// ruleGlob is a rule matched as a glob: against the entry's name, or, when
// anchored, against its path below the file's folder.
type ruleGlob struct {
	off, end uint32 // the pattern in the text, without "!", the leading "/" and the trailing "/"
	n        int32  // its rule number; ruleAnchored in its flags
}

// lengthSet is a set of key lengths 0..nameMax.
type lengthSet [4]uint64

func (s *lengthSet) add(n int)      { s[n>>6] |= 1 << (n & 63) }
func (s *lengthSet) empty() bool    { return s[0]|s[1]|s[2]|s[3] == 0 }
func (s *lengthSet) has(n int) bool { return n <= nameMax && s[n>>6]&(1<<(n&63)) != 0 }

// ignoreWork is a listing's budget of matching steps (a table probe, a
// glob's character step, a rules file passed on the way up). Every loop
// of the matcher spends from it, so a crafted rule cannot run past it.
type ignoreWork struct{ left int64 }

func (w *ignoreWork) spend(n int) bool {
	w.left -= int64(n)
	return w.left >= 0
}

func (w *ignoreWork) exhausted() bool { return w.left < 0 }

// Per-item memory, for the cache's account: a table key, a glob.
const (
	ruleKeySize  = 24
	ruleGlobSize = 12
)

// ruleShape is the table a rule goes in, or ruleGlob.
type ruleShape uint8

const (
	shapeName ruleShape = iota
	shapeSuffix
	shapePrefix
	shapePath
	shapeGlob
)

// parsedRule is one rule as eachRule reads it.
type parsedRule struct {
	shape    ruleShape
	flags    uint8
	anchored bool
	key      string // a table's key
	off, end int    // a glob's pattern in the text
}

// compileIgnore compiles a .gitignore file's text when it holds at most
// maxRules rules: one pass to count each table's rules, one to fill them,
// so a file of many tiny rules costs its rules' room and nothing for
// growing slices. Linear in the text (plus sorting the tables), which the
// listing's byte budget bounds; its memory is the text and about 25 bytes
// a rule, which the rule budget bounds.
func compileIgnore(text string, maxRules int) (*ignoreRules, bool) {
	var count [shapeGlob + 1]int
	total := 0
	eachRule(text, func(p parsedRule) { count[p.shape]++; total++ })
	if total > maxRules {
		return nil, false
	}
	r := &ignoreRules{text: text, flags: make([]uint8, 0, total), globs: make([]ruleGlob, 0, count[shapeGlob])}
	tables := [shapePath + 1]*[]ruleKey{&r.names, &r.suffixes, &r.prefixes, &r.paths}
	for shape, t := range tables {
		*t = make([]ruleKey, 0, count[shape])
	}
	eachRule(text, func(p parsedRule) {
		n := int32(len(r.flags))
		switch p.shape {
		case shapeGlob:
			if p.anchored {
				p.flags |= ruleAnchored
			}
			r.flags = append(r.flags, p.flags)
			r.globs = append(r.globs, ruleGlob{off: uint32(p.off), end: uint32(p.end), n: n})
			return
		case shapeSuffix:
			r.sufLens.add(len(p.key))
		case shapePrefix:
			r.preLens.add(len(p.key))
		}
		r.flags = append(r.flags, p.flags)
		k := ruleKey{key: p.key, any: n, dir: -1}
		if p.flags&ruleDirOnly != 0 {
			k.any, k.dir = -1, n
		}
		*tables[p.shape] = append(*tables[p.shape], k)
	})
	for _, t := range tables {
		*t = mergeKeys(*t)
	}
	// Keys and globs are mostly substrings of the text, which they keep.
	r.size = int64(len(text)) + int64(len(r.flags)) + ruleGlobSize*int64(len(r.globs)) +
		ruleKeySize*int64(len(r.names)+len(r.suffixes)+len(r.prefixes)+len(r.paths))
	return r, true
}

// eachRule calls fn with every rule of text that can match, in order.
func eachRule(text string, fn func(parsedRule)) {
	for start := 0; start < len(text); {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
		if pat, at, flags, anchored, ok := parseIgnoreLine(text[start:end]); ok {
			if p, ok := classify(pat, anchored); ok {
				p.flags, p.anchored, p.off, p.end = flags, anchored, start+at, start+at+len(pat)
				fn(p)
			}
		}
		start = end + 1
	}
}

// classify says which table a rule's pattern goes in, with its key; a key
// longer than a name can be matches nothing and is no rule.
func classify(pat string, anchored bool) (parsedRule, bool) {
	if anchored {
		if lit, ok := literal(pat); ok {
			return parsedRule{shape: shapePath, key: lit}, true
		}
		return parsedRule{shape: shapeGlob}, true
	}
	p := parsedRule{shape: shapeGlob}
	if lit, ok := literal(pat); ok {
		p = parsedRule{shape: shapeName, key: lit}
	} else if lit, ok := starThenLiteral(pat); ok {
		p = parsedRule{shape: shapeSuffix, key: lit}
	} else if lit, ok := literalThenStar(pat); ok {
		p = parsedRule{shape: shapePrefix, key: lit}
	}
	return p, len(p.key) <= nameMax
}

// mergeKeys sorts a table by key and merges equal keys, keeping the last
// rule of each kind.
func mergeKeys(t []ruleKey) []ruleKey {
	if len(t) == 0 {
		return nil
	}
	slices.SortFunc(t, func(a, b ruleKey) int { return strings.Compare(a.key, b.key) })
	out := t[:1]
	for _, k := range t[1:] {
		last := &out[len(out)-1]
		if k.key != last.key {
			out = append(out, k)
			continue
		}
		last.any, last.dir = max(last.any, k.any), max(last.dir, k.dir)
	}
	if len(out) < len(t) {
		return slices.Clone(out) // drops the merged keys' room
	}
	return out
}

// parseIgnoreLine reads one line as git does (gitignore(5)): a blank line
// or a "#" comment is no rule; trailing spaces and tabs are dropped unless
// escaped with "\"; a leading "!" negates ("\!" and "\#" are literal); a
// trailing "/" makes it dir-only; a "/" left anywhere anchors it to the
// file's folder (a leading one is then dropped). "**/<name>" with no other
// "/" is the same rule as "<name>". A rule that can never match (an
// unterminated "[" class, a dangling "\", a malformed "[:class:]") is no
// rule, as git never matches it and rg refuses it. pat is line[at:at+len(pat)].
func parseIgnoreLine(line string) (pat string, at int, flags uint8, anchored, ok bool) {
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpace(line)
	if line == "" || line[0] == '#' {
		return "", 0, 0, false, false
	}
	if line[0] == '!' {
		flags |= ruleNegate
		line, at = line[1:], at+1
	}
	if strings.HasSuffix(line, "/") {
		flags |= ruleDirOnly
		line = line[:len(line)-1]
	}
	anchored = strings.IndexByte(line, '/') >= 0
	if rest, found := strings.CutPrefix(line, "/"); found {
		line, at = rest, at+1
	}
	if rest, found := strings.CutPrefix(line, "**/"); found && strings.IndexByte(rest, '/') < 0 {
		line, at, anchored = rest, at+3, false
	}
	if line == "" || !validGlob(line) {
		return "", 0, 0, false, false
	}
	return line, at, flags, anchored, true
}

// trimTrailingSpace drops trailing spaces and tabs that no "\" escapes,
// walking the escapes from the start as git's trim_trailing_spaces does.
func trimTrailingSpace(s string) string {
	cut := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t':
			if cut < 0 {
				cut = i
			}
		case '\\':
			i++
			if i == len(s) {
				return s
			}
			cut = -1
		default:
			cut = -1
		}
	}
	if cut >= 0 {
		return s[:cut]
	}
	return s
}

// validGlob reports whether every escape and class of p is complete.
func validGlob(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
			if i == len(p) {
				return false
			}
		case '[':
			_, end, ok := matchClass(p, i, 0)
			if !ok {
				return false
			}
			i = end - 1
		}
	}
	return true
}

// literal is p unescaped when it holds no wildcard.
func literal(p string) (string, bool) {
	if !strings.ContainsAny(p, `*?[\`) {
		return p, true
	}
	var b []byte
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '*', '?', '[':
			return "", false
		case '\\':
			if i++; i == len(p) {
				return "", false // dangling: literalThenStar cut a\* before its star
			}
			c = p[i]
		}
		b = append(b, c)
	}
	return string(b), true
}

// starThenLiteral is the literal after p's leading stars ("*.log" →
// ".log"; "*" → "").
func starThenLiteral(p string) (string, bool) {
	rest := strings.TrimLeft(p, "*")
	if len(rest) == len(p) {
		return "", false
	}
	return literal(rest)
}

// literalThenStar is the literal before p's trailing stars ("build*" →
// "build"), when those stars are not escaped.
func literalThenStar(p string) (string, bool) {
	head := strings.TrimRight(p, "*")
	if len(head) == len(p) || head == "" {
		return "", false
	}
	return literal(head) // an escaped last star leaves a dangling "\": not ok
}

// match returns the number of the last rule of r that matches the entry
// whose path below r's folder is rel and whose name is name, or -1. It
// stops early, returning -1, when w runs out: the caller checks w.
func (r *ignoreRules) match(rel, name string, isDir bool, w *ignoreWork) int32 {
	best := int32(-1)
	take := func(t []ruleKey, key string) {
		// A probe is a binary search of string compares: its steps are
		// weighed to cost what a glob's steps cost (TestIgnoreWorkBounded).
		w.spend(4 + 3*bits.Len(uint(len(t))))
		i, found := slices.BinarySearchFunc(t, key, func(k ruleKey, s string) int { return strings.Compare(k.key, s) })
		if !found {
			return
		}
		best = max(best, t[i].any)
		if isDir {
			best = max(best, t[i].dir)
		}
	}
	if len(r.names) > 0 {
		take(r.names, name)
	}
	if len(r.paths) > 0 {
		take(r.paths, rel)
	}
	if !r.sufLens.empty() {
		for n := 0; n <= len(name) && !w.exhausted(); n++ {
			if r.sufLens.has(n) {
				take(r.suffixes, name[len(name)-n:])
			}
		}
	}
	if !r.preLens.empty() {
		for n := 1; n <= len(name) && !w.exhausted(); n++ {
			if r.preLens.has(n) {
				take(r.prefixes, name[:n])
			}
		}
	}
	for i := len(r.globs) - 1; i >= 0 && r.globs[i].n > best; i-- {
		if !w.spend(1) {
			return -1
		}
		g := &r.globs[i]
		flags := r.flags[g.n]
		if flags&ruleDirOnly != 0 && !isDir {
			continue
		}
		pat := r.text[g.off:g.end]
		if anchored := flags&ruleAnchored != 0; anchored && matchPath(pat, rel, w) || !anchored && matchSegment(pat, name, w) {
			return g.n
		}
	}
	if w.exhausted() {
		return -1
	}
	return best
}

// matchPath matches an anchored glob against a path, both "/"-separated:
// each pattern segment matches one path component, except a segment that
// is only stars ("**"), which matches any number of them (none included);
// a trailing "/**" matches one or more, so "a/**" is what is inside a, not
// a itself. A segment's "*", "?" and classes never reach past its
// component, which is git's WM_PATHNAME.
func matchPath(pat, path string, w *ignoreWork) bool {
	pi, ti := 0, 0
	starP, starT := -1, -1 // where the last "**" resumes, and the component it has swallowed up to
	for {
		if pi <= len(pat) { // a segment is left, maybe an empty one after a final "/"
			seg, pnext := nextSegment(pat, pi)
			if !w.spend(4 + len(seg)) {
				return false
			}
			if isGlobstar(seg) {
				if pnext > len(pat) {
					return ti < len(path)
				}
				pi, starP, starT = pnext, pnext, ti
				continue
			}
			if ti < len(path) {
				comp, tnext := nextComponent(path, ti)
				if matchSegment(seg, comp, w) {
					pi, ti = pnext, tnext
					continue
				}
			}
		} else if ti >= len(path) {
			return true
		}
		if !w.spend(1) {
			return false
		}
		if starP < 0 || starT >= len(path) {
			return false
		}
		_, starT = nextComponent(path, starT)
		pi, ti = starP, starT
	}
}

// nextSegment is the pattern segment at i and where the next starts (past
// its "/"; len(pat)+1 after the last). An escaped "/" ends it too (git
// matches "\/" to a "/"); one inside a class does not (it matches nothing).
func nextSegment(pat string, i int) (string, int) {
	for j := i; j < len(pat); j++ {
		switch pat[j] {
		case '/':
			return pat[i:j], j + 1
		case '\\':
			if j+1 < len(pat) && pat[j+1] == '/' {
				return pat[i:j], j + 2
			}
			j++
		case '[':
			if _, end, ok := matchClass(pat, j, 0); ok {
				j = end - 1
			}
		}
	}
	return pat[i:], len(pat) + 1
}

func nextComponent(path string, i int) (string, int) {
	if j := strings.IndexByte(path[i:], '/'); j >= 0 {
		return path[i : i+j], i + j + 1
	}
	return path[i:], len(path) + 1
}

func isGlobstar(seg string) bool {
	return len(seg) >= 2 && strings.Trim(seg, "*") == ""
}

// matchSegment matches a glob with no "/" against one name, byte by byte:
// "*" (any run of stars) matches any bytes, "?" one byte, a class one byte
// of it, "\x" the byte x. A star remembers where it started so a mismatch
// resumes there one byte further: every other token matches exactly one
// byte, so this is complete, and it costs at most len(seg)·len(name) steps.
func matchSegment(seg, name string, w *ignoreWork) bool {
	p, t := 0, 0
	starP, starT := -1, -1
	for p < len(seg) || t < len(name) {
		if !w.spend(1) {
			return false
		}
		if p < len(seg) {
			switch c := seg[p]; c {
			case '*':
				for p < len(seg) && seg[p] == '*' {
					p++
				}
				if p == len(seg) {
					return true
				}
				starP, starT = p, t
				continue
			case '?':
				if t < len(name) {
					p, t = p+1, t+1
					continue
				}
			case '[':
				if t < len(name) {
					matched, end, _ := matchClass(seg, p, name[t])
					w.spend(end - p)
					if matched {
						p, t = end, t+1
						continue
					}
				}
			default:
				step := 1
				if c == '\\' {
					c, step = seg[p+1], 2
				}
				if t < len(name) && name[t] == c {
					p, t = p+step, t+1
					continue
				}
			}
		}
		if starP < 0 || starT >= len(name) {
			return false
		}
		starT++
		p, t = starP, starT
	}
	return true
}

// matchClass reads the class that opens at pat[i] ("[") as git's
// wildmatch does: "!" or "^" negates, a "]" first is literal, "a-z" is a
// range, "\x" is x, "[:alpha:]" and the other POSIX names; it never
// matches "/". It returns whether c is in it, the index past its "]", and
// false when the class is unterminated or names an unknown POSIX class.
func matchClass(pat string, i int, c byte) (matched bool, end int, ok bool) {
	p := i + 1
	if p >= len(pat) {
		return false, 0, false
	}
	negated := false
	if pat[p] == '!' || pat[p] == '^' {
		negated = true
		p++
	}
	var prev byte
	havePrev := false
	first := true
	for {
		if p >= len(pat) {
			return false, 0, false
		}
		ch := pat[p]
		if ch == ']' && !first {
			break
		}
		first = false
		switch {
		case ch == '\\':
			p++
			if p >= len(pat) {
				return false, 0, false
			}
			ch = pat[p]
			if c == ch {
				matched = true
			}
			prev, havePrev = ch, true
		case ch == '-' && havePrev && p+1 < len(pat) && pat[p+1] != ']':
			p++
			hi := pat[p]
			if hi == '\\' {
				p++
				if p >= len(pat) {
					return false, 0, false
				}
				hi = pat[p]
			}
			if c >= prev && c <= hi {
				matched = true
			}
			havePrev = false
		case ch == '[' && p+1 < len(pat) && pat[p+1] == ':':
			s := p + 2
			e := s
			for e < len(pat) && pat[e] != ']' {
				e++
			}
			if e >= len(pat) {
				return false, 0, false
			}
			if e-s < 1 || pat[e-1] != ':' {
				// No ":]": the "[" is an ordinary member.
				if c == '[' {
					matched = true
				}
				prev, havePrev = '[', true
				break
			}
			in, known := posixClass(pat[s:e-1], c)
			if !known {
				return false, 0, false
			}
			if in {
				matched = true
			}
			p = e
			havePrev = false
		default:
			if c == ch {
				matched = true
			}
			prev, havePrev = ch, true
		}
		p++
	}
	return matched != negated && c != '/', p + 1, true
}

// posixClass says whether c is in the POSIX class name (ASCII, as git's
// wildmatch tests them), and whether name is one.
func posixClass(name string, c byte) (in, known bool) {
	lower := c >= 'a' && c <= 'z'
	upper := c >= 'A' && c <= 'Z'
	digit := c >= '0' && c <= '9'
	alpha := lower || upper
	switch name {
	case "alnum":
		return alpha || digit, true
	case "alpha":
		return alpha, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return c > 0x20 && c < 0x7f, true
	case "lower":
		return lower, true
	case "print":
		return c >= 0x20 && c < 0x7f, true
	case "punct":
		return c > 0x20 && c < 0x7f && !alpha && !digit, true
	case "space":
		return c == ' ' || (c >= '\t' && c <= '\r'), true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
