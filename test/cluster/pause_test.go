package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/testwait"
)

// pauseFleet is a producer and a fleet of Consume loops on one queue,
// recording every message handled and every settle that failed.
type pauseFleet struct {
	mu       sync.Mutex
	handled  map[string]int
	sent     []string
	sendErrs []error
	settle   []error
	total    atomic.Int64
}

func (f *pauseFleet) handle(_ context.Context, d *client.Delivery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handled[d.ID]++
	f.total.Add(1)
	return nil
}

func (f *pauseFleet) onSettle(o client.SettleOutcome) {
	if o.Err != nil {
		f.mu.Lock()
		f.settle = append(f.settle, o.Err)
		f.mu.Unlock()
	}
}

// produce sends one message every 2 ms until stop is closed.
func (f *pauseFleet) produce(ctx context.Context, q *client.Queue, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		id := fmt.Sprintf("m%05d", i)
		_, err := q.Send(ctx, client.Message{ID: id, Body: []byte("work")})
		f.mu.Lock()
		if err != nil {
			f.sendErrs = append(f.sendErrs, err)
		} else {
			f.sent = append(f.sent, id)
		}
		f.mu.Unlock()
	}
}

// A queue paused under a running Consume fleet stops delivering within one
// receive round while sends go on; no lease is lost, the pause (with who
// paused it) survives a node's loss, and after resume every message sent
// is handled exactly once.
func TestCluster_PauseStopsAConsumeFleetAndResumeDeliversAll(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := auth.AddToFile(tokens, auth.FileToken{Name: "oncall", SHA256: auth.HashSecret("oncall-secret"),
		Cluster: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3, TokensFile: tokens, Token: "oncall-secret"})
	q := fc.CreateQueue("jobs", client.Partitions(3), client.VisibilityTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	f := &pauseFleet{handled: map[string]int{}}
	stopProducer, stopFleet := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { f.produce(ctx, q, stopProducer) })
	const consumers, concurrency = 4, 2
	for range consumers {
		c := fc.Dial()
		wg.Go(func() {
			err := c.Queue("jobs").Consume(ctx, f.handle, client.ConsumeOptions{Concurrency: concurrency,
				Wait: time.Second, Stop: stopFleet, OnSettle: f.onSettle})
			if err != nil {
				t.Errorf("Consume: %v", err)
			}
		})
	}
	testwait.Until(t, 20*time.Second, "the fleet handles 200 messages", func() bool { return f.total.Load() >= 200 })

	admin := fc.Client()
	p, err := admin.Pause(ctx, "jobs")
	if err != nil || p.Paused != 3 || p.Partitions != 3 || p.By != "oncall" || p.At.IsZero() {
		t.Fatalf("Pause: %+v, %v", p, err)
	}
	// Leases granted before the pause applied may still be answered; a
	// fleet holds at most its prefetch (DefaultPrefetchMax per consumer,
	// as its handlers are few) of them.
	atPause := f.total.Load()
	leased := waitLeasedSettles(t, ctx, admin)
	if late := f.total.Load() - atPause; late > consumers*client.DefaultPrefetchMax {
		t.Fatalf("%d deliveries handled after the pause returned, more than the fleet's prefetch", late)
	}
	checkNoLeasesFor(t, ctx, admin, leased, 1500*time.Millisecond)

	// The pause is replicated: losing a node (and the leaderships on it)
	// keeps it, and no lease is granted by the new leaders.
	if err := fc.Nodes()[2].Close(); err != nil {
		t.Fatalf("closing node 3: %v", err)
	}
	testwait.UntilNil(t, 30*time.Second, "stats of every partition after losing a node", func() error {
		st, err := admin.QueueStats(ctx, "jobs")
		if err == nil {
			err = st.Err()
		}
		if err == nil && (st.PausedCount() != 3 || st.Total().PausedBy != "oncall") {
			return fmt.Errorf("paused on %d partitions by %q", st.PausedCount(), st.Total().PausedBy)
		}
		return err
	})
	checkNoLeasesFor(t, ctx, admin, leased, time.Second)

	if p, err := admin.Resume(ctx, "jobs"); err != nil || p.Paused != 0 {
		t.Fatalf("Resume: %+v, %v", p, err)
	}
	close(stopProducer)
	f.mu.Lock()
	sent := append([]string(nil), f.sent...)
	f.mu.Unlock()
	testwait.Until(t, 60*time.Second, "every message sent is handled", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, id := range sent {
			if f.handled[id] == 0 {
				return false
			}
		}
		return true
	})
	close(stopFleet)
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.handled {
		if n != 1 {
			t.Errorf("message %s handled %d times", id, n)
		}
	}
	if len(f.sendErrs) > 0 || len(f.settle) > 0 {
		t.Fatalf("send errors %v, settle errors %v (none expected: sends go on while paused, leases out settle)",
			f.sendErrs, f.settle)
	}
}

// waitLeasedSettles waits until nothing is leased (the leases out at the
// pause are acked) and returns the queue's lease count then.
func waitLeasedSettles(t *testing.T, ctx context.Context, admin *client.Client) uint64 {
	t.Helper()
	var leased uint64
	testwait.UntilNil(t, 20*time.Second, "the leases out at the pause settle", func() error {
		st, err := admin.QueueStats(ctx, "jobs")
		if err == nil {
			err = st.Err()
		}
		if err != nil {
			return err
		}
		if tot := st.Total(); tot.InFlight != 0 || !tot.Paused {
			return fmt.Errorf("in flight %d, paused %v", tot.InFlight, tot.Paused)
		}
		leased = st.Total().Counters.Leased
		return nil
	})
	return leased
}

// checkNoLeasesFor samples the queue's figures every 50 ms for d and fails
// if its lease count moves from leased (a paused queue leases nothing) or
// if no message is accepted meanwhile (sends go on while paused).
func checkNoLeasesFor(t *testing.T, ctx context.Context, admin *client.Client, leased uint64, d time.Duration) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	readyFirst, grew := int64(-1), false
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		st, err := admin.QueueStats(ctx, "jobs")
		if err == nil {
			err = st.Err()
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		if err != nil {
			continue // a leader being elected: sample again
		}
		tot := st.Total()
		if tot.Counters.Leased != leased || tot.InFlight != 0 {
			t.Fatalf("paused queue leased: %d leases (was %d), %d in flight", tot.Counters.Leased, leased, tot.InFlight)
		}
		if readyFirst < 0 {
			readyFirst = tot.Ready
		}
		grew = grew || tot.Ready > readyFirst
	}
	if !grew {
		t.Fatalf("no message was accepted in %v while paused", d)
	}
}
