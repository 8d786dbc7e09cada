package partition

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// receiveEntries counts the receive commands in the leader's raft log.
func receiveEntries(t *testing.T, p *Partition) int {
	t.Helper()
	first, _ := p.logs.FirstIndex()
	last, _ := p.logs.LastIndex()
	n := 0
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := p.logs.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
			continue
		}
		c, err := fsm.DecodeCommand(l.Data)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if c.Type == fsm.CmdReceive {
			n++
		}
	}
	return n
}

// waitReceives polls until n receives wait on p.
func waitReceives(t *testing.T, p *Partition, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); p.ReceivesWaiting() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d receives waiting, want %d", p.ReceivesWaiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pollers starts n long polls of at most one message each on p and
// returns a function that waits for them and returns what they leased.
func pollers(t *testing.T, p *Partition, n int, wait time.Duration) func() []fsm.Delivery {
	var mu sync.Mutex
	var got []fsm.Delivery
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: fmt.Sprintf("c%d", i), Max: 1, Visibility: time.Minute}, wait)
			if err != nil {
				t.Errorf("poller %d: %v", i, err)
			}
			mu.Lock()
			got = append(got, ds...)
			mu.Unlock()
		}()
	}
	return func() []fsm.Delivery {
		wg.Wait()
		return got
	}
}

// Many consumers long-polling one partition: a message that becomes
// eligible draws one receive entry, not one from every waiting poll (32
// entries per message before the leader budgeted its waiting receives).
func TestPartition_WaitingReceivesProposeOnlyForLeasableMessages(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	const polls, messages = 32, 4
	done := pollers(t, p, polls, 3*time.Second)
	waitReceives(t, p, polls)
	before := receiveEntries(t, p)
	for i := range messages {
		send(t, p, fmt.Sprintf("m%d", i), 1)
		waitReceives(t, p, int64(polls-i-1)) // one poll leased it and left
	}
	if n := receiveEntries(t, p) - before; n != messages {
		t.Fatalf("%d receive entries for %d messages with %d polls waiting, want one each", n, messages, polls)
	}
	if got := done(); len(got) != messages {
		t.Fatalf("%d deliveries, want %d", len(got), messages)
	}
}

// At max_in_flight, every ack frees one lease: the waiting polls propose
// one receive for it, not one each, and none leases past the bound.
func TestPartition_WaitingReceivesAtMaxInFlightProposeOnePerFreedLease(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Queue.MaxInFlight = 2 })
	p := c.reps[c.leader()]
	send(t, p, "m", 10)
	first, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "first", Max: 2, Visibility: time.Minute}, 0)
	if err != nil || len(first) != 2 {
		t.Fatalf("first receive: %d deliveries, %v", len(first), err)
	}
	const polls = 16
	done := pollers(t, p, polls, 3*time.Second)
	waitReceives(t, p, polls)
	before := receiveEntries(t, p)
	for i, d := range first {
		res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdAck, Ack: &fsm.AckCmd{Receipts: []fsm.Receipt{d.Receipt}}})
		if err != nil || res.Err != nil {
			t.Fatalf("ack %d: %v %v", i, err, res.Err)
		}
		waitReceives(t, p, int64(polls-i-1))
	}
	if n := receiveEntries(t, p) - before; n != len(first) {
		t.Fatalf("%d receive entries for %d freed leases with %d polls waiting, want one each", n, len(first), polls)
	}
	if st := p.Stats(); st.InFlight != 2 {
		t.Fatalf("%d in flight, want the bound (2)", st.InFlight)
	}
	if got := done(); len(got) != len(first) {
		t.Fatalf("%d deliveries, want %d", len(got), len(first))
	}
}

// Under a delivery rate bound the waiting polls are served at the rate,
// one receive entry each: none proposes a receive the bound would leave
// empty when the bound's wait ends for all of them at once.
func TestPartition_WaitingReceivesUnderARateBoundProposeOnePerDelivery(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Queue.MaxDeliveryRate = 10 })
	p := c.reps[c.leader()]
	const polls = 16
	done := pollers(t, p, polls, 5*time.Second)
	waitReceives(t, p, polls)
	before := receiveEntries(t, p)
	send(t, p, "m", 2*polls) // a burst of 10, then one every 100 ms
	got := done()
	if len(got) != polls {
		t.Fatalf("%d deliveries, want one per poll (%d)", len(got), polls)
	}
	if n := receiveEntries(t, p) - before; n != polls {
		t.Fatalf("%d receive entries for %d deliveries under the rate bound, want one each", n, polls)
	}
}
