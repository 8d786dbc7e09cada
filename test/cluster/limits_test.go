package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/testwait"
)

// A queue limited to 50 messages in flight never has more than 50 leased,
// sampled throughout, while 8 consumers ask for 100 each and hold what
// they get for a while; every message is still delivered once. A bound
// below the partition count is refused.
func TestCluster_MaxInFlightHoldsAcrossConsumersAndPartitions(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := fc.Client()
	err := admin.CreateQueue(ctx, "tight", client.Partitions(3), client.MaxInFlight(2))
	if !errors.Is(err, client.ErrInvalidConfig) || !strings.Contains(err.Error(), "at least the partition count") {
		t.Fatalf("max_in_flight 2 over 3 partitions: %v, want ErrInvalidConfig", err)
	}
	const limit, messages, consumers = 50, 1500, 8
	q := fc.CreateQueue("limited", client.Partitions(3), client.MaxInFlight(limit), client.VisibilityTimeout(time.Minute))
	for i := 0; i < messages; i += 100 {
		batch := make([]client.Message, 100)
		for k := range batch {
			batch[k] = client.Message{ID: fmt.Sprintf("m%05d", i+k), Body: []byte("x")}
		}
		if _, err := q.SendBatch(ctx, batch); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
	}
	var (
		mu      sync.Mutex
		seen    = map[string]int{}
		handled atomic.Int64
		wg      sync.WaitGroup
	)
	for c := range consumers {
		cq := fc.Dial().Queue("limited")
		wg.Go(func() {
			for handled.Load() < messages && ctx.Err() == nil {
				ds, err := cq.Receive(ctx, client.ReceiveOptions{Max: 100, Wait: 200 * time.Millisecond,
					Consumer: fmt.Sprintf("c%d", c)})
				if err != nil || len(ds) == 0 {
					continue
				}
				time.Sleep(20 * time.Millisecond) // the work: leases are held meanwhile
				for _, d := range ds {
					if err := d.Ack(ctx); err != nil {
						t.Errorf("ack %s: %v", d.ID, err)
					}
					mu.Lock()
					seen[d.ID]++
					mu.Unlock()
				}
				handled.Add(int64(len(ds)))
			}
		})
	}
	most := sampleInFlight(t, ctx, admin, "limited", func() bool { return handled.Load() >= messages })
	wg.Wait()
	if most > limit {
		t.Fatalf("%d messages in flight at once, over the queue's max_in_flight %d", most, limit)
	}
	if most < limit/2 {
		t.Fatalf("at most %d in flight: the consumers never pressed against the bound of %d", most, limit)
	}
	for i := range messages {
		if n := seen[fmt.Sprintf("m%05d", i)]; n != 1 {
			t.Errorf("m%05d handled %d times", i, n)
		}
	}
}

// sampleInFlight samples the queue's leased messages every 10 ms until
// done, and returns the most seen at once.
func sampleInFlight(t *testing.T, ctx context.Context, admin *client.Client, queue string, done func() bool) int64 {
	t.Helper()
	var most int64
	samples := 0
	testwait.Until(t, 90*time.Second, "every message handled", func() bool {
		st, err := admin.QueueStats(ctx, queue)
		if err == nil && st.Err() == nil {
			most = max(most, st.Total().InFlight)
			samples++
		}
		return done()
	})
	t.Logf("%d samples, at most %d in flight", samples, most)
	return most
}

// A queue bounded to 40 deliveries a second over 2 partitions delivers a
// second's burst and then about 40 a second to 4 greedy consumers,
// however many messages wait.
func TestCluster_MaxDeliveryRateHoldsAcrossConsumers(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const rate, messages = 40, 400
	q := fc.CreateQueue("rated", client.Partitions(2), client.MaxDeliveryRate(rate))
	for i := 0; i < messages; i += 100 {
		batch := make([]client.Message, 100)
		for k := range batch {
			batch[k] = client.Message{ID: fmt.Sprintf("r%05d", i+k)}
		}
		if _, err := q.SendBatch(ctx, batch); err != nil {
			t.Fatalf("SendBatch: %v", err)
		}
	}
	var (
		mu    sync.Mutex
		times []time.Time
		wg    sync.WaitGroup
	)
	start := time.Now()
	stop := start.Add(3 * time.Second)
	for range 4 {
		cq := fc.Dial().Queue("rated")
		wg.Go(func() {
			for time.Now().Before(stop) {
				ds, err := cq.Receive(ctx, client.ReceiveOptions{Max: 100, Wait: time.Second})
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				mu.Lock()
				for range ds {
					times = append(times, time.Now())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// In 3 s and a bit: a second's burst (40) plus 40 a second, with
	// rounding over two partitions' shares.
	elapsed := time.Since(start).Seconds()
	most := int(rate + rate*elapsed + 4)
	if len(times) > most || len(times) < 2*rate {
		t.Fatalf("%d deliveries in %.1fs at %d/s: want between %d and %d", len(times), elapsed, rate, 2*rate, most)
	}
	t.Logf("%d deliveries in %.1fs at a bound of %d/s", len(times), elapsed, rate)
}
