package partition

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tmpfs"
	"github.com/ferrymq/ferry/wal"
)

// A redrive writes no body on any replica: with the body records of both
// followers on file systems that are full, the redrive applies everywhere,
// the followers keep running, and once one of them leads it delivers the
// redriven message with its body.
func TestPartition_RedriveOnFollowersWithFullBodyDisks(t *testing.T) {
	walDirs := map[string]string{} // replica id -> its tmpfs for body records
	c := newTestCluster(t, 3, func(cfg *Config) {
		if _, ok := walDirs[cfg.NodeID]; ok {
			return
		}
		walDirs[cfg.NodeID] = tmpfs.Mount(t, "1m")
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(walDirs[cfg.NodeID], filepath.Join(cfg.Dir, "wal")); err != nil {
			t.Fatal(err)
		}
	})
	first := c.leader()
	p := c.reps[first]
	body := bytes.Repeat([]byte("redriven body "), 256<<10/14)
	if out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "dead", Body: body}}); err != nil || out[0].Err != nil {
		t.Fatalf("send: %v %+v", err, out)
	}
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1}, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: []fsm.RejectItem{{Receipt: ds[0].Receipt}}}})
	if err != nil || res.Settled[0] != nil {
		t.Fatalf("reject: %v %v", err, res.Settled)
	}
	c.converged()
	for i, rep := range c.reps {
		if i != first {
			fill(t, walDirs[rep.cfg.NodeID], 0)
		}
	}
	res, err = p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdRedrive, Redrive: &fsm.DeadFilter{}})
	if err != nil || res.Count != 1 {
		t.Fatalf("redrive: %v, %d redriven", err, res.Count)
	}
	c.converged()
	for i, rep := range c.reps {
		if st := rep.Stats(); st.Dead != 0 || st.Ready != 1 {
			t.Fatalf("replica %d after the redrive: %+v", i, st)
		}
	}
	c.stop(first)
	testwait.Until(t, 10*time.Second, "a follower with a full body disk to lead and deliver the redriven message", func() bool {
		next := c.leader()
		ds, err := c.reps[next].Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1}, 0)
		if err != nil || len(ds) == 0 {
			return false
		}
		if ds[0].ID != "dead" || !bytes.Equal(ds[0].Body, body) {
			t.Fatalf("delivered %s with a body of %d bytes, want dead with %d", ds[0].ID, len(ds[0].Body), len(body))
		}
		return true
	})
}

// Restoring a body record returns the key it was written under, which
// differs from the restored message's seq once the body was redriven; an
// entry reference is never reported by key, so its seq comes back.
func TestReplicaBodies_RetainReturnsTheRecordKey(t *testing.T) {
	w, _, err := wal.Open(wal.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := newReplicaBodies(w, nil, nil)
	loc, err := b.Append(5, []byte("payload of seq 5"))
	if err != nil {
		t.Fatal(err)
	}
	restarted := newReplicaBodies(w, nil, nil)
	key, err := restarted.Retain(9, loc)
	if err != nil || key != 5 {
		t.Fatalf("Retain(9, %v) = %d, %v; want the record's key 5", loc, key, err)
	}
	if err := restarted.finishRestore(); err != nil {
		t.Fatal(err)
	}
	if _, payload, err := restarted.Read(loc); err != nil || string(payload) != "payload of seq 5" {
		t.Fatalf("a retained record was released: %q %v", payload, err)
	}
}

// A dead letter waits while many messages come and go, so its payload is
// moved out of its old entry into a body record (keyed by its seq). It is
// then redriven (the new message takes that record over, writing nothing),
// the replica snapshots and restarts, and the redriven message is
// delivered with its body and acked.
func TestPartition_RedrivenBodyRecordSurvivesRestart(t *testing.T) {
	c := newTestCluster(t, 1, storageConfig)
	p := c.reps[c.leader()]
	send(t, p, "patient", 1)
	keptAt := p.Status().AppliedIndex
	held, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "slow", Max: 1, Visibility: time.Hour}, 0)
	if err != nil || len(held) != 1 {
		t.Fatalf("receive the patient message: %v %d", err, len(held))
	}
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: []fsm.RejectItem{{Receipt: held[0].Receipt}}}})
	if err != nil || res.Settled[0] != nil {
		t.Fatalf("reject: %v %v", err, res.Settled)
	}
	churn(t, p, 150)
	testwait.Until(t, 10*time.Second, "the dead letter's payload to move into a body record", func() bool {
		if _, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdTick}); err != nil {
			t.Fatalf("tick: %v", err)
		}
		_ = p.raft.Snapshot().Error()
		first, _ := p.logs.FirstIndex()
		return first > keptAt && p.body.Stats().RecordsAppended > 0
	})
	appended := p.body.Stats().RecordsAppended
	res, err = p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdRedrive, Redrive: &fsm.DeadFilter{}})
	if err != nil || res.Count != 1 {
		t.Fatalf("redrive: %v, %d redriven", err, res.Count)
	}
	if n := p.body.Stats().RecordsAppended; n != appended {
		t.Fatalf("the redrive wrote %d body records", n-appended)
	}
	if err := p.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	c.stop(0)
	c.start(0)
	p = c.reps[c.leader()]
	if n := p.body.Stats().RecordsAppended; n != 0 {
		t.Fatalf("the restart wrote %d body records", n)
	}
	p.mu.Lock()
	_, err = p.fsm.CompactBodies()
	p.mu.Unlock()
	if err != nil {
		t.Fatalf("compaction after the restart: %v", err)
	}
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 10}, 0)
	if err != nil || len(ds) != 1 || ds[0].ID != "patient-0" || string(ds[0].Body) != "body patient" {
		t.Fatalf("after the restart: %v %+v", err, ds)
	}
	if errs, err := p.Ack(ctxT(t), []fsm.Receipt{ds[0].Receipt}); err != nil || errs[0] != nil {
		t.Fatalf("ack of the redriven message: %v %v", err, errs)
	}
	if live := p.body.Stats().LiveBytes; live != 0 {
		t.Fatalf("%d body record bytes live after the ack", live)
	}
}
