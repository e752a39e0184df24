package events

// fifo is a bounded first-in first-out queue in which every entry has a
// class (a small non-negative integer), and the oldest entry of any class
// can be removed as cheaply as the oldest entry overall. Every operation is
// O(1). Nodes live in an arena that grows up to the bound and is then
// reused through a free list, so once it has been full no operation
// allocates.
//
// A fifo is not safe for concurrent use; its owner guards it. The zero
// value is an empty queue that can only be popped.
type fifo[E any] struct {
	nodes []fifoNode[E]
	limit int
	free  int32 // first free node, or -1
	head  int32 // oldest entry, or -1
	tail  int32 // newest entry, or -1
	n     int
	// first and last are, by class, the oldest and newest entry of that
	// class, or -1. The entries of a class are linked oldest first through
	// fifoNode.nextSame; since they are a subsequence of the queue, the
	// queue's oldest entry is always the oldest of its class.
	first, last []int32
}

type fifoNode[E any] struct {
	v          E
	class      int32
	prev, next int32 // neighbours in the queue, or -1
	nextSame   int32 // next entry of the same class, or -1
}

func newFIFO[E any](limit, classes int) fifo[E] {
	q := fifo[E]{limit: limit, free: -1, head: -1, tail: -1}
	q.grow(classes)
	return q
}

// grow makes room for classes 0..classes-1.
func (q *fifo[E]) grow(classes int) {
	for len(q.first) < classes {
		q.first = append(q.first, -1)
		q.last = append(q.last, -1)
	}
}

func (q *fifo[E]) len() int   { return q.n }
func (q *fifo[E]) full() bool { return q.n >= q.limit }

// has reports whether an entry of class c is queued.
func (q *fifo[E]) has(c int32) bool { return int(c) < len(q.first) && q.first[c] >= 0 }

// push appends v of class c. The queue must not be full, and c must be
// below the number of classes given to newFIFO or grow.
func (q *fifo[E]) push(v E, c int32) {
	var i int32
	if q.free >= 0 {
		i = q.free
		q.free = q.nodes[i].next
	} else {
		q.nodes = append(q.nodes, fifoNode[E]{})
		i = int32(len(q.nodes) - 1)
	}
	q.nodes[i] = fifoNode[E]{v: v, class: c, prev: q.tail, next: -1, nextSame: -1}
	if q.tail >= 0 {
		q.nodes[q.tail].next = i
	} else {
		q.head = i
	}
	q.tail = i
	if l := q.last[c]; l >= 0 {
		q.nodes[l].nextSame = i
	} else {
		q.first[c] = i
	}
	q.last[c] = i
	q.n++
}

func (q *fifo[E]) pop() (v E, ok bool) {
	if q.n == 0 {
		return v, false
	}
	return q.removeFirstOf(q.nodes[q.head].class), true
}

func (q *fifo[E]) removeOldest(c int32) (v E, ok bool) {
	if !q.has(c) {
		return v, false
	}
	return q.removeFirstOf(c), true
}

func (q *fifo[E]) removeFirstOf(c int32) E {
	i := q.first[c]
	nd := &q.nodes[i]
	q.first[c] = nd.nextSame
	if nd.nextSame < 0 {
		q.last[c] = -1
	}
	if nd.prev >= 0 {
		q.nodes[nd.prev].next = nd.next
	} else {
		q.head = nd.next
	}
	if nd.next >= 0 {
		q.nodes[nd.next].prev = nd.prev
	} else {
		q.tail = nd.prev
	}
	v := nd.v
	*nd = fifoNode[E]{next: q.free}
	q.free = i
	q.n--
	return v
}
