package raft

import (
	"sync"
	"testing"
	"time"
)

// gate blocks pipelined appends to one target while closed.
type gate struct {
	mu     sync.Mutex
	target ServerAddress
	open   chan struct{} // nil while open
}

func (g *gate) wait(target ServerAddress) {
	g.mu.Lock()
	ch := g.open
	if target != g.target {
		ch = nil
	}
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (g *gate) close(target ServerAddress) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.target, g.open = target, make(chan struct{})
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
	g.open = nil
}

// gatedPipeline is a counting pipeline whose appends wait for the gate.
type gatedPipeline struct {
	*countingPipeline
	g      *gate
	target ServerAddress
}

func (p gatedPipeline) AppendEntries(args *AppendEntriesRequest, resp *AppendEntriesResponse) (AppendFuture, error) {
	p.g.wait(p.target)
	return p.countingPipeline.AppendEntries(args, resp)
}

// gatedTransport offers pipelines whose appends to the gate's target wait
// while it is closed; heartbeats and plain appends pass.
type gatedTransport struct {
	pipelineTransport
	g *gate
}

func (t gatedTransport) AppendEntriesPipeline(id ServerID, target ServerAddress) (AppendPipeline, error) {
	p, err := t.pipelineTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return gatedPipeline{countingPipeline: p.(*countingPipeline), g: t.g, target: target}, nil
}

// A pipelined follower that fell many batches behind gets the rest at once
// when its link frees up, not one batch per new entry or commit timeout.
func TestReplication_PipelinedFollowerBehindCatchesUpWithoutNewEntries(t *testing.T) {
	g := &gate{}
	c := newTestClusterWith(t, 3, func(_ int, conf *Config) {
		conf.MaxAppendEntries = 4
		conf.CommitTimeout = 20 * time.Second // no paced appends during the test
		conf.QuiesceAfter = 0
	}, nil, func(ct *countingTransport) Transport {
		return gatedTransport{pipelineTransport{ct}, g}
	})
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.apply(leader, "a") // the second append carries the first's commit
	if leader.trans.pipelinesOpened.Load() == 0 {
		t.Fatal("the leader never pipelined: the test measures nothing")
	}
	var f *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			f = node
			break
		}
	}
	g.close(f.addr)
	for range 60 { // fifteen batches; the other follower commits them
		c.apply(leader, "b")
	}
	g.release()
	// The commit timeout is far away: the follower's log, not its FSM,
	// shows what it got.
	want := leader.raft.LastIndex()
	waitFor(t, 3*time.Second, "the follower did not catch up without new entries", func() bool {
		return f.raft.LastIndex() >= want
	})
}
