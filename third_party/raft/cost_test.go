// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

// Tests of Ferry's changes that make an idle or leaderless group cheaper
// for the process hosting thousands of them (see FORK.md, "Less per
// group").

package raft

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// countingPipeline is an in-memory pipeline whose appends count as the
// countingTransport's and whose life is counted in open.
type countingPipeline struct {
	AppendPipeline
	owner  *countingTransport
	closed atomic.Bool
}

func (p *countingPipeline) AppendEntries(args *AppendEntriesRequest, resp *AppendEntriesResponse) (AppendFuture, error) {
	p.owner.appends.Add(1)
	return p.AppendPipeline.AppendEntries(args, resp)
}

func (p *countingPipeline) Close() error {
	if p.closed.CompareAndSwap(false, true) {
		p.owner.openPipelines.Add(-1)
	}
	return p.AppendPipeline.Close()
}

// pipelineTransport is a countingTransport that offers pipelines.
type pipelineTransport struct{ *countingTransport }

func (t pipelineTransport) AppendEntriesPipeline(id ServerID, target ServerAddress) (AppendPipeline, error) {
	p, err := t.InmemTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	t.openPipelines.Add(1)
	t.pipelinesOpened.Add(1)
	return &countingPipeline{AppendPipeline: p, owner: t.countingTransport}, nil
}

// newPipelineCluster is newTestCluster whose nodes replicate through
// pipelines, as a production transport lets them.
func newPipelineCluster(t *testing.T, n int) *quiesceCluster {
	t.Helper()
	c := newTestClusterWith(t, n, nil, nil, func(ct *countingTransport) Transport { return pipelineTransport{ct} })
	return c
}

// A follower that quiesces takes its leader out of pipeline mode: the
// pipeline's decoder goroutine and the transport's pipeline are closed
// while the group is idle, and a new entry opens them again.
func TestCost_QuiescedFollowerHoldsNoPipeline(t *testing.T) {
	c := newPipelineCluster(t, 3)
	leader := c.leader(5 * time.Second)
	c.apply(leader, "a")
	c.apply(leader, "b")
	c.applied(2, 5*time.Second)
	if leader.trans.pipelinesOpened.Load() == 0 {
		t.Fatal("the leader never pipelined: the test measures nothing")
	}
	waitFor(t, 5*time.Second, "pipelines still open while the group is quiesced", func() bool {
		return leader.trans.openPipelines.Load() == 0
	})
	c.quiesced(5 * time.Second)

	opened := leader.trans.pipelinesOpened.Load()
	for i := range 5 {
		c.apply(leader, string(rune('c'+i)))
	}
	c.applied(7, 5*time.Second)
	if leader.trans.pipelinesOpened.Load() == opened {
		t.Fatal("no pipeline opened again after the group woke")
	}
	waitFor(t, 5*time.Second, "pipelines open after the group quiesced again", func() bool {
		return leader.trans.openPipelines.Load() == 0
	})
}

// goroutinesIn counts the goroutines whose stack holds fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), fn+"(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A leader runs the oldest-log gauge goroutine unless NoLogAgeGauge is set.
func TestCost_NoLogAgeGaugeRunsNoGoroutine(t *testing.T) {
	const fn = "raft.emitLogStoreMetrics"
	withGauge := newTestCluster(t, 3, nil)
	withGauge.leader(5 * time.Second)
	waitFor(t, 2*time.Second, "no gauge goroutine with the gauge on: the test measures nothing", func() bool {
		return goroutinesIn(fn) > 0
	})
	for _, node := range withGauge.nodes {
		_ = node.raft.Shutdown().Error()
		node.raft = nil
	}

	without := newTestCluster(t, 3, func(_ int, conf *Config) { conf.NoLogAgeGauge = true })
	leader := without.leader(5 * time.Second)
	without.apply(leader, "a")
	waitFor(t, 2*time.Second, "a gauge goroutine runs with NoLogAgeGauge", func() bool {
		return goroutinesIn(fn) == 0
	})
	without.quiesced(5 * time.Second)
	if n := goroutinesIn(fn); n != 0 {
		t.Fatalf("%d gauge goroutines with NoLogAgeGauge", n)
	}
}

// Every RPC's header shares the id and address bytes made once.
func TestCost_RPCHeaderAllocatesNothing(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	r := c.nodes[0].raft
	h := r.getRPCHeader()
	if string(h.ID) != string(c.nodes[0].id) || !bytes.Equal(h.Addr, r.trans.EncodePeer(c.nodes[0].id, r.localAddr)) {
		t.Fatalf("header id %q addr %q", h.ID, h.Addr)
	}
	if n := testing.AllocsPerRun(100, func() { h = r.getRPCHeader() }); n != 0 {
		t.Fatalf("getRPCHeader allocates %v times per call", n)
	}
}

// lineLog is an hclog output that keeps its lines.
type lineLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the lines holding msg.
func (l *lineLog) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// RPCs to a follower whose node Liveness reports lost fail at debug level:
// the loss is the transport's to report once, not every group's on every
// retry.
func TestCost_FailuresToALostNodeLogAtDebug(t *testing.T) {
	out := &lineLog{}
	c := newTestCluster(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter = 0 // the leader heartbeats and retries as upstream's does
		conf.Logger = hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Trace})
	})
	leader := c.leader(5 * time.Second)
	var lost *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			lost = node
			break
		}
	}
	c.live.set(leader.addr, lost.addr, true) // lost first: every failure below is to a lost node
	leader.trans.Disconnect(lost.addr)
	waitFor(t, 5*time.Second, "no failed RPC to the lost node logged", func() bool {
		return len(out.lines("failed to heartbeat to")) > 0
	})
	for _, msg := range []string{"failed to heartbeat to", "failed to appendEntries to", "failed to pipeline appendEntries"} {
		for _, line := range out.lines(msg) {
			if !strings.Contains(line, "[DEBUG]") {
				t.Fatalf("failure to a lost node not at debug level: %s", line)
			}
		}
	}
}
