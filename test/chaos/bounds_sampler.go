package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/fsm"
)

// VOverMaxInFlight: a partition of a queue with max_in_flight held more
// leases than its share.
const VOverMaxInFlight = "over-max-in-flight"

// boundedQueue is the workload queue run with a queue-wide max_in_flight,
// and the bound.
const (
	boundedQueue       = "chaos-jobs"
	boundedMaxInFlight = 40
)

// boundsSampleEvery is how often the bounds sampler reads the queue.
const boundsSampleEvery = 250 * time.Millisecond

// boundsSampler reads the bounded queue's figures from its partitions'
// leaders throughout the run and notes every partition seen holding more
// leases than its share of the bound, whatever fault runs.
type boundsSampler struct {
	mu      sync.Mutex
	samples int
	over    []string
	rate    rateCheck
}

// run samples until ctx is done.
func (s *boundsSampler) run(ctx context.Context, admin *client.Client) {
	for ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := admin.QueueStats(qctx, boundedQueue)
		cancel()
		if err == nil {
			s.check(st)
		}
		qctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		start := now()
		st, err = admin.QueueStats(qctx, rateQueue)
		end := now()
		cancel()
		if err == nil {
			s.checkRate(st, start, end)
		}
		sleep(ctx, boundsSampleEvery)
	}
}

// check notes the partitions of st over their share.
func (s *boundsSampler) check(st client.Stats) {
	cfg := fsm.QueueConfig{MaxInFlight: boundedMaxInFlight}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, p := range st.Partitions {
		if p.Err() != nil {
			continue
		}
		share := cfg.PartitionShare(p.Partition, len(st.Partitions)).MaxInFlight
		if p.InFlight > share && len(s.over) < dipsListed {
			s.over = append(s.over, fmt.Sprintf("%s %s/%d: %d leased, its share of max_in_flight %d is %d",
				now().Format("15:04:05.000"), boundedQueue, p.Partition, p.InFlight, boundedMaxInFlight, share))
		}
	}
}

// checkRate adds a read made between start and end to the rate check.
func (s *boundsSampler) checkRate(st client.Stats, start, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.rate.add(st, start, end) {
		if len(s.rate.over) < dipsListed {
			s.rate.over = append(s.rate.over, b)
		}
	}
}

// result returns the samples taken and the breaches noted.
func (s *boundsSampler) result() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, append([]string(nil), s.over...)
}

// rateResult returns the windows checked against the delivery rate
// bound and the breaches noted.
func (s *boundsSampler) rateResult() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate.checks, append([]string(nil), s.rate.over...)
}
