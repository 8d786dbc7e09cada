package transport

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

func TestTransport_SplitAppendCutsByBytesAndChainsPrevLog(t *testing.T) {
	args := &raft.AppendEntriesRequest{Term: 5, PrevLogEntry: 9, PrevLogTerm: 4, LeaderCommitIndex: 12}
	sizes := []int{3000, 3000, 500, 9000, 100, 100}
	for i, n := range sizes {
		args.Entries = append(args.Entries, &raft.Log{Index: uint64(10 + i), Term: 5, Data: make([]byte, n)})
	}
	parts := splitAppend(args, 4096)
	var got [][]uint64
	prev, prevTerm := args.PrevLogEntry, args.PrevLogTerm
	for _, p := range parts {
		if p.PrevLogEntry != prev || p.PrevLogTerm != prevTerm || p.Term != 5 || p.LeaderCommitIndex != 12 {
			t.Fatalf("part %+v does not chain from %d/%d", p, prev, prevTerm)
		}
		size := 0
		var idx []uint64
		for _, e := range p.Entries {
			size += len(e.Data)
			idx = append(idx, e.Index)
		}
		if size > 4096 && len(p.Entries) > 1 {
			t.Fatalf("part of %d bytes in %d entries", size, len(p.Entries))
		}
		got = append(got, idx)
		last := p.Entries[len(p.Entries)-1]
		prev, prevTerm = last.Index, last.Term
	}
	want := [][]uint64{{10}, {11, 12}, {13}, {14, 15}}
	if len(got) != len(want) {
		t.Fatalf("parts %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) || got[i][0] != want[i][0] {
			t.Fatalf("parts %v, want %v", got, want)
		}
	}
	if small := splitAppend(&raft.AppendEntriesRequest{Entries: args.Entries[4:]}, 4096); len(small) != 1 {
		t.Fatalf("a request under the bound was cut into %d parts", len(small))
	}
}

// A follower that missed many large entries catches up through RPCs that
// each carry at most RPCBytesMax bytes, on the pipeline and the plain path.
func TestTransport_LaggingFollowerCatchesUpInBoundedRPCs(t *testing.T) {
	ips, _ := nodeIPs(t)
	c := startClusterWith(t, ips, 4096, "p1")
	c.apply("p1", 5)
	c.converge("p1", 5)
	n := c.nodes[len(c.nodes)-1]
	old := n.replicas["p1"]
	stopReplica(t, old)
	delete(n.replicas, "p1")
	c.applyData("p1", 300, bytes.Repeat([]byte("e"), 3000))
	c.startReplica(n, "p1", &replica{logs: old.logs, snaps: old.snaps})
	c.apply("p1", 5)
	c.converge("p1", 310)
	var split uint64
	for _, n := range c.nodes {
		split += n.replicas["p1"].trans.SplitRequests()
	}
	if split == 0 {
		t.Fatal("no AppendEntries request was cut: the catch-up did not exercise the bound")
	}
	t.Logf("%d requests sent in parts", split)
}
