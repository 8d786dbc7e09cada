package client

// LaneWaiting is how many callers' sends wait on partition p's send lane
// of q (see sendLane), for tests.
func LaneWaiting(q *Queue, p int) int {
	l := q.lane(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

// LaneInFlight is laneInFlight, for tests.
const LaneInFlight = laneInFlight
