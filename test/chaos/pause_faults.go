package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ferrymq/ferry/client"
)

// VLeasedWhilePaused: a partition of a paused queue granted a lease. Each
// partition's lease count is read from a leader that reports the pause
// (so it has applied the pause entry and every lease before it) once the
// pause is confirmed and again just before the resume: the two must be
// equal, whatever leader answered and whatever faults ran meanwhile.
const VLeasedWhilePaused = "leased-while-paused"

// pauseFault pauses one workload queue's deliveries under the running
// workload (which goes on sending and receiving), and resumes it at the
// heal. The record's PauseLeases notes any partition whose lease count
// moved while paused.
func (in *Injector) pauseFault(ctx context.Context, rng *rand.Rand, rec *FaultRecord) (func() error, error) {
	queue := workloadQueues[rng.IntN(len(workloadQueues))].name
	admin, err := in.c.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	rec.Targets = []string{queue}
	resume := func() error {
		defer admin.Close()
		uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		before, ok := pausedLeases(uctx, admin, queue)
		if !ok {
			rec.Detail += "; lease counts before the resume not read"
		}
		if _, err := retryAdmin(uctx, func(c context.Context) (client.QueuePause, error) { return admin.Resume(c, queue) }); err != nil {
			return fmt.Errorf("resume %s: %w", queue, err)
		}
		for p, n := range before {
			if at := rec.pausedAt[p]; ok && n != at {
				rec.PauseLeases = append(rec.PauseLeases, fmt.Sprintf("%s/%d: %d leases when paused, %d before the resume", queue, p, at, n))
			}
		}
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := retryAdmin(pctx, func(c context.Context) (client.QueuePause, error) { return admin.Pause(c, queue) }); err != nil {
		return resume, fmt.Errorf("pause %s: %w", queue, err)
	}
	at, ok := pausedLeases(pctx, admin, queue)
	if !ok {
		return resume, fmt.Errorf("lease counts of paused %s not read", queue)
	}
	rec.pausedAt = at
	rec.Detail = fmt.Sprintf("deliveries of %s paused (%d partitions)", queue, len(at))
	return resume, nil
}

// pausedLeases reads every partition's lease count from a leader that
// reports the queue paused, trying again (bounded by ctx) while a
// partition's figures are missing or come from a replica that has not
// applied the pause yet.
func pausedLeases(ctx context.Context, admin *client.Client, queue string) (map[int]uint64, bool) {
	for ctx.Err() == nil {
		st, err := admin.QueueStats(ctx, queue)
		if err == nil && st.Err() == nil && st.PausedCount() == len(st.Partitions) {
			out := map[int]uint64{}
			for _, p := range st.Partitions {
				out[p.Partition] = p.Counters.Leased
			}
			return out, true
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return nil, false
}
