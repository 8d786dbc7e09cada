package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Drain has the consumers ack everything until every queue is empty:
// nothing ready, delayed or leased on any partition, no delivery in a
// consumer's hands or buffer, twice in a row. It reports whether that
// happened before ctx ended, and what was left otherwise.
func (w *Workload) Drain(ctx context.Context, admin *client.Client) (bool, map[string]int64) {
	w.drain.Store(true)
	stable := 0
	for {
		left, ok := remaining(ctx, admin)
		if ok && w.busy.Load() == 0 && w.buffered() == 0 {
			stable++
			if stable >= 2 {
				return true, nil
			}
		} else {
			stable = 0
		}
		select {
		case <-ctx.Done():
			return false, left
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (w *Workload) buffered() int {
	n := 0
	for _, q := range w.consQueue {
		n += q.Buffered()
	}
	return n
}

// remaining counts the messages still present per queue; ok is set when
// every partition answered and all are empty.
func remaining(ctx context.Context, admin *client.Client) (map[string]int64, bool) {
	left := map[string]int64{}
	ok := true
	for _, q := range workloadQueues {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := admin.QueueStats(sctx, q.name)
		cancel()
		if err != nil || len(st.Partitions) != q.partitions {
			left[q.name] = -1
			ok = false
			continue
		}
		for _, p := range st.Partitions {
			if p.Err() != nil {
				left[q.name] = -1
				ok = false
				break
			}
			left[q.name] += p.Ready + p.Delayed + p.InFlight
		}
		ok = ok && left[q.name] == 0
	}
	return left, ok
}

// ListDeadLetters lists every queue's dead letters, retrying while the
// cluster answers with errors; ok is set when all were listed.
func ListDeadLetters(ctx context.Context, admin *client.Client) ([]DeadLetter, bool) {
	var out []DeadLetter
	for _, q := range workloadQueues {
		for {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			letters, err := admin.DeadLetters(lctx, q.name, client.DeadFilter{})
			cancel()
			if err == nil {
				for _, l := range letters {
					out = append(out, deadLetterOf(q.name, l))
				}
				break
			}
			if ctx.Err() != nil {
				return out, false
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return out, true
}

// maxReceivesOf returns each workload queue's max_receives as configured.
func maxReceivesOf() map[string]int {
	out := map[string]int{}
	for _, q := range workloadQueues {
		out[q.name] = maxReceives
	}
	return out
}

// annotateGaps names the fault each availability gap overlaps.
func annotateGaps(gaps []Gap, faults []FaultRecord) {
	for i := range gaps {
		for _, f := range faults {
			if f.Skipped == "" && (f.covers(gaps[i].From) || f.covers(gaps[i].To) ||
				(gaps[i].From.Before(f.Start) && gaps[i].To.After(f.Start))) {
				gaps[i].Fault = fmt.Sprintf("during %s %v", f.Kind, f.Targets)
				break
			}
		}
	}
}
