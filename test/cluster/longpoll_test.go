package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestCluster_LongPollLeavesNoLeaseUnseen: on a queue with several
// partitions, a Receive whose wait is longer than the visibility timeout
// leaves long polls on the other partitions when it returns. The leases
// they obtain later must reach a Receive in time or go back without
// counting: every message is seen once, at attempt 1, none expires, and
// with max_receives 1 none is dead-lettered.
func TestCluster_LongPollLeavesNoLeaseUnseen(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("longpoll")
	const vis = 500 * time.Millisecond
	c.createQueue(cl, "lp", client.Partitions(4), client.VisibilityTimeout(vis), client.MaxReceives(1))
	q := cl.Queue("lp")
	ctx := opContext(t)
	const total = 16
	var mu sync.Mutex
	seen := map[string][]uint32{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	done := make(chan error, 1)
	go func() {
		for count() < total && ctx.Err() == nil {
			ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 4 * vis})
			if err != nil {
				done <- err
				return
			}
			for _, d := range ds {
				mu.Lock()
				seen[d.ID] = append(seen[d.ID], d.Attempt)
				mu.Unlock()
				if err := d.Ack(ctx); err != nil {
					done <- fmt.Errorf("ack %s attempt %d: %w", d.ID, d.Attempt, err)
					return
				}
			}
		}
		done <- nil
	}()
	// One message at a time, further apart than the visibility timeout:
	// each finds the polls of the waiting Receive and those left behind
	// by the one before, and a lease a left-behind poll takes has run out
	// before the next message could end the wait.
	var ids []string
	for i := range total {
		id := fmt.Sprintf("m%d", i)
		ids = append(ids, id)
		mustSend(t, q, client.Message{ID: id})
		time.Sleep(vis + vis/2) // pacing the producer so that polls are waiting
	}
	if err := <-done; err != nil {
		t.Fatalf("consumer: %v", err)
	}
	// The polls left behind end within their wait; then nothing may have
	// expired, been dead-lettered or be left.
	testwait.UntilNil(c.t, waitLong, "an empty queue with no expired lease", func() error {
		st, err := cl.QueueStats(ctx, "lp")
		if err != nil {
			return err
		}
		tot := st.Total()
		if tot.Counters.Expired != 0 {
			t.Fatalf("%d leases expired unseen", tot.Counters.Expired)
		}
		if tot.Ready+tot.InFlight+tot.Dead != 0 || tot.Counters.Acked != total {
			return fmt.Errorf("stats %+v", tot)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if got := seen[id]; len(got) != 1 || got[0] != 1 {
			t.Errorf("message %s seen at attempts %v, want [1]", id, got)
		}
	}
}
