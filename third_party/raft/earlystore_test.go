// Tests of Ferry's ReplicateBeforeStore change (see FORK.md and earlystore.go).

package raft

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// stagingStore is a LogStager over an in-memory store whose StoreLogs can
// be held (gate) or failed (fail), as a slow or broken disk would.
type stagingStore struct {
	LogStore
	mu     sync.Mutex
	staged []*Log
	gate   chan struct{} // when set, StoreLogs waits for it to close
	fail   error         // when set, StoreLogs fails with it once
	// onStore, when set, is called as StoreLogs begins.
	onStore func(logs []*Log)
}

func (s *stagingStore) StageLogs(logs []*Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staged = logs
}

func (s *stagingStore) UnstageLogs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staged = nil
}

func (s *stagingStore) GetLog(index uint64, out *Log) error {
	s.mu.Lock()
	for _, l := range s.staged {
		if l.Index == index {
			*out = *l
			s.mu.Unlock()
			return nil
		}
	}
	s.mu.Unlock()
	return s.LogStore.GetLog(index, out)
}

func (s *stagingStore) StoreLogs(logs []*Log) error {
	s.mu.Lock()
	gate, fail, onStore := s.gate, s.fail, s.onStore
	s.fail = nil
	s.mu.Unlock()
	if onStore != nil {
		onStore(logs)
	}
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return fail
	}
	return s.LogStore.StoreLogs(logs)
}

func (s *stagingStore) StoreLog(l *Log) error { return s.StoreLogs([]*Log{l}) }

func (s *stagingStore) set(gate chan struct{}, fail error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate, s.fail = gate, fail
}

func makeStagingCluster(t *testing.T) (*cluster, []*stagingStore) {
	conf := inmemConfig(t)
	conf.ReplicateBeforeStore = true
	stores := make([]*stagingStore, 3)
	c, err := makeCluster(t, &MakeClusterOpts{Peers: 3, Bootstrap: true, Conf: conf,
		WrapLogs: func(i int, logs LogStore) LogStore {
			stores[i] = &stagingStore{LogStore: logs}
			return stores[i]
		}})
	if err != nil {
		t.Fatalf("makeCluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c, stores
}

func storedLast(t *testing.T, s *stagingStore) uint64 {
	last, err := s.LogStore.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	return last
}

// The followers store an entry while the leader's own write is held, and
// the leader neither confirms nor applies it before its write returns.
func TestReplicateBeforeStore_FollowersWriteWhileTheLeaderDoes(t *testing.T) {
	c, stores := makeStagingCluster(t)
	leader := c.Leader()
	li := c.IndexOf(leader)
	if err := leader.Apply([]byte("first"), time.Second).Error(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	gate := make(chan struct{})
	stores[li].set(gate, nil)
	target := leader.LastIndex() + 1
	f := leader.Apply([]byte("second"), 5*time.Second)
	for i, s := range stores {
		if i != li {
			waitFor(t, 10*time.Second, "a follower to store the entry", func() bool { return storedLast(t, s) >= target })
		}
	}
	if got := storedLast(t, stores[li]); got >= target {
		t.Fatalf("leader stored %d while its write was held", got)
	}
	select {
	case <-f.(*logFuture).errCh:
		t.Fatal("the entry was confirmed before the leader's own write returned")
	default:
	}
	if n := len(getMockFSM(c.fsms[li]).logs); n != 1 {
		t.Fatalf("leader applied %d entries while its write was held, want 1", n)
	}
	close(gate)
	if err := f.Error(); err != nil {
		t.Fatalf("Apply after the write: %v", err)
	}
	c.WaitForReplication(2)
	c.EnsureSame(t)
}

// The leader lets its replicators run before its own write begins: on a
// single processor, where nothing else runs until the leader's main loop
// blocks, the followers hold each new entry by the time the leader starts
// writing it. Without the yield the leader's write always comes first
// (the test then fails), and with a blocking disk write the entries
// waited for the runtime to take the processor back from the system call.
func TestReplicateBeforeStore_ReplicatorsSendBeforeTheLeaderWrites(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c, stores := makeStagingCluster(t)
	leader := c.Leader()
	li := c.IndexOf(leader)
	if err := leader.Apply([]byte("first"), 5*time.Second).Error(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var mu sync.Mutex
	ahead, writes := 0, 0
	stores[li].mu.Lock()
	stores[li].onStore = func(logs []*Log) {
		last := logs[len(logs)-1].Index
		held := false
		for i, s := range stores {
			if i != li && storedLast(t, s) >= last {
				held = true
			}
		}
		mu.Lock()
		defer mu.Unlock()
		writes++
		if held {
			ahead++
		}
	}
	stores[li].mu.Unlock()
	const entries = 20
	for i := 0; i < entries; i++ {
		if err := leader.Apply([]byte("x"), 5*time.Second).Error(); err != nil {
			t.Fatalf("Apply %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if writes < entries || ahead < writes/2 {
		t.Fatalf("a follower held the entry when the leader began writing it in %d of %d writes, want at least half", ahead, writes)
	}
}

// A failed local write after the entries were sent is an unknown outcome
// (ErrLeadershipLost), the leader steps down, and the cluster goes on with
// one log.
func TestReplicateBeforeStore_FailedLocalWriteIsAnUnknownOutcome(t *testing.T) {
	c, stores := makeStagingCluster(t)
	leader := c.Leader()
	li := c.IndexOf(leader)
	broken := errors.New("disk failed")
	stores[li].set(nil, broken)
	err := leader.Apply([]byte("x"), 5*time.Second).Error()
	if !errors.Is(err, ErrLeadershipLost) || !errors.Is(err, broken) {
		t.Fatalf("Apply: %v, want ErrLeadershipLost wrapping the store's error", err)
	}
	waitFor(t, 10*time.Second, "a leader", func() bool { l := c.Leader(); return l != nil })
	if err := c.Leader().Apply([]byte("y"), 5*time.Second).Error(); err != nil {
		t.Fatalf("Apply on the next leader: %v", err)
	}
	waitFor(t, 10*time.Second, "every log to agree", func() bool {
		want := c.Leader().LastIndex()
		for _, r := range c.rafts {
			if r.getLastIndex() != want || r.getCommitIndex() != want {
				return false
			}
		}
		return true
	})
	c.EnsureSame(t)
}

// A store that cannot stage is refused up front.
func TestReplicateBeforeStore_NeedsAStager(t *testing.T) {
	conf := inmemConfig(t)
	conf.ReplicateBeforeStore = true
	conf.LocalID = "a"
	_, trans := NewInmemTransport("")
	store := NewInmemStore()
	_, err := NewRaft(conf, &MockFSM{}, store, store, NewInmemSnapshotStore(), trans)
	if err == nil {
		t.Fatal("NewRaft accepted ReplicateBeforeStore with a store that cannot stage")
	}
}

// A learner promoted while the leader writes the promoting entry may
// acknowledge that entry before the leader's commitment counts it as a
// voter. With another voter lost, the entry still commits on that answer
// without any later entry (an idle group gets none), and the next
// configuration change goes through.
func TestReplicateBeforeStore_PromotionCommitsInAnIdleGroup(t *testing.T) {
	conf := inmemConfig(t)
	conf.ReplicateBeforeStore = true
	stores := make([]*stagingStore, 4)
	c, err := makeCluster(t, &MakeClusterOpts{Peers: 4, Bootstrap: false, Conf: conf,
		WrapLogs: func(i int, logs LogStore) LogStore {
			stores[i] = &stagingStore{LogStore: logs}
			return stores[i]
		}})
	if err != nil {
		t.Fatalf("makeCluster: %v", err)
	}
	t.Cleanup(c.Close)
	var voters Configuration
	for _, r := range c.rafts[:3] {
		voters.Servers = append(voters.Servers, Server{Suffrage: Voter, ID: r.localID, Address: r.localAddr})
	}
	if err := c.rafts[0].BootstrapCluster(voters).Error(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	leader := c.Leader()
	learner := c.rafts[3]
	if err := leader.AddNonvoter(learner.localID, learner.localAddr, 0, time.Second).Error(); err != nil {
		t.Fatalf("AddNonvoter: %v", err)
	}
	if err := leader.Apply([]byte("data"), time.Second).Error(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	waitFor(t, 5*time.Second, "the learner to catch up", func() bool { return learner.LastIndex() == leader.LastIndex() })

	// One voter is lost, so the promotion commits only with the other
	// voter's and the learner's answers. The learner answers while the
	// leader's write of the promotion is held; the other voter's write is
	// held until the leader has the new configuration, so its answer
	// comes after it.
	li := c.IndexOf(leader)
	lost := c.rafts[(li+1)%3]
	fi := (li + 2) % 3
	c.Disconnect(lost.localAddr)
	leaderGate, followerGate := make(chan struct{}), make(chan struct{})
	stores[li].set(leaderGate, nil)
	stores[fi].set(followerGate, nil)
	target := leader.LastIndex() + 1
	promoted := leader.AddVoter(learner.localID, learner.localAddr, 0, 5*time.Second)
	waitFor(t, 5*time.Second, "the learner's answer", func() bool {
		p, err := leader.ReplicationProgress()
		if err != nil {
			return false
		}
		for _, s := range p.Servers {
			if s.ID == learner.localID {
				return s.Match >= target
			}
		}
		return false
	})
	stores[li].set(nil, nil)
	close(leaderGate)
	waitFor(t, 5*time.Second, "the leader to hold the new configuration", func() bool {
		for _, s := range leader.getLatestConfiguration().Servers {
			if s.ID == learner.localID {
				return s.Suffrage == Voter
			}
		}
		return false
	})
	stores[fi].set(nil, nil)
	close(followerGate)
	done := make(chan error, 1)
	go func() { done <- promoted.Error() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("AddVoter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the promotion did not commit within 5 s of every live voter holding it")
	}
	// Any later change needs the promotion committed first: the lost
	// voter is removed, as a mover would.
	if err := leader.RemoveServer(lost.localID, 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("RemoveServer after the promotion: %v", err)
	}
}
