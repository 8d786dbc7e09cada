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

// TestCluster_LeaderLoss stops the leader of a one-partition queue while
// eight producers send to it, twice (the first stopped node comes back and
// catches up before the second leader goes), then drains the queue: every
// message whose send was confirmed is there exactly once, with the
// sequence number its confirm reported. A lease taken before the first
// failover is still held, and can be acked, after the second.
func TestCluster_LeaderLoss(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("failover")
	c.createQueue(cl, "ha")
	q := cl.Queue("ha")
	p := startProducers(t, q, 8)

	p.waitConfirmed(c, 100)
	held := receiveOne(t, q, client.ReceiveOptions{Visibility: time.Minute})
	first := c.waitLeaders("ha", 1)[0]
	t.Logf("stopping %s, leader of ha/0", c.members[first].cfg.ID)
	c.stop(first)
	second := c.waitLeaders("ha", 1)[0]
	p.waitConfirmed(c, 100)

	// The first node comes back and catches up; then the second leader goes.
	target := c.leaderIndex("ha", 0, second)
	c.start(first)
	c.waitApplied(first, "ha", 0, target)
	p.waitConfirmed(c, 50)
	t.Logf("stopping %s, leader of ha/0", c.members[second].cfg.ID)
	c.stop(second)
	c.waitLeaders("ha", 1)
	p.waitConfirmed(c, 100)
	p.stop()

	confirmed, unconfirmed := p.results()
	t.Logf("%d sends confirmed (%d of them as duplicates of an earlier attempt), %d unconfirmed",
		len(confirmed), p.duplicates, len(unconfirmed))
	got := drain(t, c, cl, "ha", 1)
	if _, ok := got[held.ID]; ok {
		t.Errorf("%s was delivered again while its lease ran", held.ID)
	}
	if err := held.Ack(opContext(t)); err != nil {
		t.Errorf("ack of the lease taken before the failovers: %v", err)
	}
	got[held.ID] = held.Seq
	checkConfirmed(t, confirmed, unconfirmed, got)
}

// checkConfirmed checks the received messages (id -> seq) against the
// sends: every confirmed one with the seq of its confirm, no two confirms
// with one seq, nothing that was never sent. It logs how many unconfirmed
// sends were stored.
func checkConfirmed(t *testing.T, confirmed map[string]uint64, unconfirmed []string, got map[string]uint64) {
	t.Helper()
	bySeq := map[uint64]string{}
	for id, seq := range confirmed {
		if other, ok := bySeq[seq]; ok {
			t.Errorf("%s and %s were both confirmed as seq %d", id, other, seq)
		}
		bySeq[seq] = id
		switch gseq, ok := got[id]; {
		case !ok:
			t.Errorf("confirmed message %s (seq %d) is missing", id, seq)
		case gseq != seq:
			t.Errorf("confirmed message %s: confirm said seq %d, delivered as seq %d", id, seq, gseq)
		}
	}
	present := 0
	for _, id := range unconfirmed {
		if _, ok := got[id]; ok {
			present++
		}
	}
	t.Logf("%d of the %d unconfirmed sends were stored", present, len(unconfirmed))
	if extra := len(got) - len(confirmed) - present; extra != 0 {
		t.Errorf("%d received messages were never sent", extra)
	}
}

// producers send messages with unique ids from several goroutines until
// stopped, recording each outcome.
type producers struct {
	t       *testing.T
	stopped chan struct{}
	wg      sync.WaitGroup

	mu          sync.Mutex
	confirmed   map[string]uint64 // id -> seq of the confirm
	duplicates  int               // confirms of a retry that found the first attempt stored
	unconfirmed []string
	changed     chan struct{} // poked after each confirm
}

// startProducers starts n producers on q.
func startProducers(t *testing.T, q *client.Queue, n int) *producers {
	p := &producers{t: t, stopped: make(chan struct{}), confirmed: map[string]uint64{}, changed: make(chan struct{}, 1)}
	for g := range n {
		p.wg.Go(func() { p.run(q, g) })
	}
	t.Cleanup(p.stop)
	return p
}

func (p *producers) run(q *client.Queue, g int) {
	for k := 0; ; k++ {
		select {
		case <-p.stopped:
			return
		default:
		}
		id := fmt.Sprintf("p%d-%05d", g, k)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		res, err := q.Send(ctx, client.Message{ID: id, Body: []byte(id)})
		cancel()
		p.mu.Lock()
		switch {
		case err == nil:
			p.confirmed[id] = res.Seq
			if res.Duplicate {
				p.duplicates++
			}
		case errors.Is(err, client.ErrUnconfirmed):
			p.unconfirmed = append(p.unconfirmed, id)
		default:
			p.t.Errorf("send %s: %v", id, err)
		}
		p.mu.Unlock()
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}

// waitConfirmed waits until n more sends have been confirmed.
func (p *producers) waitConfirmed(c *testCluster, n int) {
	p.t.Helper()
	p.mu.Lock()
	target := len(p.confirmed) + n
	p.mu.Unlock()
	testwait.UntilNil(c.t, waitLong, fmt.Sprintf("%d more confirmed sends", n), func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.confirmed) < target {
			return fmt.Errorf("%d of %d confirmed", len(p.confirmed), target)
		}
		return nil
	})
}

// stop stops the producers and waits for their last sends.
func (p *producers) stop() {
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
	p.wg.Wait()
}

// results returns the confirmed sends (id -> seq) and the unconfirmed ids.
func (p *producers) results() (map[string]uint64, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.confirmed, p.unconfirmed
}

// drain receives and acks every message of a queue until it is empty
// (but for held leases taken before) and returns the ids received with
// their seqs. A message received twice fails the test: with long leases
// and prompt acks, a second delivery means it was stored twice.
func drain(t *testing.T, c *testCluster, cl *client.Client, queue string, held int64) map[string]uint64 {
	t.Helper()
	q := cl.Queue(queue)
	got := map[string]uint64{}
	testwait.UntilNil(c.t, waitLong, "queue "+queue+" drained", func() error {
		ds, err := q.Receive(opContext(t), client.ReceiveOptions{Max: 500, Wait: 200 * time.Millisecond, Visibility: time.Minute})
		if err != nil {
			return err
		}
		for _, d := range ds {
			if seq, dup := got[d.ID]; dup {
				t.Errorf("%s delivered twice: seq %d and seq %d (attempt %d)", d.ID, seq, d.Seq, d.Attempt)
			}
			got[d.ID] = d.Seq
		}
		for i, err := range q.AckBatch(opContext(t), ds) {
			if err != nil {
				t.Errorf("ack %s: %v", ds[i].ID, err)
			}
		}
		if len(ds) > 0 {
			return errors.New("more to receive")
		}
		if st := stats(t, cl, queue); st.Ready+st.Delayed != 0 || st.InFlight != held {
			return fmt.Errorf("%d ready, %d delayed, %d in flight", st.Ready, st.Delayed, st.InFlight)
		}
		return nil
	})
	return got
}
