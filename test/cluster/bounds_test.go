package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// TestCluster_LargeValidTrafficCannotWedgeAPartition replays the traffic
// that once merged into one unshippable raft entry: eight producers each
// sending one request of 30 x 1 MB at once. Every message must be
// confirmed, a normal send must still work, an oversize message must be
// refused with ErrMessageTooLarge, and a receive of up to 1000 of them must
// lease only what it can deliver: every message arrives at attempt 1 and
// nothing is dead-lettered.
func TestCluster_LargeValidTrafficCannotWedgeAPartition(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("bounds")
	c.createQueue(cl, "big", client.MaxReceives(1))
	q := cl.Queue("big")
	const producers, perRequest, bodyBytes = 8, 30, 1_000_000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make([]error, producers)
	for p := range producers {
		wg.Go(func() {
			msgs := make([]client.Message, perRequest)
			for i := range msgs {
				msgs[i] = client.Message{ID: fmt.Sprintf("p%d-%d", p, i), Body: bytes.Repeat([]byte{byte('a' + p)}, bodyBytes)}
			}
			res, err := q.SendBatch(ctx, msgs)
			if err == nil && len(res) != perRequest {
				err = fmt.Errorf("%d results for %d messages", len(res), perRequest)
			}
			errs[p] = err
		})
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("producer %d: %v", p, err)
		}
	}
	mustSend(t, q, client.Message{ID: "normal", Body: []byte("still serving")})

	_, err := q.Send(opContext(t), client.Message{ID: "oversize", Body: make([]byte, 2<<20)})
	if !errors.Is(err, client.ErrMessageTooLarge) {
		t.Fatalf("oversize send: %v, want ErrMessageTooLarge", err)
	}

	want := producers*perRequest + 1
	seen := map[string]bool{}
	for len(seen) < want {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1000, Wait: time.Second, Visibility: time.Minute})
		if err != nil {
			t.Fatalf("receive after %d messages: %v", len(seen), err)
		}
		if len(ds) == 0 {
			t.Fatalf("receive came back empty after %d of %d messages", len(seen), want)
		}
		var answerBytes int
		for _, d := range ds {
			answerBytes += len(d.Body)
			if d.Attempt != 1 || seen[d.ID] {
				t.Fatalf("message %s delivered at attempt %d (seen before: %v)", d.ID, d.Attempt, seen[d.ID])
			}
			seen[d.ID] = true
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack %s: %v", d.ID, err)
			}
		}
		t.Logf("one receive: %d messages, %d bytes", len(ds), answerBytes)
	}
	st := completeStats(t, opContext(t), cl, "big")
	if tot := st.Total(); tot.Dead != 0 || tot.Ready != 0 || tot.InFlight != 0 {
		t.Fatalf("after receiving everything: %+v", tot)
	}
}
