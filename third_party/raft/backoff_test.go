package raft

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// refusingTransport fails every AppendEntries to one target while refuse
// is set, as a live node whose group is not open yet answers.
type refusingTransport struct {
	*countingTransport
	target *atomic.Value // ServerAddress
	refuse *atomic.Bool
}

func (t refusingTransport) AppendEntries(id ServerID, target ServerAddress, args *AppendEntriesRequest, resp *AppendEntriesResponse) error {
	if t.refuse.Load() && t.target.Load() == target {
		return errors.New("group not open on the target node")
	}
	return t.countingTransport.AppendEntries(id, target, args, resp)
}

// A follower whose node stays up but refuses appends for seconds (a
// restarted node opening its groups) gets the entries within about a
// heartbeat timeout once it accepts them again. Upstream's backoff had
// grown to 2.56 s after 4 s of refusals (10 s after 20 s).
func TestReplication_LiveFollowerRetriedWithinHeartbeatTimeout(t *testing.T) {
	var target atomic.Value
	var refuse atomic.Bool
	target.Store(ServerAddress(""))
	c := newTestClusterWith(t, 3, func(_ int, conf *Config) {
		conf.QuiesceAfter = 0 // heartbeats keep going; only appends fail
	}, nil, func(ct *countingTransport) Transport {
		return refusingTransport{countingTransport: ct, target: &target, refuse: &refuse}
	})
	leader := c.leader(5 * time.Second)
	var f *quiesceNode
	for _, node := range c.nodes {
		if node != leader {
			f = node
			break
		}
	}
	c.apply(leader, "a")
	c.applied(1, 3*time.Second)
	target.Store(f.addr)
	refuse.Store(true)
	refusedFrom := time.Now()
	// Entries keep coming while f refuses, so its replication keeps
	// failing and its backoff keeps growing.
	for i := 0; time.Since(refusedFrom) < 4*time.Second; i++ {
		c.apply(leader, "b")
		time.Sleep(50 * time.Millisecond)
	}
	refuse.Store(false)
	back := time.Now()
	want := len(leader.fsm.Logs())
	waitFor(t, time.Second, "the follower did not get the entries within 1 s of accepting them", func() bool {
		return len(f.fsm.Logs()) >= want
	})
	t.Logf("caught up %v after accepting appends again", time.Since(back).Round(time.Millisecond))
}
