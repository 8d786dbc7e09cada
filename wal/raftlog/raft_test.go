package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/testwait"
)

// listFSM applies entries by remembering their data.
type listFSM struct {
	mu      sync.Mutex
	applied [][]byte
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, append([]byte(nil), l.Data...))
	return nil
}

func (f *listFSM) items() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.applied...)
}

func (f *listFSM) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &listSnapshot{items: append([][]byte(nil), f.applied...)}, nil
}

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	var items [][]byte
	if len(b) > 0 {
		items = bytes.Split(b, []byte{'\n'})
	}
	f.mu.Lock()
	f.applied = items
	f.mu.Unlock()
	return nil
}

type listSnapshot struct{ items [][]byte }

func (s *listSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(bytes.Join(s.items, []byte{'\n'})); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *listSnapshot) Release() {}

// raftNode is one member of the test cluster. The stable and snapshot
// stores survive a restart; the log store is closed and reopened.
type raftNode struct {
	id     raft.ServerID
	cfg    Config
	store  *Store
	log    *GroupLog
	stable *raft.InmemStore
	snaps  *raft.InmemSnapshotStore
	fsm    *listFSM
	trans  *raft.InmemTransport
	r      *raft.Raft
}

func (n *raftNode) start(t *testing.T) {
	t.Helper()
	var err error
	n.store, _, err = Open(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.log = mustGroup(t, n.store, "q/raft/0")
	_, n.trans = raft.NewInmemTransport(raft.ServerAddress(n.id))
	n.fsm = &listFSM{}
	rc := raft.DefaultConfig()
	rc.LocalID = n.id
	rc.HeartbeatTimeout = 100 * time.Millisecond
	rc.ElectionTimeout = 100 * time.Millisecond
	rc.LeaderLeaseTimeout = 50 * time.Millisecond
	rc.CommitTimeout = 5 * time.Millisecond
	rc.SnapshotThreshold = 64
	rc.SnapshotInterval = 100 * time.Millisecond
	rc.TrailingLogs = 32
	rc.Logger = hclog.NewNullLogger()
	n.r, err = raft.NewRaft(rc, n.fsm, n.log, n.stable, n.snaps, n.trans)
	if err != nil {
		t.Fatal(err)
	}
}

func (n *raftNode) stop(t *testing.T) {
	t.Helper()
	if err := n.r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	_ = n.trans.Close()
	if err := n.store.Close(); err != nil {
		t.Fatal(err)
	}
}

// connectAll wires every transport to every other.
func connectAll(nodes []*raftNode) {
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.trans.Connect(raft.ServerAddress(b.id), b.trans)
			}
		}
	}
}

// applyAll applies entries first..last through whichever node leads.
func applyAll(t *testing.T, nodes []*raftNode, first, last int) {
	t.Helper()
	for i := first; i <= last; i++ {
		testwait.UntilNil(t, 20*time.Second, fmt.Sprintf("entry %d applied", i), func() error {
			var leader *raftNode
			for _, n := range nodes {
				if n.r != nil && n.r.State() == raft.Leader {
					leader = n
				}
			}
			if leader == nil {
				return errors.New("no leader")
			}
			return leader.r.Apply([]byte(fmt.Sprintf("cmd-%04d", i)), 5*time.Second).Error()
		})
	}
}

// TestRaftlog_RaftClusterOnStores runs a three-node raft cluster whose log
// stores are GroupLogs on separate Stores, with snapshots compacting the
// logs; kills and reopens a follower's store; and checks that every node
// applied the same commands and that the logs agree where they overlap.
func TestRaftlog_RaftClusterOnStores(t *testing.T) {
	var nodes []*raftNode
	var servers []raft.Server
	for i := 0; i < 3; i++ {
		cfg := testConfig(t.TempDir())
		n := &raftNode{id: raft.ServerID(fmt.Sprintf("n%d", i)), cfg: cfg,
			stable: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		nodes = append(nodes, n)
		servers = append(servers, raft.Server{ID: n.id, Address: raft.ServerAddress(n.id)})
	}
	for _, n := range nodes {
		n.start(t)
	}
	connectAll(nodes)
	if err := nodes[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, n := range nodes {
			if n.r != nil {
				n.stop(t)
			}
		}
	}()
	applyAll(t, nodes, 1, 200)

	// Stop a follower, write on, restart it on its reopened store.
	var victim *raftNode
	for _, n := range nodes {
		if n.r.State() != raft.Leader {
			victim = n
		}
	}
	victim.stop(t)
	victim.r = nil
	applyAll(t, nodes, 201, 300)
	victim.start(t)
	connectAll(nodes)
	applyAll(t, nodes, 301, 350)

	for _, n := range nodes {
		testwait.Until(t, waitTimeout, fmt.Sprintf("%s to apply 350 commands", n.id), func() bool { return n.fsm.count() >= 350 })
	}
	want := nodes[0].fsm.items()[:350]
	for _, n := range nodes[1:] {
		got := n.fsm.items()
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%s applied %q at %d, %s applied %q", n.id, got[i], i, nodes[0].id, want[i])
			}
		}
	}
	// A node restored from a snapshot may hold an empty log; a few more
	// entries give every log a common tail.
	applyAll(t, nodes, 351, 360)
	for _, n := range nodes {
		testwait.Until(t, waitTimeout, fmt.Sprintf("%s to apply 360 commands", n.id), func() bool { return n.fsm.count() >= 360 })
	}
	checkLogsAgree(t, nodes)
}

// checkLogsAgree compares the entries every node holds at the same index.
func checkLogsAgree(t *testing.T, nodes []*raftNode) {
	t.Helper()
	var lo, hi uint64 = 0, ^uint64(0)
	for _, n := range nodes {
		first, _ := n.log.FirstIndex()
		last, _ := n.log.LastIndex()
		t.Logf("%s holds %d..%d", n.id, first, last)
		lo, hi = max(lo, first), min(hi, last)
	}
	if lo == 0 || lo > hi {
		t.Fatalf("logs do not overlap: %d..%d", lo, hi)
	}
	for idx := lo; idx <= hi; idx++ {
		var ref raft.Log
		if err := nodes[0].log.GetLog(idx, &ref); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes[1:] {
			var l raft.Log
			if err := n.log.GetLog(idx, &l); err != nil {
				t.Fatalf("%s GetLog(%d): %v", n.id, idx, err)
			}
			if l.Term != ref.Term || l.Type != ref.Type || !bytes.Equal(l.Data, ref.Data) {
				t.Fatalf("%s entry %d differs from %s's", n.id, idx, nodes[0].id)
			}
		}
	}
	t.Logf("logs agree on %d..%d", lo, hi)
}
