package jsonscan

import (
	"bytes"
	"iter"
)

// The scans below read text that Check found valid: they never fail, and
// on other text they return some index within it.

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space, len(b) when there is none.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// StringEnd returns the index just past the string that starts at
// b[i] == '"': the next quote not escaped, that is, not preceded by an odd
// run of backslashes; len(b) when there is none.
func StringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		j += k
		slashes := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			slashes++
		}
		if slashes%2 == 0 {
			return j + 1
		}
	}
	return len(b)
}

// ValueEnd returns the index just past the value that starts at b[i].
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				j = StringEnd(b, j)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
			j++
		}
		return len(b)
	}
	for j := i; j < len(b); j++ { // number, true, false, null
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}

// Member is one member of an object: Key is its key as written, quotes
// and escapes included, and its value is b[At:End] of the text scanned.
type Member struct {
	Key     []byte
	At, End int
}

// Members yields the members of the object at b[i], in the order written;
// nothing when b[i] is not '{'.
func Members(b []byte, i int) iter.Seq[Member] {
	return func(yield func(Member) bool) {
		if i >= len(b) || b[i] != '{' {
			return
		}
		for i = SkipSpace(b, i+1); i < len(b) && b[i] == '"'; {
			end := StringEnd(b, i)
			at := SkipSpace(b, SkipSpace(b, end)+1) // past the ':'
			vend := ValueEnd(b, at)
			if !yield(Member{Key: b[i:end], At: at, End: vend}) {
				return
			}
			if i = SkipSpace(b, vend); i >= len(b) || b[i] != ',' {
				return // '}'
			}
			i = SkipSpace(b, i+1)
		}
	}
}

// Elements yields the elements of the array at b[i], in order, each as
// the index of its first byte and the index just past it; nothing when
// b[i] is not '['.
func Elements(b []byte, i int) iter.Seq2[int, int] {
	return func(yield func(at, end int) bool) {
		if i >= len(b) || b[i] != '[' {
			return
		}
		for i = SkipSpace(b, i+1); i < len(b) && b[i] != ']'; {
			end := ValueEnd(b, i)
			if end <= i || !yield(i, end) {
				return
			}
			if i = SkipSpace(b, end); i < len(b) && b[i] == ',' {
				i = SkipSpace(b, i+1)
			}
		}
	}
}

// Depth is the deepest nesting of objects and arrays in b, as
// encoding/json counts it.
func Depth(b []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = StringEnd(b, i) - 1
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}
