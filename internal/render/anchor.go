package render

import (
	"strconv"

	"github.com/zeebo/xxh3"
)

// Anchored lines (docs/edits.md, "Anchored lines"): in the anchors dialect
// read shows each line as "<n>#<tag>: <text>", and edit_lines names lines
// by those anchors. A tag is two letters computed from the line's text
// alone, so equal lines carry equal tags and a tag says nothing of where a
// line stands.

// TagAlphabet is the 16 letters tags are written with: every pair of them
// is one token, and none merges with the "#" before it or the ":" after
// it, in the tokenizers of GPT-4o, Llama 3, Qwen 3, Gemma 3, DeepSeek V3
// and Claude (measured: docs/edits.md, "Anchored lines").
const TagAlphabet = "ABCDFHIKMNOPRSTW"

// tags holds every tag, indexed by the hash's low 8 bits, so a line's tag
// costs no allocation.
var tags = func() (t [256]string) {
	for i := range t {
		t[i] = string([]byte{TagAlphabet[i&0xF], TagAlphabet[i>>4]})
	}
	return t
}()

// Tag is the tag of a line whose text is text: its bytes without the line
// ending (no "\n", and no "\r" before it) and, on the first line, without
// a BOM; untruncated, whatever read shows of it.
func Tag(text []byte) string { return tags[xxh3.Hash(text)&0xFF] }

// TagString is Tag of a string.
func TagString(text string) string { return tags[xxh3.HashString(text)&0xFF] }

// tagOf is the tag of a 64-bit XXH3 of a line's text.
func tagOf(h uint64) string { return tags[h&0xFF] }

// IsTag reports whether s is a tag: two letters of TagAlphabet.
func IsTag(s string) bool {
	return len(s) == 2 && tagIndex(s[0]) >= 0 && tagIndex(s[1]) >= 0
}

func tagIndex(c byte) int {
	for i := range len(TagAlphabet) {
		if TagAlphabet[i] == c {
			return i
		}
	}
	return -1
}

// AppendLinePrefix appends what read shows before a line's text: "<n>: ",
// or "<n>#<tag>: " for a line of an anchored window (a Tag set).
func AppendLinePrefix(b []byte, l Line) []byte {
	b = strconv.AppendInt(b, int64(l.Number), 10)
	if l.Tag != "" {
		b = append(b, '#')
		b = append(b, l.Tag...)
	}
	return append(b, ": "...)
}

// Anchor is "<n>#<tag>", as read shows a line of the anchors dialect and
// as edit_lines takes it.
func Anchor(number int, tag string) string { return strconv.Itoa(number) + "#" + tag }
