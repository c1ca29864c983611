package policy

// links are the intrusive pointers of an element of a recency list: one
// struct per entry instead of container/list's separate Element and boxed
// value.
type links[T any] struct{ prev, next *T }

// linked is a pointer type that carries its own links.
type linked[T any] interface {
	*T
	links() *links[T]
}

// recency is an intrusive doubly linked list, most recently used at the
// front. Every operation is O(1). The zero value is empty.
type recency[T any, P linked[T]] struct{ front, back *T }

// pushFront inserts e, which must not be in any list.
func (l *recency[T, P]) pushFront(e *T) {
	lk := P(e).links()
	lk.prev, lk.next = nil, l.front
	if l.front != nil {
		P(l.front).links().prev = e
	} else {
		l.back = e
	}
	l.front = e
}

// remove unlinks e, which must be in l.
func (l *recency[T, P]) remove(e *T) {
	lk := P(e).links()
	if lk.prev != nil {
		P(lk.prev).links().next = lk.next
	} else {
		l.front = lk.next
	}
	if lk.next != nil {
		P(lk.next).links().prev = lk.prev
	} else {
		l.back = lk.prev
	}
	lk.prev, lk.next = nil, nil
}

// moveToFront marks e, which must be in l, as most recently used.
func (l *recency[T, P]) moveToFront(e *T) {
	if l.front == e {
		return
	}
	l.remove(e)
	l.pushFront(e)
}
