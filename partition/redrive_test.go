package partition

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
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
	eventually(t, 10*time.Second, "a follower with a full body disk to lead and deliver the redriven message", func() bool {
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
