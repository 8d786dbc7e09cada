package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestCluster_ConsumeAcksRideOnReceivesExactlyOnce drains a backlog with
// two Consume loops whose acks ride on receives: every message is handled,
// every ack is reported once and confirmed, and the partitions count
// exactly one ack per message.
func TestCluster_ConsumeAcksRideOnReceivesExactlyOnce(t *testing.T) {
	c := startCluster(t, options{})
	admin := c.dial("ride-admin")
	c.createQueue(admin, "rides", client.Partitions(2))
	const n = 600
	msgs := make([]client.Message, n)
	for i := range msgs {
		msgs[i] = client.Message{ID: fmt.Sprintf("m%d", i), Body: []byte("x")}
	}
	producer := c.dial("ride-producer").Queue("rides")
	for i := 0; i < n; i += 100 {
		if _, err := producer.SendBatch(context.Background(), msgs[i:i+100]); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	var mu sync.Mutex
	settled := map[string]int{}
	var failed []error
	onSettle := func(o client.SettleOutcome) {
		mu.Lock()
		defer mu.Unlock()
		settled[o.Delivery.ID]++
		if o.Err != nil || o.Action != client.SettleAck {
			failed = append(failed, fmt.Errorf("%s: %s: %w", o.Delivery.ID, o.Action, o.Err))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumers sync.WaitGroup
	for i := range 2 {
		q := c.dial(fmt.Sprintf("ride-consumer-%d", i)).Queue("rides")
		consumers.Go(func() {
			err := q.Consume(ctx, func(context.Context, *client.Delivery) error { return nil },
				client.ConsumeOptions{Concurrency: 4, Prefetch: 16, Wait: 500 * time.Millisecond, OnSettle: onSettle})
			if err != nil {
				t.Errorf("consume: %v", err)
			}
		})
	}
	testwait.UntilNil(c.t, 60*time.Second, "every message acked", func() error {
		mu.Lock()
		got := len(settled)
		mu.Unlock()
		if got < n {
			return fmt.Errorf("%d of %d settled", got, n)
		}
		if st := stats(t, admin, "rides"); st.Ready+st.Delayed+st.InFlight != 0 || st.Counters.Acked != n {
			return fmt.Errorf("%d ready, %d delayed, %d in flight, %d acked", st.Ready, st.Delayed, st.InFlight, st.Counters.Acked)
		}
		return nil
	})
	cancel()
	consumers.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d failed settles, the first: %v", len(failed), errors.Join(failed[0]))
	}
	for id, k := range settled {
		if k != 1 {
			t.Fatalf("%s settled %d times", id, k)
		}
	}
	if st := stats(t, admin, "rides"); st.Counters.Acked != n || st.Counters.Leased != n {
		t.Fatalf("%d acked, %d leased for %d messages", st.Counters.Acked, st.Counters.Leased, n)
	}
}
