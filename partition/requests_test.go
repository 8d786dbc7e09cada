package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// lastLogIndex is the index of the last entry in p's raft log.
func lastLogIndex(t *testing.T, p *Partition) string {
	t.Helper()
	idx, ok := p.RaftStats()["last_log_index"]
	if !ok {
		t.Fatal("raft stats carry no last_log_index")
	}
	return idx
}

// refusedUnproposed fails t unless err wraps fsm.ErrInvalidArgument and
// p's raft log still ends at before.
func refusedUnproposed(t *testing.T, p *Partition, what, before string, err error) {
	t.Helper()
	if !errors.Is(err, fsm.ErrInvalidArgument) {
		t.Fatalf("%s: %v, want invalid argument", what, err)
	}
	if after := lastLogIndex(t, p); after != before {
		t.Fatalf("%s was proposed: the raft log went from %s to %s", what, before, after)
	}
}

// leaseAll sends n messages and leases them all, returning the receipts.
func leaseAll(t *testing.T, p *Partition, prefix string, n int) []fsm.Receipt {
	t.Helper()
	send(t, p, prefix, n)
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: n}, 0)
	if err != nil || len(ds) != n {
		t.Fatalf("receive: %v, %d deliveries", err, len(ds))
	}
	out := make([]fsm.Receipt, n)
	for i, d := range ds {
		out[i] = d.Receipt
	}
	return out
}

// Extend, Nack and Reject apply their valid items in one entry and answer
// the invalid ones without proposing them; a request with nothing valid,
// or a batch out of range, never reaches the raft log.
func TestPartition_SettleRequestsValidateBeforeProposing(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	rs := leaseAll(t, p, "m", 3)

	before := lastLogIndex(t, p)
	errs, err := p.Extend(ctxT(t), []fsm.ExtendItem{{Receipt: rs[0], Visibility: time.Hour}, {Receipt: rs[1]}})
	if err != nil || len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], fsm.ErrInvalidArgument) {
		t.Fatalf("extend: %v %v", err, errs)
	}
	if after := lastLogIndex(t, p); after == before {
		t.Fatal("the valid extend was not proposed")
	}
	before = lastLogIndex(t, p)
	errs, err = p.Extend(ctxT(t), []fsm.ExtendItem{{Receipt: rs[1], Visibility: fsm.VisibilityTimeoutMax + 1}})
	if err == nil && len(errs) == 1 {
		err = errs[0]
	}
	refusedUnproposed(t, p, "an extend past the longest lease", before, err)
	_, err = p.Extend(ctxT(t), nil)
	refusedUnproposed(t, p, "an empty extend", before, err)

	errs, err = p.Nack(ctxT(t), []fsm.NackItem{{Receipt: rs[1], Release: true, ExplicitDelay: true}})
	if err == nil && len(errs) == 1 {
		err = errs[0]
	}
	refusedUnproposed(t, p, "a release with a delay", before, err)
	errs, err = p.Nack(ctxT(t), []fsm.NackItem{{Receipt: rs[1], Release: true}})
	if err != nil || errs[0] != nil {
		t.Fatalf("release: %v %v", err, errs)
	}
	if st := p.Stats(); st.Ready != 1 || st.InFlight != 2 {
		t.Fatalf("after the release: %d ready, %d in flight; want 1, 2", st.Ready, st.InFlight)
	}

	before = lastLogIndex(t, p)
	_, err = p.Reject(ctxT(t), make([]fsm.RejectItem, fsm.BatchMax+1))
	refusedUnproposed(t, p, "a reject batch over BatchMax", before, err)
	errs, err = p.Reject(ctxT(t), []fsm.RejectItem{{Receipt: rs[2], Reason: "bad"}})
	if err != nil || errs[0] != nil {
		t.Fatalf("reject: %v %v", err, errs)
	}
	if st := p.Stats(); st.Dead != 1 {
		t.Fatalf("after the reject: %d dead letters, want 1", st.Dead)
	}
}

// RedriveDead and DeleteDead refuse a filter the FSM would refuse without
// proposing it, and apply a valid one; Purge empties the ready messages.
func TestPartition_DeadRequestsAndPurge(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	rs := leaseAll(t, p, "d", 2)
	if errs, err := p.Reject(ctxT(t), []fsm.RejectItem{{Receipt: rs[0]}, {Receipt: rs[1]}}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("reject: %v %v", err, errs)
	}

	before := lastLogIndex(t, p)
	_, err := p.RedriveDead(ctxT(t), fsm.DeadFilter{Limit: fsm.DeadListMax + 1})
	refusedUnproposed(t, p, "a redrive over DeadListMax", before, err)
	_, err = p.DeleteDead(ctxT(t), fsm.DeadFilter{FromAt: 2, ToAt: 1})
	refusedUnproposed(t, p, "a deletion of a backwards time range", before, err)

	n, err := p.RedriveDead(ctxT(t), fsm.DeadFilter{Seqs: []uint64{rs[0].Seq}})
	if err != nil || n != 1 {
		t.Fatalf("redrive: %d, %v", n, err)
	}
	n, err = p.DeleteDead(ctxT(t), fsm.DeadFilter{})
	if err != nil || n != 1 {
		t.Fatalf("delete dead: %d, %v", n, err)
	}
	send(t, p, "more", 2)
	n, err = p.Purge(ctxT(t), false)
	if err != nil || n != 3 {
		t.Fatalf("purge: %d, %v (want 3: the redriven message and two more)", n, err)
	}
	if st := p.Stats(); st.Ready != 0 || st.Dead != 0 {
		t.Fatalf("after the purge: %d ready, %d dead", st.Ready, st.Dead)
	}
}

// A receive the FSM would refuse is refused before it is proposed, even
// with messages to lease and acks to apply.
func TestPartition_InvalidReceiveNeverProposed(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	rs := leaseAll(t, p, "r", 1)
	send(t, p, "ready", 1)
	before := lastLogIndex(t, p)
	_, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: fsm.ReceiveMax + 1}, 0)
	refusedUnproposed(t, p, "a receive over ReceiveMax", before, err)
	_, _, err = p.ReceiveAck(ctxT(t), rs, fsm.ReceiveCmd{Consumer: "c", Max: 1, Visibility: -time.Second}, 0)
	refusedUnproposed(t, p, "a receive-ack with a negative lease", before, err)
	if st := p.Stats(); st.InFlight != 1 || st.Ready != 1 {
		t.Fatalf("refused receives changed the state: %+v", st)
	}
}
