package partition

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
)

// With less free space than the reserve, the leader refuses sends with
// ErrDiskFull and changes nothing, while receives and acks go on; once
// space returns, sends succeed again.
func TestPartition_FullDiskRefusesSendsButServesConsumers(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.DiskReserveBytes = 1 << 20 })
	p := c.reps[c.leader()]
	send(t, p, "before", 2)
	var free atomic.Uint64
	free.Store(10 << 20)
	p.disk.mu.Lock()
	p.disk.free = func(string) (uint64, error) { return free.Load(), nil }
	p.disk.checkedAt = time.Time{}
	p.disk.mu.Unlock()
	send(t, p, "roomy", 1)

	free.Store(512 << 10)
	testwait.Until(t, 10*time.Second, "the disk guard to see the full disk", func() bool {
		_, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "full", Body: []byte("x")}})
		return errors.Is(err, ErrDiskFull)
	})
	if st := p.Stats(); st.Ready != 3 {
		t.Fatalf("%d ready after refused sends, want 3", st.Ready)
	}
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 3}, 0)
	if err != nil || len(ds) != 3 {
		t.Fatalf("receive on a full disk: %v, %d messages", err, len(ds))
	}
	errs, err := p.Ack(ctxT(t), []fsm.Receipt{ds[0].Receipt, ds[1].Receipt})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ack on a full disk: %v %v", err, errs)
	}
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: []fsm.RejectItem{{Receipt: ds[2].Receipt}}}})
	if err != nil || res.Settled[0] != nil {
		t.Fatalf("reject on a full disk: %v %v", err, res.Settled)
	}
	// A redrive writes no body (the new message takes the dead letter's
	// stored payload over), so like an ack it goes through on a full disk.
	res, err = p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdRedrive, Redrive: &fsm.DeadFilter{}})
	if err != nil || res.Count != 1 {
		t.Fatalf("redrive on a full disk: %v, %d redriven", err, res.Count)
	}
	ds, err = p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1}, 0)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "body roomy" {
		t.Fatalf("receive of the redriven message: %v %+v", err, ds)
	}

	free.Store(10 << 20)
	testwait.Until(t, 10*time.Second, "sends to work again once space returns", func() bool {
		out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "after", Body: []byte("x")}})
		return err == nil && out[0].Err == nil
	})
}
