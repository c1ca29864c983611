// Package textnorm holds the line comparisons the tolerant edit
// (internal/fs) and apply_patch (internal/patch) share, so both read
// typographic punctuation and indentation the same way (docs/edits.md).
// It imports nothing of ours.
package textnorm

import "unicode/utf8"

// PunctASCII is the ASCII form typographic punctuation is compared as: the
// set Codex's apply_patch normalizes (dashes, curly quotes, Unicode
// spaces), and U+2000/U+2001.
func PunctASCII(r rune) (byte, bool) {
	switch {
	case r >= 0x2010 && r <= 0x2015, r == 0x2212:
		return '-', true
	case r >= 0x2018 && r <= 0x201B:
		return '\'', true
	case r >= 0x201C && r <= 0x201F:
		return '"', true
	case r == 0x00A0, r >= 0x2000 && r <= 0x200A, r == 0x202F, r == 0x205F, r == 0x3000:
		return ' ', true
	}
	return 0, false
}

// NormalizePunct is s with each typographic rune replaced by its ASCII
// form, and whether it had any (then s itself comes back). Every such rune
// starts with byte 0xC2, 0xE2 or 0xE3, so the runs between those bytes are
// copied whole.
func NormalizePunct(s []byte) ([]byte, bool) {
	var b []byte
	copied := 0 // s[:copied] is in b
	for i := 0; i < len(s); {
		if c := s[i]; c != 0xC2 && c != 0xE2 && c != 0xE3 {
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if a, ok := PunctASCII(r); ok {
			if b == nil {
				b = make([]byte, 0, len(s))
			}
			b = append(append(b, s[copied:i]...), a)
			copied = i + size
		}
		i += size
	}
	if b == nil {
		return s, false
	}
	return append(b, s[copied:]...), true
}

// IndentOf is l's leading spaces and tabs.
func IndentOf(l []byte) []byte {
	i := 0
	for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
		i++
	}
	return l[:i]
}

// KMPTable is the failure function of keys, for a Knuth–Morris–Pratt
// search of a run of line hashes.
func KMPTable(keys []uint64) []int {
	fail := make([]int, len(keys))
	for i, k := 1, 0; i < len(keys); i++ {
		for k > 0 && keys[i] != keys[k] {
			k = fail[k-1]
		}
		if keys[i] == keys[k] {
			k++
		}
		fail[i] = k
	}
	return fail
}
