package chaos

import (
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/fsm"
)

// VOverMaxDeliveryRate: a partition of the queue with max_delivery_rate
// leased more over a window of at least rateWindowMin than its share of
// the rate allows.
const VOverMaxDeliveryRate = "over-max-delivery-rate"

// rateQueue is the workload queue run with max_delivery_rate: the mixed
// queue, whose steady traffic stays under the bound while the backlog a
// fault leaves behind is drained at it. (The jobs queue takes batches of
// up to 1,000 messages: a bound it would hit most of the time would leave
// a long run's backlog undrained.)
const rateQueue = "chaos-mixed"

// The delivery rate bound the rate queue runs with, and how it is held
// to it: over any window of at least rateWindowMin (by this process's
// clock, from the end of one stats read to the start of a later one), a
// partition may lease its share of the rate for the window's longest
// span (the first read's start to the last read's end) plus rateSlack:
// the bound's one-second burst, and a leader's clock stepping ahead
// within the max clock step (10 s), which moves the partition clock, and
// so the bucket, that much faster.
const (
	boundedMaxDeliveryRate = 40
	rateWindowMin          = 30 * time.Second
	rateSlack              = 12 * time.Second
	// rateSamplesKept bounds the samples kept per partition (a window
	// needs those of the last rateWindowMin and a little more).
	rateSamplesKept = 400
)

// rateSample is one read of a partition's lease counter: it was read at
// some moment between start and end.
type rateSample struct {
	start, end time.Time
	leased     uint64
}

// rateCheck holds each partition of the bounded queue to its share of
// the delivery rate bound over windows of at least rateWindowMin.
type rateCheck struct {
	byPart map[int][]rateSample
	checks int
	over   []string
}

// add records a read of st made between start and end, and returns the
// breaches it shows.
func (r *rateCheck) add(st client.Stats, start, end time.Time) []string {
	if r.byPart == nil {
		r.byPart = map[int][]rateSample{}
	}
	cfg := fsm.QueueConfig{MaxDeliveryRate: boundedMaxDeliveryRate}
	var out []string
	for _, p := range st.Partitions {
		if p.Err() != nil {
			continue
		}
		share := cfg.PartitionShare(p.Partition, len(st.Partitions)).MaxDeliveryRate
		now := rateSample{start: start, end: end, leased: p.Counters.Leased}
		kept := r.byPart[p.Partition]
		if old, ok := windowStart(kept, now); ok && now.leased >= old.leased {
			r.checks++
			span := now.end.Sub(old.start)
			allowed := float64(share) * (span + rateSlack).Seconds()
			if n := now.leased - old.leased; float64(n) > allowed {
				out = append(out, fmt.Sprintf("%s %s/%d: %d leases in at most %v, its share of max_delivery_rate %d/s allows %.0f",
					end.Format("15:04:05.000"), rateQueue, p.Partition, n, span.Round(time.Millisecond), share, allowed))
			}
		}
		kept = append(kept, now)
		if len(kept) > rateSamplesKept {
			kept = kept[len(kept)-rateSamplesKept:]
		}
		r.byPart[p.Partition] = kept
	}
	return out
}

// windowStart returns the latest kept sample that ended rateWindowMin or
// more before now started.
func windowStart(kept []rateSample, now rateSample) (rateSample, bool) {
	for i := len(kept) - 1; i >= 0; i-- {
		if now.start.Sub(kept[i].end) >= rateWindowMin {
			return kept[i], true
		}
	}
	return rateSample{}, false
}
