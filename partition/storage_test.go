package partition

import (
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
)

// storageConfig snapshots and compacts often, so that tests cross several
// snapshots and log compactions quickly.
func storageConfig(cfg *Config) {
	cfg.SnapshotThreshold, cfg.TrailingLogs = 32, 16
	cfg.SnapshotInterval = 50 * time.Millisecond
	cfg.CompactInterval = 50 * time.Millisecond
}

// churn sends, receives and acks n messages one at a time on p, so that
// the log moves on with nothing of it kept alive.
func churn(t *testing.T, p *Partition, n int) {
	t.Helper()
	for i := range n {
		send(t, p, fmt.Sprintf("churn%d", i), 1)
		ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1}, 0)
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive %d: %v %d", i, err, len(ds))
		}
		if errs, err := p.Ack(ctxT(t), []fsm.Receipt{ds[0].Receipt}); err != nil || errs[0] != nil {
			t.Fatalf("ack %d: %v %v", i, err, errs)
		}
	}
}

// receiveAll leases every ready message of p and returns id -> body.
func receiveAll(t *testing.T, p *Partition) map[string]string {
	t.Helper()
	got := map[string]string{}
	for {
		ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 100, Visibility: time.Hour}, 0)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(ds) == 0 {
			return got
		}
		for _, d := range ds {
			got[d.ID] = string(d.Body)
		}
	}
}

// Payloads stay in the raft entries that carried them: no replica writes a
// body record for an ordinary send, across snapshots, log compactions and
// a restart of every replica, and every body reads back as sent.
func TestPartition_BodiesAreWrittenOnceAndRestartsRewriteNothing(t *testing.T) {
	c := newTestCluster(t, 3, storageConfig)
	p := c.reps[c.leader()]
	want := map[string]string{}
	for i := range 200 {
		id := fmt.Sprintf("m%d", i)
		want[id] = fmt.Sprintf("body of message %d", i)
		out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: id, Body: []byte(want[id])}})
		if err != nil || out[0].Err != nil {
			t.Fatalf("send %s: %v %+v", id, err, out)
		}
	}
	c.converged()
	for i, r := range c.reps {
		if err := r.raft.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on replica %d: %v", i, err)
		}
		if n := r.body.Stats().RecordsAppended; n != 0 {
			t.Fatalf("replica %d wrote %d body records for plain sends", i, n)
		}
	}
	for i := range c.reps {
		c.stop(i)
	}
	for i := range c.reps {
		c.start(i)
	}
	p = c.reps[c.leader()]
	c.converged()
	for i, r := range c.reps {
		if n := r.body.Stats().RecordsAppended; n != 0 {
			t.Fatalf("replica %d wrote %d body records while restarting", i, n)
		}
	}
	got := receiveAll(t, p)
	if len(got) != len(want) {
		t.Fatalf("received %d messages after the restart, want %d", len(got), len(want))
	}
	for id, body := range want {
		if got[id] != body {
			t.Fatalf("message %s: body %q, want %q", id, got[id], body)
		}
	}
}

// One message that waits while many others come and go does not keep the
// whole log: its payload is moved out of its old entry into a body record,
// the log's first index moves past that entry, and the body survives a
// restart.
func TestPartition_LongWaitingMessageDoesNotPinTheLog(t *testing.T) {
	c := newTestCluster(t, 1, storageConfig)
	p := c.reps[c.leader()]
	send(t, p, "patient", 1)
	keptAt := p.Status().AppliedIndex
	held, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "slow", Max: 1, Visibility: time.Hour}, 0)
	if err != nil || len(held) != 1 {
		t.Fatalf("receive the patient message: %v %d", err, len(held))
	}
	churn(t, p, 150)
	testwait.Until(t, 10*time.Second, "the log to let the old entry go", func() bool {
		// A new entry gives raft something new to snapshot, and the new
		// snapshot releases the floor the previous one held.
		if _, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdTick}); err != nil {
			t.Fatalf("tick: %v", err)
		}
		_ = p.raft.Snapshot().Error()
		first, _ := p.logs.FirstIndex()
		return first > keptAt
	})
	if p.body.Stats().RecordsAppended == 0 {
		t.Fatal("the log moved on but no payload was copied out")
	}
	c.stop(0)
	c.start(0)
	p = c.reps[c.leader()]
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdNack, Nack: &fsm.NackCmd{Items: []fsm.NackItem{
		{Receipt: held[0].Receipt, ExplicitDelay: true}}}})
	if err != nil || res.Err != nil || res.Settled[0] != nil {
		t.Fatalf("nack after the restart: %v %v %v", err, res.Err, res.Settled)
	}
	got := receiveAll(t, p)
	if len(got) != 1 || got["patient-0"] != "body patient" {
		t.Fatalf("after the restart received %v", got)
	}
}

// A replica snapshots once the log data applied since its last snapshot
// outgrows the bytes trigger, whatever raft's entry count says, so a
// restart never replays more than about that much log.
func TestPartition_SnapshotsBySizeOfAppliedData(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Queue.MaxMessageBytes = 1 << 20
		cfg.SnapshotThreshold, cfg.SnapshotInterval = 1_000_000, time.Hour
	})
	p := c.reps[c.leader()]
	body := make([]byte, 1000<<10)
	for i := range snapshotBytesMin/len(body) + 8 {
		out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: fmt.Sprintf("big%d", i), Body: body}})
		if err != nil || out[0].Err != nil {
			t.Fatalf("send %d: %v %+v", i, err, out)
		}
	}
	testwait.Until(t, 20*time.Second, "a snapshot taken by size", func() bool {
		return p.snaps.snapshotBytes.Load() > 0
	})
	if left := p.snaps.appliedBytes.Load(); left >= snapshotBytesMin {
		t.Fatalf("%d bytes applied since the snapshot", left)
	}
}
