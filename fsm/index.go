package fsm

// seqChunkBits sets how many sequence numbers share one chunk of a seqTable.
const (
	seqChunkBits = 8
	seqChunkLen  = 1 << seqChunkBits
)

type seqChunk struct {
	slots [seqChunkLen]*message
	count int
}

// seqTable maps sequence numbers to messages in O(1) and iterates them in
// order. It costs one pointer per sequence number spanned by a non-empty
// chunk; chunks that empty out are freed, so a long run of acked messages
// costs nothing. Sequence numbers are inserted in increasing order.
type seqTable struct {
	chunks     []*seqChunk
	firstChunk uint64 // chunk number of chunks[0]
	count      int
	lastSeq    uint64
}

func (t *seqTable) len() int { return t.count }

func (t *seqTable) get(seq uint64) *message {
	c := seq >> seqChunkBits
	if c < t.firstChunk || c-t.firstChunk >= uint64(len(t.chunks)) {
		return nil
	}
	ch := t.chunks[c-t.firstChunk]
	if ch == nil {
		return nil
	}
	return ch.slots[seq&(seqChunkLen-1)]
}

func (t *seqTable) put(m *message) {
	if t.count > 0 && m.seq <= t.lastSeq {
		panic("fsm: sequence numbers must be inserted in increasing order")
	}
	c := m.seq >> seqChunkBits
	if len(t.chunks) == 0 {
		t.firstChunk = c
	}
	for c-t.firstChunk >= uint64(len(t.chunks)) {
		t.chunks = append(t.chunks, nil)
	}
	ch := t.chunks[c-t.firstChunk]
	if ch == nil {
		ch = new(seqChunk)
		t.chunks[c-t.firstChunk] = ch
	}
	ch.slots[m.seq&(seqChunkLen-1)] = m
	ch.count++
	t.count++
	t.lastSeq = m.seq
}

func (t *seqTable) remove(seq uint64) {
	c := seq >> seqChunkBits
	ch := t.chunks[c-t.firstChunk]
	if ch == nil || ch.slots[seq&(seqChunkLen-1)] == nil {
		panic("fsm: removing an absent sequence number")
	}
	ch.slots[seq&(seqChunkLen-1)] = nil
	ch.count--
	t.count--
	if ch.count > 0 {
		return
	}
	t.chunks[c-t.firstChunk] = nil
	for len(t.chunks) > 0 && t.chunks[0] == nil {
		t.chunks[0] = nil
		t.chunks = t.chunks[1:]
		t.firstChunk++
	}
	for len(t.chunks) > 0 && t.chunks[len(t.chunks)-1] == nil {
		t.chunks = t.chunks[:len(t.chunks)-1]
	}
}

// nextAfter returns the smallest seq above seq that may hold a message:
// seq+1, or the start of the next allocated chunk when seq+1 falls into a
// freed one, or lastSeq+1 when nothing above seq remains. lastSeq is the
// last seq ever put, and its chunk may have been freed since (every
// message of it removed): chunks ends at the last allocated chunk, which
// can lie below lastSeq's.
func (t *seqTable) nextAfter(seq uint64) uint64 {
	end := t.lastSeq + 1
	next := seq + 1
	if t.count == 0 || next >= end {
		return max(next, end)
	}
	if first := t.firstChunk << seqChunkBits; next < first {
		return first // chunks before the first allocated one are all empty
	}
	for c := next >> seqChunkBits; ; c++ {
		i := c - t.firstChunk
		if i >= uint64(len(t.chunks)) {
			return end // every chunk above seq was freed
		}
		if t.chunks[i] != nil {
			return next
		}
		next = (c + 1) << seqChunkBits
	}
}

// ascend calls fn for each message in seq order until fn returns false.
func (t *seqTable) ascend(fn func(*message) bool) {
	for _, ch := range t.chunks {
		if ch == nil {
			continue
		}
		for i := range ch.slots {
			if m := ch.slots[i]; m != nil && !fn(m) {
				return
			}
		}
	}
}

// ascendFrom calls fn for each message with a seq of at least from, in seq
// order, until fn returns false.
func (t *seqTable) ascendFrom(from uint64, fn func(*message) bool) {
	c := from >> seqChunkBits
	start := 0
	if c > t.firstChunk {
		start = int(min(c-t.firstChunk, uint64(len(t.chunks))))
	}
	for k := start; k < len(t.chunks); k++ {
		ch := t.chunks[k]
		if ch == nil {
			continue
		}
		for i := range ch.slots {
			if m := ch.slots[i]; m != nil && m.seq >= from && !fn(m) {
				return
			}
		}
	}
}

// fifoChunkLen is the number of items per chunk of a fifo.
const fifoChunkLen = 512

// fifo is a first-in first-out queue stored in fixed-size chunks, so that it
// never holds more than one chunk of unused capacity.
type fifo[T any] struct {
	chunks [][]T
	head   int // index of the front item in chunks[0]
	n      int
}

func (q *fifo[T]) len() int { return q.n }

func (q *fifo[T]) push(v T) {
	if len(q.chunks) == 0 || len(q.chunks[len(q.chunks)-1]) == fifoChunkLen {
		q.chunks = append(q.chunks, make([]T, 0, fifoChunkLen))
	}
	last := len(q.chunks) - 1
	q.chunks[last] = append(q.chunks[last], v)
	q.n++
}

// front returns the oldest item; the fifo must not be empty.
func (q *fifo[T]) front() T { return q.chunks[0][q.head] }

// at returns the i-th oldest item.
func (q *fifo[T]) at(i int) T {
	i += q.head
	return q.chunks[i/fifoChunkLen][i%fifoChunkLen]
}

func (q *fifo[T]) pop() T {
	v := q.chunks[0][q.head]
	var zero T
	q.chunks[0][q.head] = zero
	q.head++
	q.n--
	if q.n == 0 {
		clear(q.chunks)
		q.chunks, q.head = q.chunks[:0], 0
	} else if q.head == fifoChunkLen {
		q.chunks[0] = nil
		q.chunks, q.head = q.chunks[1:], 0
	}
	return v
}

func (q *fifo[T]) reset() { *q = fifo[T]{} }
