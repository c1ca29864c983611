package render

import "bytes"

// Mark is a line start in a file: Byte is where line Line+1 begins, Line
// the number of complete lines before it.
type Mark struct {
	Line int
	Byte int64
}

// LineIndex is a sparse index of a file's line starts, built by an Indexer
// during a full read that passed the text checks: with it a window deep in
// the file is read from the nearest mark instead of from the top
// (docs/performance.md, "Caches"). Total is the file's line count as a
// Window counts it.
type LineIndex struct {
	Total int
	Marks []Mark // ascending; the first is always {0, 0}
}

// Seek returns the last mark at or before the start of line offset
// (1-based): the place to resume a read whose window starts there.
func (x LineIndex) Seek(offset int) Mark {
	lo, hi := 0, len(x.Marks) // find the first mark with Line >= offset
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.Marks[m].Line < offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return Mark{}
	}
	return x.Marks[lo-1]
}

// Indexer records a Mark at the first line start at least every bytes after
// the previous one, keeping at most max marks (the rest of the file is then
// reached from the last one). Feed it the raw bytes with Write.
type Indexer struct {
	every, next, pos int64
	lines, max       int
	marks            []Mark
}

// NewIndexer returns an Indexer with marks every bytes apart (at least 1)
// and at most limit of them (at least 1).
func NewIndexer(every int64, limit int) *Indexer {
	every, limit = max(every, 1), max(limit, 1)
	return &Indexer{every: every, next: every, max: limit, marks: []Mark{{}}}
}

// Write feeds the next bytes of the file; it never fails.
func (ix *Indexer) Write(p []byte) (int, error) {
	c := 0 // p[:c] is counted
	for len(ix.marks) < ix.max && ix.next < ix.pos+int64(len(p)) {
		from := max(int(ix.next-ix.pos), c)
		i := bytes.IndexByte(p[from:], '\n')
		if i < 0 {
			break
		}
		at := from + i + 1
		ix.lines += bytes.Count(p[c:at], nl)
		c = at
		ix.marks = append(ix.marks, Mark{Line: ix.lines, Byte: ix.pos + int64(at)})
		ix.next = ix.pos + int64(at) + ix.every
	}
	ix.lines += bytes.Count(p[c:], nl)
	ix.pos += int64(len(p))
	return len(p), nil
}

var nl = []byte{'\n'}

// Index returns the index of a file of total lines (the Window's
// TotalLines). Its marks are not copied: stop writing first.
func (ix *Indexer) Index(total int) LineIndex {
	return LineIndex{Total: total, Marks: ix.marks[:len(ix.marks):len(ix.marks)]}
}
