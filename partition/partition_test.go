package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/syncbuf"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/hashicorp/raft"
)

func TestPartition_ReplicatesAndConverges(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	seqs := send(t, c.reps[l], "a", 10)
	if seqs[0] != 1 || seqs[9] != 10 {
		t.Fatalf("seqs %v", seqs)
	}
	c.converged()
	for i, p := range c.reps {
		if st := p.Stats(); st.Ready != 10 {
			t.Fatalf("replica %d: %d ready", i, st.Ready)
		}
	}
	follower := (l + 1) % 3
	_, err := c.reps[follower].Propose(ctxT(t), fsm.Command{Type: fsm.CmdTick})
	var nl *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderID != string(c.peers[l].ID) {
		t.Fatalf("follower propose: %v", err)
	}
}

func TestPartition_LeaderExpiresLeasesWithoutClients(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.reps[c.leader()]
	send(t, p, "a", 1)
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1, Visibility: 50 * time.Millisecond}, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	testwait.Until(t, 10*time.Second, "the lease to expire", func() bool { return p.Stats().Counters.Expired == 1 })
	c.converged()
}

func TestPartition_LongPollWakesOnSend(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.reps[c.leader()]
	got := make(chan []fsm.Delivery, 1)
	go func() {
		ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 5}, ReceiveWaitMax)
		if err != nil {
			t.Errorf("receive: %v", err)
		}
		got <- ds
	}()
	start := time.Now()
	send(t, p, "late", 1)
	ds := <-got
	if len(ds) != 1 || ds[0].ID != "late-0" || string(ds[0].Body) != "body late" {
		t.Fatalf("long poll got %+v", ds)
	}
	if waited := time.Since(start); waited >= ReceiveWaitMax {
		t.Fatalf("long poll was not woken by the send (waited %v)", waited)
	}
	// A poll with nothing to receive returns empty at the end of its wait.
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 5}, 20*time.Millisecond)
	if err != nil || len(ds) != 0 {
		t.Fatalf("empty poll: %v %v", ds, err)
	}
}

func TestPartition_DelayedMessageBecomesReceivable(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	msg := fsm.NewMessage{ID: "d", Body: []byte("x"), Delay: 100 * time.Millisecond}
	if _, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdSend, Send: &fsm.SendCmd{Messages: []fsm.NewMessage{msg}}}); err != nil {
		t.Fatal(err)
	}
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1}, 10*time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive after delay: %v %v", ds, err)
	}
}

// TestPartition_LeaderLossKeepsConfirmedMessages stops the leader while
// producers send; every confirmed message must be on the new leader.
func TestPartition_LeaderLossKeepsConfirmedMessages(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	var mu sync.Mutex
	confirmed := map[string]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopWriters := sync.OnceFunc(func() { close(stop) })
	// Registered after the cluster's cleanup, so it runs first: a failure
	// below never leaves the writers spinning on closed replicas.
	t.Cleanup(func() { stopWriters(); wg.Wait() })
	reps := slices.Clone(c.reps) // a stopped replica answers ErrClosed
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				for _, p := range reps {
					res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdSend, Send: &fsm.SendCmd{Messages: []fsm.NewMessage{{ID: id, Body: []byte(id)}}}})
					if err == nil && res.Sent[0].Err == nil {
						mu.Lock()
						confirmed[id] = true
						mu.Unlock()
						break
					}
				}
			}
		}()
	}
	testwait.Until(t, 10*time.Second, "some confirmed sends", func() bool { mu.Lock(); defer mu.Unlock(); return len(confirmed) > 50 })
	c.stop(l)
	nl := c.leader()
	send(t, c.reps[nl], "after", 1)
	stopWriters()
	wg.Wait()
	c.converged()
	present := map[string]bool{}
	for {
		ds, err := c.reps[nl].Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "check", Max: 1000}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			present[d.ID] = true
		}
	}
	for id := range confirmed {
		if !present[id] {
			t.Fatalf("confirmed message %s lost after leader change (%d confirmed)", id, len(confirmed))
		}
	}
}

func TestPartition_RestartedReplicaCatchesUpFromLog(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	send(t, c.reps[l], "a", 5)
	follower := (l + 1) % 3
	c.stop(follower)
	send(t, c.reps[c.leader()], "b", 5)
	c.start(follower)
	c.converged()
	if st := c.reps[follower].Stats(); st.Ready != 10 {
		t.Fatalf("restarted replica has %d ready", st.Ready)
	}
}

func TestPartition_WipedReplicaIsRebuiltBySnapshot(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 32, 8, 50*time.Millisecond
	})
	l := c.leader()
	follower := (l + 1) % 3
	c.stop(follower)
	for i := range 40 {
		send(t, c.reps[c.leader()], fmt.Sprintf("batch%d", i), 5)
	}
	if err := os.RemoveAll(c.dirs[follower]); err != nil {
		t.Fatal(err)
	}
	c.start(follower)
	c.converged()
	if st := c.reps[follower].Stats(); st.Ready != 200 {
		t.Fatalf("rebuilt replica has %d ready", st.Ready)
	}
	dead, _, err := c.reps[follower].PeekDead(fsm.DeadFilter{}, 0)
	if err != nil || len(dead) != 0 {
		t.Fatalf("dead letters %v %v", dead, err)
	}
}

func TestPartition_ConfigValidateNamesTheField(t *testing.T) {
	cfg := DefaultConfig("g", "n", t.TempDir())
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("missing transport accepted: %v", err)
	}
	_, cfg.Transport = raft.NewInmemTransportWithTimeout("a", time.Second)
	for _, gw := range []time.Duration{-time.Microsecond, GatherWaitMax + 1} {
		cfg.GatherWait = gw
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.GatherWait") {
			t.Errorf("GatherWait %v: %v", gw, err)
		}
	}
	cfg.GatherWait = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("GatherWait 0 (no waiting): %v", err)
	}
}

func TestPartition_NotLeaderErrorNamesWhatIsKnown(t *testing.T) {
	cases := map[string]*NotLeaderError{
		"not the partition leader (no leader known)":            {},
		"not the partition leader (leader is n3)":               {LeaderID: "n3"},
		"not the partition leader (leader is n3 at 10.0.0.3:1)": {LeaderID: "n3", LeaderAddr: "10.0.0.3:1"},
	}
	for want, e := range cases {
		if got := e.Error(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestPartition_PeekServesOnlyOnTheLeaderAndLeasesNothing(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	p := c.reps[l]
	send(t, p, "a", 3)
	r, err := p.Peek(ctxT(t), fsm.PeekFilter{Max: 10})
	if err != nil || len(r.Messages) != 3 {
		t.Fatalf("peek: %v, %d messages", err, len(r.Messages))
	}
	if st := p.Stats(); st.InFlight != 0 || st.Ready != 3 {
		t.Fatalf("after peek: %d in flight, %d ready", st.InFlight, st.Ready)
	}
	if _, err := c.reps[(l+1)%3].Peek(ctxT(t), fsm.PeekFilter{Max: 10}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower peek: %v, want ErrNotLeader", err)
	}
}

// TestPartition_LeaderChangesAreLogged: each replica logs the leader it
// learns, at Info, with the term.
func TestPartition_LeaderChangesAreLogged(t *testing.T) {
	var out syncbuf.Buffer
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	c.leader()
	testwait.Until(t, 10*time.Second, "a leader change logged", func() bool {
		s := out.String()
		return strings.Contains(s, `msg="partition leader changed"`) && strings.Contains(s, "leader=n1 term=")
	})
}
