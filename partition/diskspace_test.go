package partition

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
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
	// setFree changes the free space and makes the guard read it at once.
	setFree := func(n uint64) {
		p.disk.mu.Lock()
		free.Store(n)
		p.disk.checkedAt = time.Time{}
		p.disk.mu.Unlock()
	}
	send(t, p, "roomy", 1)

	free.Store(512 << 10)
	eventually(t, 10*time.Second, "the disk guard to see the full disk", func() bool {
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
	errs, err := p.Ack(ctxT(t), []fsm.Receipt{ds[0].Receipt, ds[1].Receipt, ds[2].Receipt})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ack on a full disk: %v %v", err, errs)
	}
	// A redrive copies bodies: it waits for space too.
	if _, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdRedrive, Redrive: &fsm.DeadFilter{}}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("redrive on a full disk: %v", err)
	}

	free.Store(10 << 20)
	eventually(t, 10*time.Second, "sends to work again once space returns", func() bool {
		out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "after", Body: []byte("x")}})
		return err == nil && out[0].Err == nil
	})

	// A redrive needs room for the bodies it copies, beyond the reserve.
	ds, err = p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1}, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: []fsm.RejectItem{{Receipt: ds[0].Receipt}}}})
	if err != nil || res.Settled[0] != nil {
		t.Fatalf("reject: %v %v", err, res.Settled)
	}
	setFree(1<<20 + 1)
	eventually(t, 10*time.Second, "a redrive without room to be refused", func() bool {
		_, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdRedrive, Redrive: &fsm.DeadFilter{}})
		return errors.Is(err, ErrDiskFull)
	})
	if st := p.Stats(); st.Dead != 1 {
		t.Fatalf("a refused redrive changed the dead letters: %+v", st)
	}
	free.Store(10 << 20)
	eventually(t, 10*time.Second, "the redrive to go through with room", func() bool {
		res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdRedrive, Redrive: &fsm.DeadFilter{}})
		return err == nil && res.Count == 1
	})
}
