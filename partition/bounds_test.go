package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// Concurrent requests that are each valid but together far larger than one
// entry may carry (the shape that once merged into a 210 MB entry) are
// confirmed in byte-bounded entries, and the partition keeps serving.
func TestPartition_LargeConcurrentSendsAreCutIntoBoundedEntries(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Queue.MaxMessageBytes = 1 << 20
		// Slow disks and the race detector must not cost the leader here.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	})
	p := c.reps[c.leader()]
	const senders, perRequest, bodyBytes = 8, 30, 200 << 10
	body := bytes.Repeat([]byte("b"), bodyBytes)
	var wg sync.WaitGroup
	errs := make([]error, senders)
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := make([]fsm.NewMessage, perRequest)
			for i := range msgs {
				msgs[i] = fsm.NewMessage{ID: fmt.Sprintf("w%d-%d", w, i), Body: body}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := p.Send(ctx, msgs)
			if err == nil {
				for i, o := range out {
					if o.Err != nil || (i > 0 && o.Seq != out[i-1].Seq+1 && o.Seq <= out[i-1].Seq) {
						err = fmt.Errorf("item %d: %+v", i, o)
						break
					}
				}
			}
			errs[w] = err
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("sender %d: %v", w, err)
		}
	}
	if st := p.Stats(); st.Ready != senders*perRequest {
		t.Fatalf("%d ready, want %d", st.Ready, senders*perRequest)
	}
	assertEntriesBounded(t, c)
	send(t, p, "after", 1) // the partition still serves
}

// assertEntriesBounded reads the leader's raft log and checks that no
// entry is larger than ProposalBytesMax plus one message's allowance.
func assertEntriesBounded(t *testing.T, c *testCluster) {
	t.Helper()
	p := c.reps[c.leader()]
	first, _ := p.logs.FirstIndex()
	last, _ := p.logs.LastIndex()
	largest := 0
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := p.logs.GetLog(i, &l); err != nil {
			continue
		}
		largest = max(largest, len(l.Data))
	}
	if largest > ProposalBytesMax+(1<<20) {
		t.Fatalf("largest raft entry %d bytes, bound %d", largest, ProposalBytesMax+(1<<20))
	}
	t.Logf("largest raft entry: %d bytes", largest)
}

// A message the FSM would refuse for its size is answered without a raft
// entry, alone: the valid messages of the same request are still sent.
func TestPartition_OversizeMessageIsRefusedBeforeProposing(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Queue.MaxMessageBytes = 1000 })
	p := c.reps[c.leader()]
	send(t, p, "warm", 1) // the leader's first entries are applied
	before := p.Status().AppliedIndex
	out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "huge", Body: make([]byte, 4<<20)}})
	if err != nil || len(out) != 1 || !errors.Is(out[0].Err, fsm.ErrMessageTooLarge) {
		t.Fatalf("oversize send: %v %+v", err, out)
	}
	if after := p.Status().AppliedIndex; after != before {
		t.Fatalf("a refused message cost raft entries: applied %d -> %d", before, after)
	}
	out, err = p.Send(ctxT(t), []fsm.NewMessage{{ID: "ok1", Body: []byte("x")}, {ID: "big", Body: make([]byte, 2000)}, {ID: "ok2", Body: []byte("y")}})
	if err != nil || out[0].Err != nil || !errors.Is(out[1].Err, fsm.ErrMessageTooLarge) || out[2].Err != nil || out[2].Seq != out[0].Seq+1 {
		t.Fatalf("mixed send: %v %+v", err, out)
	}
}

// The cache in front of the raft log never holds more than its byte bound,
// however large the entries raft stores.
func TestPartition_LogCacheIsBoundedInBytes(t *testing.T) {
	store := raft.NewInmemStore()
	c := newBoundedLogCache(store)
	for i := uint64(1); i <= 200; i++ {
		size := 100 << 10
		if i%7 == 0 {
			size = 2 << 20 // never cached
		}
		if err := c.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: make([]byte, size)}}); err != nil {
			t.Fatal(err)
		}
		if b := c.cachedBytes(); b > logCacheBytesMax {
			t.Fatalf("cache holds %d bytes after entry %d", b, i)
		}
	}
	var l raft.Log
	for i := uint64(1); i <= 200; i++ {
		if err := c.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := c.DeleteRange(1, 200); err != nil || c.cachedBytes() != 0 {
		t.Fatalf("delete range: %v, %d bytes cached", err, c.cachedBytes())
	}
	// raft must learn that the store underneath refuses gaps, or it leaves
	// one after a snapshot install and every later append fails.
	if c.IsMonotonic() {
		t.Fatal("the in-memory store is not monotonic, the cache says it is")
	}
	if !newBoundedLogCache(&raft.MockMonotonicLogStore{}).IsMonotonic() {
		t.Fatal("the cache hides a monotonic store from raft")
	}
}

// Close returns promptly while large sends are queued and in flight, and
// every waiting sender gets an answer.
func TestPartition_CloseAnswersQueuedSendsPromptly(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.Queue.MaxMessageBytes = 1 << 20 })
	li := c.leader()
	p := c.reps[li]
	body := bytes.Repeat([]byte("c"), 500<<10)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			msgs := make([]fsm.NewMessage, 10)
			for i := range msgs {
				msgs[i] = fsm.NewMessage{ID: fmt.Sprintf("w%d-%d", w, i), Body: body}
			}
			_, _ = p.Send(context.Background(), msgs) // any answer will do
		})
	}
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("senders still waiting 30s after Close")
	}
	c.reps[li] = nil
	t.Logf("close and all answers took %v", time.Since(start))
}

// countingStore counts the reads that reach the store under the cache.
type countingStore struct {
	raft.LogStore
	reads int
}

func (s *countingStore) GetLog(index uint64, out *raft.Log) error {
	s.reads++
	return s.LogStore.GetLog(index, out)
}

// The newest entries are served from the cache: old large entries make
// room for new ones, and deleting a compacted prefix keeps the rest.
func TestPartition_LogCacheKeepsTheNewestEntries(t *testing.T) {
	store := &countingStore{LogStore: raft.NewInmemStore()}
	c := newBoundedLogCache(store)
	next := uint64(1)
	storeSized := func(n, size int) {
		for range n {
			if err := c.StoreLogs([]*raft.Log{{Index: next, Term: 1, Data: make([]byte, size)}}); err != nil {
				t.Fatal(err)
			}
			next++
		}
	}
	readBack := func(from, to uint64) int {
		before := store.reads
		var l raft.Log
		for i := from; i <= to; i++ {
			if err := c.GetLog(i, &l); err != nil || l.Index != i {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
		return store.reads - before
	}
	storeSized(40, 300<<10) // fills the byte bound with large entries
	storeSized(20, 2<<10)
	if n := readBack(41, 60); n != 0 {
		t.Fatalf("%d of the 20 newest small entries read from the store", n)
	}
	storeSized(5, 300<<10)
	if n := readBack(61, 65); n != 0 {
		t.Fatalf("%d of the 5 newest large entries read from the store", n)
	}
	if err := c.DeleteRange(1, 50); err != nil {
		t.Fatal(err)
	}
	if n := readBack(51, 65); n != 0 {
		t.Fatalf("%d entries past the deleted prefix read from the store", n)
	}
	if b := c.cachedBytes(); b > logCacheBytesMax {
		t.Fatalf("cache holds %d bytes", b)
	}
	// A rewritten suffix (a follower's conflict) is cached again.
	if err := c.DeleteRange(60, 65); err != nil {
		t.Fatal(err)
	}
	next = 60
	storeSized(3, 1<<10)
	if n := readBack(60, 62); n != 0 {
		t.Fatalf("%d entries of the rewritten suffix read from the store", n)
	}
}
