package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// sharedPipeline opens g's pipeline to the pair's second node, unwrapped
// from the bounded transport.
func sharedPipeline(t *testing.T, p *sharedPair, g *BoundedTransport) *pipeline {
	t.Helper()
	pl, err := g.Transport.(*GroupTransport).AppendEntriesPipeline("b", p.target())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	return pl.(*pipeline)
}

// pipelineState returns whether pl's drain goroutine runs and how many
// were started.
func pipelineState(pl *pipeline) (draining bool, drains int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.draining, pl.drains
}

// waitPipeline polls until cond holds of pl's state.
func waitPipeline(t *testing.T, pl *pipeline, what string, cond func(draining bool, drains int) bool) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); !cond(pipelineState(pl)); {
		if time.Now().After(deadline) {
			d, n := pipelineState(pl)
			t.Fatalf("pipeline never %s (draining %v, %d drains)", what, d, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// nextFuture reads pl's next future and checks that it is the answer to
// the append after prev.
func nextFuture(t *testing.T, pl *pipeline, prev uint64) {
	t.Helper()
	select {
	case f := <-pl.Consumer():
		if f.Error() != nil || !f.Response().Success || f.Request().PrevLogEntry != prev || f.Response().LastLog != prev+1 {
			t.Fatalf("future after %d: prev %d, %+v, %v", prev, f.Request().PrevLogEntry, f.Response(), f.Error())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("the future after %d never came", prev)
	}
}

// appendEach sends the appends after from..to-1 down pl one at a time,
// reading each one's answer before the next.
func appendEach(t *testing.T, pl *pipeline, from, to uint64) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := pl.AppendEntries(appendReq(2, i, 1, 64), new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		nextFuture(t, pl, i)
	}
}

// TestPipeline_AnswersReachRaftWithoutADrainGoroutine: while raft takes
// the answers as they come, the goroutine that reads them off the
// connection hands them over itself; no drain goroutine is started.
func TestPipeline_AnswersReachRaftWithoutADrainGoroutine(t *testing.T) {
	p := newSharedPair(t, nil)
	ga, gb := mustSharedGroup(t, p.a, "g1"), mustSharedGroup(t, p.b, "g1")
	answerAll(gb, 0)
	pl := sharedPipeline(t, p, ga)
	appendEach(t, pl, 0, 40)
	if _, drains := pipelineState(pl); drains != 0 {
		t.Fatalf("%d drain goroutines started for answers raft took at once, want 0", drains)
	}
}

// TestPipeline_SlowRaftGetsEveryAnswerInOrder: when raft does not take
// answers, the pipeline's channel fills, a drain goroutine waits on raft
// for the rest, appends block at the pipeline's depth, and raft then gets
// every answer in send order; once the backlog is gone, answers are
// handed over directly again.
func TestPipeline_SlowRaftGetsEveryAnswerInOrder(t *testing.T) {
	p := newSharedPair(t, nil)
	ga, gb := mustSharedGroup(t, p.a, "g1"), mustSharedGroup(t, p.b, "g1")
	answerAll(gb, 0)
	pl := sharedPipeline(t, p, ga)
	const n = 2*pipelineDepth + 1 // fills the channel, then the slots, then blocks
	sent := make(chan uint64, n)
	go func() {
		for i := range uint64(n) {
			if _, err := pl.AppendEntries(appendReq(2, i, 1, 64), new(raft.AppendEntriesResponse)); err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
			sent <- i
		}
	}()
	waitPipeline(t, pl, "started a drain goroutine", func(d bool, drains int) bool { return d && drains == 1 })
	if len(sent) == n {
		t.Fatalf("all %d appends sent while raft took no answer; want the last blocked at depth %d", n, pipelineDepth)
	}
	for i := range uint64(n) {
		nextFuture(t, pl, i)
	}
	waitPipeline(t, pl, "ended its drain goroutine", func(d bool, _ int) bool { return !d })
	appendEach(t, pl, n, n+10)
	if _, drains := pipelineState(pl); drains != 1 {
		t.Fatalf("%d drain goroutines started, want 1 (answers taken at once need none)", drains)
	}
}

// TestPipeline_LostConnectionFailsAppendsInFlightInOrder: when the
// connection fails with appends in flight, raft gets each of them, in
// send order, failed and not successful.
func TestPipeline_LostConnectionFailsAppendsInFlightInOrder(t *testing.T) {
	p := newSharedPair(t, nil)
	ga, gb := mustSharedGroup(t, p.a, "g1"), mustSharedGroup(t, p.b, "g1")
	held := consumeUntilClosed(gb) // taken by the follower's raft, never answered
	pl := sharedPipeline(t, p, ga)
	for i := range uint64(pipelineDepth) { // each written before AppendEntries returns
		if _, err := pl.AppendEntries(appendReq(2, i, 1, 64), new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	select {
	case <-held: // the follower hands its raft one append at a time
	case <-time.After(waitTimeout):
		t.Fatal("the first append never reached the follower")
	}
	peer, _ := p.a.peer(string(p.target()))
	peer.mu.Lock()
	bulk := peer.links[classBulk]
	peer.mu.Unlock()
	bulk.fail(errors.New("cut by the test"))
	for i := range uint64(pipelineDepth) {
		select {
		case f := <-pl.Consumer():
			if f.Error() == nil || f.Response().Success || f.Request().PrevLogEntry != i {
				t.Fatalf("future %d after the cut: prev %d, %+v, %v; want it failed, in order", i, f.Request().PrevLogEntry, f.Response(), f.Error())
			}
		case <-time.After(waitTimeout):
			t.Fatalf("future %d never came after the cut", i)
		}
	}
}
