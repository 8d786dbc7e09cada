package client

// Orphan polls. Receive polls every partition at once and returns the
// first answer with messages; the polls of the other partitions run on
// until their wait ends, and what they lease goes to the Queue's buffer.
// Those polls are the Queue's orphans. A later Receive does not poll a
// partition an orphan still waits on: it waits for the orphan's answer
// through the buffer, so that a consumer calling Receive in a loop keeps
// one long poll per partition at the server rather than one per call.

// orphanPolls returns how many orphan polls wait on partition p.
func (q *Queue) orphanPolls(p int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.orphans[p]
}

// orphansStarted counts k long polls of partition p whose Receive call
// returned before they were answered.
func (q *Queue) orphansStarted(p, k int) {
	if k <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.orphans == nil {
		q.orphans = make(map[int]int)
	}
	q.orphans[p] += k
}

// orphanEnded counts an orphan poll of partition p answered (its
// deliveries, if any, already buffered) and wakes the Receive calls
// waiting on the buffer, so that one that left p to the orphan polls it
// now.
func (q *Queue) orphanEnded(p int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch n := q.orphans[p]; {
	case n <= 0:
		panic("client: an orphan poll ended that was never counted")
	case n == 1:
		delete(q.orphans, p)
	default:
		q.orphans[p] = n - 1
	}
	if q.bufReady != nil {
		close(q.bufReady)
		q.bufReady = nil
	}
}
