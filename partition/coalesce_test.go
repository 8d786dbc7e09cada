package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
)

// TestPartition_ConcurrentSendsAreMergedAndAnsweredPerRequest sends from
// many goroutines at once: every request gets exactly its own outcomes, and
// the raft log grows by fewer entries than there were requests.
func TestPartition_ConcurrentSendsAreMergedAndAnsweredPerRequest(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	p := c.reps[c.leader()]
	before := p.Status().AppliedIndex
	const senders, perSender = 32, 10
	var wg sync.WaitGroup
	seqs := make([][]uint64, senders)
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				msgs := []fsm.NewMessage{{ID: fmt.Sprintf("w%d-%d-a", w, i), Body: []byte("a")}, {ID: fmt.Sprintf("w%d-%d-b", w, i), Body: []byte("b")}}
				out, err := p.Send(ctxT(t), msgs)
				if err != nil || len(out) != 2 || out[0].Err != nil || out[1].Seq != out[0].Seq+1 {
					t.Errorf("send: %v %+v", err, out)
					return
				}
				seqs[w] = append(seqs[w], out[0].Seq, out[1].Seq)
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, ss := range seqs {
		for _, s := range ss {
			if seen[s] {
				t.Fatalf("seq %d answered twice", s)
			}
			seen[s] = true
		}
	}
	if len(seen) != senders*perSender*2 {
		t.Fatalf("%d distinct seqs, want %d", len(seen), senders*perSender*2)
	}
	entries := p.Status().AppliedIndex - before
	if entries >= senders*perSender {
		t.Fatalf("%d requests took %d raft entries: nothing was merged", senders*perSender, entries)
	}
	t.Logf("%d send requests in %d raft entries", senders*perSender, entries)
	// Oversized and empty batches are refused whole, without a proposal.
	if _, err := p.Send(ctxT(t), nil); !errors.Is(err, fsm.ErrInvalidArgument) {
		t.Fatalf("empty send: %v", err)
	}
}

func TestPartition_AckIsMergedAndPerReceipt(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	send(t, p, "a", 3)
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 3}, 0)
	if err != nil || len(ds) != 3 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	errs, err := p.Ack(ctxT(t), []fsm.Receipt{ds[0].Receipt, {Seq: 99, Attempt: 1}, ds[2].Receipt})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], fsm.ErrNotFound) || errs[2] != nil {
		t.Fatalf("ack: %v %v", err, errs)
	}
	// A request whose context is over while queued is dropped, not applied.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Ack(ctx, []fsm.Receipt{ds[1].Receipt}); err != nil && !errors.Is(err, ErrTimeout) {
		t.Fatalf("cancelled ack: %v", err)
	}
}

// syncSenders runs senders goroutines that each send perSender messages
// one request at a time, and returns how many raft entries they took.
func syncSenders(t *testing.T, p *Partition, senders, perSender int) uint64 {
	t.Helper()
	before := p.Status().AppliedIndex
	var wg sync.WaitGroup
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: fmt.Sprintf("s%d-%d", w, i), Body: []byte("x")}})
				if err != nil || len(out) != 1 || out[0].Err != nil {
					t.Errorf("send: %v %+v", err, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	return p.Status().AppliedIndex - before
}

// TestPartition_GatherKeepsSynchronousSendersInOneProposal: senders that
// each wait for their answer before sending again share one proposal per
// round once gathering has seen them all, instead of splitting into
// cohorts that take alternate rounds (two entries per round of sends).
func TestPartition_GatherKeepsSynchronousSendersInOneProposal(t *testing.T) {
	const senders, perSender = 8, 30
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.GatherWait = GatherWaitMax })
	p := c.reps[c.leader()]
	entries := syncSenders(t, p, senders, perSender)
	// perSender rounds, plus a few while the senders start and finish.
	if entries > perSender+perSender/2 {
		t.Fatalf("%d senders x %d synchronous sends took %d raft entries, want about %d (one per round)",
			senders, perSender, entries, perSender)
	}
	t.Logf("%d senders x %d synchronous sends in %d raft entries", senders, perSender, entries)
}

// TestPartition_GatherNeverDelaysALoneSender: one synchronous sender is
// proposed as soon as it arrives, however long GatherWait is.
func TestPartition_GatherNeverDelaysALoneSender(t *testing.T) {
	const sends = 20
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.GatherWait = GatherWaitMax })
	p := c.reps[c.leader()]
	start := time.Now()
	syncSenders(t, p, 1, sends)
	// Were each send held for GatherWait, they would take sends x 10 ms
	// more than raft needs; allow a loaded machine most of that.
	if took := time.Since(start); took > sends*GatherWaitMax {
		t.Fatalf("%d sends by one sender took %v", sends, took)
	}
}

// TestPartition_GatherGoesOnWhileRequestsCome: gathering waits for the
// next expected request at most GatherWait after the last one came, and
// at most gatherSpanWaits GatherWaits in all; it ends once the expected
// requests are queued. A fixed wait of one GatherWait from the start
// fails the steady case.
func TestPartition_GatherGoesOnWhileRequestsCome(t *testing.T) {
	const wait = 50 * time.Millisecond
	cases := []struct {
		name     string
		arrivals []time.Duration // after gathering starts, one request each
		expect   int
		atLeast  time.Duration
		atMost   time.Duration
	}{
		{"all come back", []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}, 3, 20 * time.Millisecond, wait},
		{"one does not come back", []time.Duration{10 * time.Millisecond}, 3, 10*time.Millisecond + wait, 3 * wait},
		{"they keep coming", steady(30*time.Millisecond, 10), 100, gatherSpanWaits * wait, gatherSpanWaits*wait + 2*wait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &Partition{cfg: Config{GatherWait: wait}, closing: make(chan struct{})}
			b := newBatcher[int, int](p, nil, nil, func(int) int { return 1 })
			b.timer = time.NewTimer(time.Hour)
			b.timer.Stop()
			b.expect = tc.expect
			add := func() {
				b.mu.Lock()
				b.enqueueLocked(&batchRequest[int, int]{items: []int{1}}, 1)
				wake := b.wakeLocked()
				b.mu.Unlock()
				if wake {
					b.signal()
				}
			}
			add()
			start := time.Now()
			for _, at := range tc.arrivals {
				time.AfterFunc(at, add)
			}
			b.gather()
			took := time.Since(start)
			if took < tc.atLeast || took > tc.atMost {
				t.Fatalf("gathering took %v, want %v..%v", took, tc.atLeast, tc.atMost)
			}
		})
	}
}

// TestPartition_ArrivalsWakeTheWorkerOnlyWhenItWaitsForThem: a request
// wakes a worker that runs or waits idle; one that gathers only when the
// request completes the expected ones or fills a proposal (the others
// move its timer on); one waiting for a proposal's outcome only when the
// queue is deep enough for a second proposal.
func TestPartition_ArrivalsWakeTheWorkerOnlyWhenItWaitsForThem(t *testing.T) {
	p := &Partition{cfg: Config{OverlapItemsMin: 3}}
	b := newBatcher[int, int](p, nil, nil, func(n int) int { return n })
	arrive := func(items ...int) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.enqueueLocked(&batchRequest[int, int]{items: items}, b.bytesOf(items))
		return b.wakeLocked()
	}
	if !arrive(1) {
		t.Fatal("an arrival did not wake an idle worker")
	}

	setQueue(b, nil)
	b.waiting, b.expect = workerGathering, 3
	before := time.Now()
	for range 2 {
		if arrive(1) {
			t.Fatal("an arrival short of the expected requests woke a gathering worker")
		}
	}
	if b.lastArrival.Before(before) {
		t.Fatal("an arrival during gathering was not noted")
	}
	if !arrive(1) {
		t.Fatal("the last expected request did not wake a gathering worker")
	}
	setQueue(b, nil)
	if arrive(1) || !arrive(ProposalBytesMax) {
		t.Fatal("a full proposal did not wake a gathering worker (or a small request did)")
	}

	setQueue(b, nil)
	b.waiting = workerInFlight
	for range 2 {
		if arrive(1) {
			t.Fatal("a shallow queue woke a worker waiting for its proposal")
		}
	}
	if !arrive(1) {
		t.Fatal("a queue deep enough for a second proposal did not wake the worker")
	}
}

// steady returns n arrival times every gap.
func steady(gap time.Duration, n int) []time.Duration {
	at := make([]time.Duration, n)
	for i := range at {
		at[i] = time.Duration(i+1) * gap
	}
	return at
}

// TestPartition_GatherStopsAtAFullProposal: the queue counts as a full
// proposal at fsm.BatchMax untaken items or ProposalBytesMax bytes, so
// gathering never waits for requests that could not join the proposal.
func TestPartition_GatherStopsAtAFullProposal(t *testing.T) {
	b := &batcher[int, int]{size: func(n int) int { return n }}
	req := func(taken int, items ...int) *batchRequest[int, int] {
		return &batchRequest[int, int]{items: items, taken: taken}
	}
	many := make([]int, fsm.BatchMax)
	for i := range many {
		many[i] = 1
	}
	cases := []struct {
		name  string
		queue []*batchRequest[int, int]
		n     int
		full  bool
	}{
		{"empty", nil, 0, false},
		{"small", []*batchRequest[int, int]{req(0, 10, 10), req(0, 10)}, 2, false},
		{"BatchMax items", []*batchRequest[int, int]{req(0, many[:fsm.BatchMax-1]...), req(0, 1)}, 2, true},
		{"taken items do not count", []*batchRequest[int, int]{req(1, many...)}, 1, false},
		{"ProposalBytesMax bytes", []*batchRequest[int, int]{req(0, ProposalBytesMax/2), req(0, ProposalBytesMax/2)}, 2, true},
	}
	for _, c := range cases {
		setQueue(b, c.queue)
		b.mu.Lock()
		n, full := len(b.queue), b.fullLocked()
		b.mu.Unlock()
		if n != c.n || full != c.full {
			t.Errorf("%s: %d queued, full %v; want %d, %v", c.name, n, full, c.n, c.full)
		}
	}
}

// setQueue replaces b's queue and its counts of untaken items.
func setQueue(b *batcher[int, int], queue []*batchRequest[int, int]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue, b.untakenItems, b.untakenBytes = nil, 0, 0
	for _, r := range queue {
		b.enqueueLocked(r, b.bytesOf(r.items))
		b.untakenItems -= r.taken
		b.untakenBytes -= b.bytesOf(r.items[:r.taken])
	}
	b.assertCountsLocked()
}

// pipeliningSenders runs senders goroutines that each send perSender
// single-message requests, window of them in flight at once, and checks
// that every request got its own, distinct seq.
func pipeliningSenders(t *testing.T, p *Partition, senders, window, perSender int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := range senders * window {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender / window {
				out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: fmt.Sprintf("p%d-%d", w, i), Body: []byte("x")}})
				if err != nil || len(out) != 1 || out[0].Err != nil {
					t.Errorf("send: %v %+v", err, out)
					return
				}
				mu.Lock()
				if seen[out[0].Seq] {
					t.Errorf("seq %d answered twice", out[0].Seq)
				}
				seen[out[0].Seq] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if want := senders * window * (perSender / window); len(seen) != want {
		t.Fatalf("%d distinct seqs, want %d", len(seen), want)
	}
}

// TestPartition_DeepQueueOverlapsProposals: with OverlapItemsMin requests
// waiting, a second merged proposal starts while the first is in flight;
// with OverlapItemsMin 0 never, and at the default only once a whole
// proposal's worth waits. Every request is answered with its own seq
// either way, and the replicas agree.
func TestPartition_DeepQueueOverlapsProposals(t *testing.T) {
	cases := []struct {
		min, senders, window int
		overlaps             bool
	}{
		{0, 4, 64, false},
		{16, 4, 64, true},
		{DefaultOverlapItemsMin, 4, 64, false}, // 256 waiting never fill a proposal
		{DefaultOverlapItemsMin, 4, 600, true}, // 2,400 do, whatever the first proposal takes
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("OverlapItemsMin=%d,waiting=%d", tc.min, tc.senders*tc.window), func(t *testing.T) {
			c := newTestCluster(t, 3, func(cfg *Config) { cfg.OverlapItemsMin = tc.min })
			p := c.reps[c.leader()]
			// The leader's first apply waits (up to a second) for a second
			// proposal to start, and the senders start only once it waits:
			// their requests queue behind a proposal in flight however
			// fast this machine is.
			entered := make(chan struct{})
			var once sync.Once
			hold := func() {
				once.Do(func() {
					close(entered)
					for end := time.Now().Add(time.Second); time.Now().Before(end) && p.sends.overlapped.Load() == 0; {
						time.Sleep(time.Millisecond)
					}
				})
			}
			p.beforeApply.Store(&hold)
			first := make(chan error, 1)
			go func() {
				_, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "first", Body: []byte("x")}})
				first <- err
			}()
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the first send was never applied")
			}
			pipeliningSenders(t, p, tc.senders, tc.window, 4*tc.window)
			if err := <-first; err != nil {
				t.Fatalf("first send: %v", err)
			}
			p.beforeApply.Store(nil)
			overlapped := p.sends.overlapped.Load()
			t.Logf("%d proposals overlapped", overlapped)
			if !tc.overlaps && overlapped != 0 {
				t.Fatalf("%d proposals overlapped", overlapped)
			}
			if tc.overlaps && overlapped == 0 {
				t.Fatal("the senders never had two proposals in flight")
			}
			c.converged()
		})
	}
	// At the default, sixteen synchronous senders keep one proposal per
	// round: one of them is always in the proposal in flight, so never
	// sixteen wait (at a threshold of 8 they split into two).
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.OverlapItemsMin = DefaultOverlapItemsMin })
	p := c.reps[c.leader()]
	syncSenders(t, p, 16, 20)
	if n := p.sends.overlapped.Load(); n != 0 {
		t.Fatalf("16 synchronous senders overlapped %d proposals with OverlapItemsMin %d", n, DefaultOverlapItemsMin)
	}
}

// TestPartition_OverlapNeedsADeepQueueOfFreshRequests: a second proposal
// starts only when OverlapItemsMin untaken items (or a quarter of
// ProposalBytesMax bytes) wait and the first request waiting has no slice
// in flight, so the slices of one request are proposed one at a time.
func TestPartition_OverlapNeedsADeepQueueOfFreshRequests(t *testing.T) {
	p := &Partition{cfg: Config{OverlapItemsMin: 4}}
	b := &batcher[int, int]{p: p, size: func(n int) int { return n }}
	req := func(taken int, items ...int) *batchRequest[int, int] {
		return &batchRequest[int, int]{items: items, taken: taken}
	}
	cases := []struct {
		name  string
		min   int
		queue []*batchRequest[int, int]
		deep  bool
	}{
		{"empty", 4, nil, false},
		{"few items", 4, []*batchRequest[int, int]{req(0, 1, 1), req(0, 1)}, false},
		{"enough items", 4, []*batchRequest[int, int]{req(0, 1, 1), req(0, 1, 1)}, true},
		{"enough bytes", 4, []*batchRequest[int, int]{req(0, ProposalBytesMax/4)}, true},
		{"head has a slice in flight", 4, []*batchRequest[int, int]{req(1, 1, 1, 1, 1, 1), req(0, 1, 1, 1, 1)}, false},
		{"off", 0, []*batchRequest[int, int]{req(0, 1, 1, 1, 1, 1, 1)}, false},
	}
	for _, c := range cases {
		p.cfg.OverlapItemsMin = c.min
		setQueue(b, c.queue)
		if got := b.deepLocked(); got != c.deep {
			t.Errorf("%s: deepLocked() = %v, want %v", c.name, got, c.deep)
		}
	}
}

// TestPartition_CloseWithSlicesInFlightAnswersEveryRequest: the leader
// closes while large requests, proposed in slices, and small ones queue
// behind each other with proposals overlapping; every Send returns (an
// outcome or an error) instead of waiting for slices never proposed.
func TestPartition_CloseWithSlicesInFlightAnswersEveryRequest(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.Queue.MaxMessageBytes = 1 << 20
		cfg.OverlapItemsMin = 1
	})
	leader := c.leader()
	p := c.reps[leader]
	body := make([]byte, 300<<10)
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1
			if w%3 == 0 {
				n = 12 // about 3.6 MiB: four slices or more
			}
			msgs := make([]fsm.NewMessage, n)
			for i := range msgs {
				msgs[i] = fsm.NewMessage{ID: fmt.Sprintf("c%d-%d", w, i), Body: body}
			}
			out, err := p.Send(context.Background(), msgs)
			if err == nil && len(out) != n {
				t.Errorf("sender %d: %d outcomes for %d messages", w, len(out), n)
			}
		}()
	}
	testwait.Until(t, 10*time.Second, "a proposal in flight", func() bool { return p.Status().AppliedIndex > 2 })
	c.stop(leader)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a Send was never answered after Close")
	}
}
