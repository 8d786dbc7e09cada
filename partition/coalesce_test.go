package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ferrymq/ferry/fsm"
)

// TestPartition_ConcurrentSendsAreMergedAndAnsweredPerRequest sends from
// many goroutines at once: every request gets exactly its own outcomes, and
// the raft log grows by fewer entries than there were requests.
func TestPartition_ConcurrentSendsAreMergedAndAnsweredPerRequest(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.reps[c.leader()]
	before := p.Status().AppliedIndex
	const senders, perSender = 32, 10
	var wg sync.WaitGroup
	seqs := make([][]uint64, senders)
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				msgs := []fsm.NewMessage{{ID: fmt.Sprintf("w%d-%d-a", w, i), Body: []byte("a")}, {ID: fmt.Sprintf("w%d-%d-b", w, i), Body: []byte("b")}}
				out, err := p.Send(ctxT(t), msgs)
				if err != nil || len(out) != 2 || out[0].Err != nil || out[1].Seq != out[0].Seq+1 {
					t.Errorf("send: %v %+v", err, out)
					return
				}
				seqs[w] = append(seqs[w], out[0].Seq, out[1].Seq)
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, ss := range seqs {
		for _, s := range ss {
			if seen[s] {
				t.Fatalf("seq %d answered twice", s)
			}
			seen[s] = true
		}
	}
	if len(seen) != senders*perSender*2 {
		t.Fatalf("%d distinct seqs, want %d", len(seen), senders*perSender*2)
	}
	entries := p.Status().AppliedIndex - before
	if entries >= senders*perSender {
		t.Fatalf("%d requests took %d raft entries: nothing was merged", senders*perSender, entries)
	}
	t.Logf("%d send requests in %d raft entries", senders*perSender, entries)
	// Oversized and empty batches are refused whole, without a proposal.
	if _, err := p.Send(ctxT(t), nil); !errors.Is(err, fsm.ErrInvalidArgument) {
		t.Fatalf("empty send: %v", err)
	}
}

func TestPartition_AckIsMergedAndPerReceipt(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	send(t, p, "a", 3)
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 3}, 0)
	if err != nil || len(ds) != 3 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	errs, err := p.Ack(ctxT(t), []fsm.Receipt{ds[0].Receipt, {Seq: 99, Attempt: 1}, ds[2].Receipt})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], fsm.ErrNotFound) || errs[2] != nil {
		t.Fatalf("ack: %v %v", err, errs)
	}
	// A request whose context is over while queued is dropped, not applied.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Ack(ctx, []fsm.Receipt{ds[1].Receipt}); err != nil && !errors.Is(err, ErrTimeout) {
		t.Fatalf("cancelled ack: %v", err)
	}
}
