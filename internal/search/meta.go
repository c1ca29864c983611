package search

import "encoding/json"

// boundPaths drops trailing paths until the serialized metadata fits
// metaMax bytes; a single oversized path is kept.
func (s *Searcher) boundPaths(m PathsMeta) PathsMeta {
	m.Paths = boundItems(m.Paths, s.metaMax, func(items []string) any {
		c := m
		c.Paths = items
		return c
	})
	return m
}

// boundMatches drops trailing file groups until the serialized metadata
// fits metaMax bytes; a single oversized group is kept.
func (s *Searcher) boundMatches(m MatchesMeta) MatchesMeta {
	m.Files = boundItems(m.Files, s.metaMax, func(items []FileMatches) any {
		c := m
		c.Files = items
		return c
	})
	return m
}

// boundItems returns the longest prefix of items (at least one) whose
// envelope, as built by wrap, serializes within max bytes. Each item is
// encoded once, so this is linear in the size of the metadata.
func boundItems[T any](items []T, max int, wrap func([]T) any) []T {
	if len(items) <= 1 {
		return items
	}
	envelope, err := json.Marshal(wrap(items[:0]))
	if err != nil {
		return items
	}
	size := len(envelope)
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return items
		}
		size += len(b)
		if i > 0 {
			size++ // the comma
		}
		if size > max && i > 0 {
			return items[:i]
		}
	}
	return items
}
