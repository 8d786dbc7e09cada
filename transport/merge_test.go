package transport

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/testwait"
)

// appendPart is a queued append from leader n1 in term 2 whose previous
// entry is prev (in term 2) and whose entries are prev+1..prev+count.
func appendPart(prev uint64, count int) *inboundRPC {
	req := &raft.AppendEntriesRequest{
		RPCHeader:    raft.RPCHeader{ID: []byte("n1"), Addr: []byte("127.0.0.11:1")},
		Term:         2,
		PrevLogEntry: prev, PrevLogTerm: 2, LeaderCommitIndex: prev,
	}
	for i := 1; i <= count; i++ {
		req.Entries = append(req.Entries, &raft.Log{Index: prev + uint64(i), Term: 2, Data: []byte{byte(i)}})
	}
	return &inboundRPC{rpc: raft.RPC{Command: req}, size: 100, arrived: time.Now()}
}

func testGroup(rpcBytesMax int) *GroupTransport {
	return &GroupTransport{s: &Shared{cfg: SharedConfig{RPCBytesMax: rpcBytesMax}}, id: "g"}
}

func TestMerge_TakesOnlyAppendsThatContinue(t *testing.T) {
	edit := func(f func(*raft.AppendEntriesRequest)) func(*inboundRPC) {
		return func(r *inboundRPC) { f(r.rpc.Command.(*raft.AppendEntriesRequest)) }
	}
	cases := []struct {
		name   string
		change func(*inboundRPC)
		merged bool
	}{
		{"continues", func(*inboundRPC) {}, true},
		{"newer term", edit(func(a *raft.AppendEntriesRequest) { a.Term = 3 }), false},
		{"another leader", edit(func(a *raft.AppendEntriesRequest) { a.ID = []byte("n2") }), false},
		{"another leader address", edit(func(a *raft.AppendEntriesRequest) { a.Addr = []byte("127.0.0.12:1") }), false},
		{"no leader id", edit(func(a *raft.AppendEntriesRequest) { a.ID = nil }), false},
		{"previous index differs", edit(func(a *raft.AppendEntriesRequest) { a.PrevLogEntry = 6 }), false},
		{"previous term differs", edit(func(a *raft.AppendEntriesRequest) { a.PrevLogTerm = 1 }), false},
		{"gap in entries", edit(func(a *raft.AppendEntriesRequest) { a.Entries[0].Index = 9 }), false},
		{"no entries", edit(func(a *raft.AppendEntriesRequest) { a.Entries = nil }), false},
		{"too many bytes", func(r *inboundRPC) { r.size = 901 }, false},
		{"too old", func(r *inboundRPC) { r.arrived = time.Now().Add(-time.Minute) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := testGroup(1000)
			first, next := appendPart(4, 3), appendPart(7, 2)
			tc.change(next)
			g.queue = []*inboundRPC{next}
			parts := g.takeChainedLocked(first, nil, time.Second)
			if got, want := len(parts), map[bool]int{true: 2, false: 1}[tc.merged]; got != want {
				t.Fatalf("took %d parts, want %d", got, want)
			}
			if left := len(g.queue); left != map[bool]int{true: 0, false: 1}[tc.merged] {
				t.Fatalf("%d appends left queued", left)
			}
			if parts[0] != first {
				t.Fatalf("first part is not the append drain took")
			}
		})
	}
}

func TestMerge_BoundedInPartsAndStopsAtFirstBreak(t *testing.T) {
	g := testGroup(1 << 20)
	prev := uint64(10)
	first := appendPart(prev, 1)
	prev++
	for i := 0; i < maxMergedAppends+4; i++ {
		g.queue = append(g.queue, appendPart(prev, 2))
		prev += 2
	}
	parts := g.takeChainedLocked(first, nil, time.Second)
	if len(parts) != maxMergedAppends || len(g.queue) != 5 {
		t.Fatalf("took %d parts leaving %d queued, want %d and 5", len(parts), len(g.queue), maxMergedAppends)
	}

	// Entries: 100 + 28 fit, one more does not.
	g = testGroup(1 << 20)
	g.queue = []*inboundRPC{appendPart(104, 28), appendPart(132, 1)}
	if parts := g.takeChainedLocked(appendPart(4, 100), nil, time.Second); len(parts) != 2 || len(g.queue) != 1 {
		t.Fatalf("entries: took %d parts leaving %d queued, want 2 and 1", len(parts), len(g.queue))
	}
	// Bytes: maxMergedBytes even when RPCBytesMax is higher.
	g = testGroup(64 << 20)
	big := appendPart(7, 1)
	big.size = maxMergedBytes
	g.queue = []*inboundRPC{big}
	if parts := g.takeChainedLocked(appendPart(4, 3), nil, time.Second); len(parts) != 1 {
		t.Fatalf("bytes: took %d parts, want 1", len(parts))
	}

	// A break in the chain stops the merge even if later appends would
	// continue the earlier ones.
	g = testGroup(1 << 20)
	broken := appendPart(9, 1)
	g.queue = []*inboundRPC{appendPart(7, 2), broken, appendPart(9, 1)}
	broken.rpc.Command.(*raft.AppendEntriesRequest).Term = 3
	if parts := g.takeChainedLocked(appendPart(4, 3), nil, time.Second); len(parts) != 2 || len(g.queue) != 2 {
		t.Fatalf("took %d parts leaving %d queued, want 2 and 2", len(parts), len(g.queue))
	}

	// An append without entries is handed over alone.
	g = testGroup(1 << 20)
	g.queue = []*inboundRPC{appendPart(4, 1)}
	if parts := g.takeChainedLocked(appendPart(4, 0), nil, time.Second); len(parts) != 1 {
		t.Fatalf("an empty append took %d parts", len(parts))
	}
}

func TestMerge_MergedAppendCarriesEveryEntryInOrder(t *testing.T) {
	a, b, c := appendPart(4, 3), appendPart(7, 2), appendPart(9, 1)
	last := c.rpc.Command.(*raft.AppendEntriesRequest)
	last.LeaderCommitIndex = 8
	last.Quiesce = true
	got := mergedAppend([]*inboundRPC{a, b, c}).Command.(*raft.AppendEntriesRequest)
	if got.PrevLogEntry != 4 || got.PrevLogTerm != 2 || got.Term != 2 || string(got.ID) != "n1" {
		t.Fatalf("merged header: prev %d/%d term %d leader %q", got.PrevLogEntry, got.PrevLogTerm, got.Term, got.ID)
	}
	if got.LeaderCommitIndex != 8 || !got.Quiesce {
		t.Fatalf("merged commit index %d quiesce %v, want the last part's 8 and true", got.LeaderCommitIndex, got.Quiesce)
	}
	if len(got.Entries) != 6 {
		t.Fatalf("merged %d entries, want 6", len(got.Entries))
	}
	for i, e := range got.Entries {
		if e.Index != uint64(5+i) {
			t.Fatalf("entry %d has index %d, want %d", i, e.Index, 5+i)
		}
	}
	if first := a.rpc.Command.(*raft.AppendEntriesRequest); len(first.Entries) != 3 {
		t.Fatalf("merging changed the first part: %d entries", len(first.Entries))
	}
}

// slowLogStore is a log store whose writes take delay once slow is set,
// as a follower's disk that is slower than its leader's.
type slowLogStore struct {
	*raft.InmemStore
	delay  time.Duration
	slow   atomic.Bool
	writes atomic.Int64
}

func (s *slowLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *slowLogStore) StoreLogs(logs []*raft.Log) error {
	if s.slow.Load() {
		s.writes.Add(1)
		time.Sleep(s.delay)
	}
	return s.InmemStore.StoreLogs(logs)
}

// Followers whose writes are slower than the leader's get several
// pipelined appends queued behind each write: they store them with one
// write each time, and every replica ends with the same log.
func TestTransport_SlowFollowerMergesQueuedAppends(t *testing.T) {
	ips, _ := nodeIPs(t)
	stores := make([]*slowLogStore, len(ips))
	c := &cluster{t: t, groups: []string{"g"}, shared: true}
	c.wrapLogs = func(i int, logs *raft.InmemStore) raft.LogStore {
		stores[i] = &slowLogStore{InmemStore: logs, delay: 3 * time.Millisecond}
		return stores[i]
	}
	startClusterOf(t, c, ips, nil)
	lead := c.leader("g")
	for i, n := range c.nodes {
		if n.replicas["g"] != lead {
			stores[i].slow.Store(true)
		}
	}

	const senders, each = 32, 30
	var wg sync.WaitGroup
	errs := make(chan error, senders*each)
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				errs <- lead.r.Apply(fmt.Appendf(nil, "%d-%d", s, k), 5*time.Second).Error()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	c.converge("g", senders*each)

	var merged uint64
	var followerWrites int64
	for i, n := range c.nodes {
		merged += n.shared.Stats().MergedAppends
		if n.replicas["g"] != lead {
			followerWrites += stores[i].writes.Load()
		}
	}
	if merged == 0 {
		t.Fatalf("no append was merged (followers wrote %d times for %d entries)", followerWrites, senders*each)
	}
	t.Logf("%d appends merged; followers wrote %d times for %d entries", merged, followerWrites, senders*each)
	assertSameLogs(t, c, "g")
}

// assertSameLogs fails unless every replica of g holds the same entries.
func assertSameLogs(t *testing.T, c *cluster, g string) {
	t.Helper()
	ref := c.nodes[0].replicas[g].logs
	last, err := ref.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitTimeout, "every replica holds the reference's last index", func() bool {
		for _, n := range c.nodes[1:] {
			if got, _ := n.replicas[g].logs.LastIndex(); got != last {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes[1:] {
		logs := n.replicas[g].logs
		for i := uint64(1); i <= last; i++ {
			var want, got raft.Log
			if err := ref.GetLog(i, &want); err != nil {
				t.Fatalf("%s: entry %d: %v", c.nodes[0].id, i, err)
			}
			if err := logs.GetLog(i, &got); err != nil {
				t.Fatalf("%s: entry %d: %v", n.id, i, err)
			}
			if got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) {
				t.Fatalf("%s: entry %d differs: term %d type %v %q, want term %d type %v %q",
					n.id, i, got.Term, got.Type, got.Data, want.Term, want.Type, want.Data)
			}
		}
	}
}
