package transport

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// A pooled append frame is byte for byte the frame beginFrame builds, even
// in a buffer that held a larger frame before; buffers above the bound are
// not kept.
func TestPooledFrame_SameBytesAsAFreshOne(t *testing.T) {
	big := &raft.AppendEntriesRequest{Term: 9, Entries: []*raft.Log{{Index: 1, Term: 9, Data: bytes.Repeat([]byte{7}, 5000)}}}
	small := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 4, LeaderCommitIndex: 2,
		Entries: []*raft.Log{{Index: 5, Term: 3, Data: []byte("x")}, {Index: 6, Term: 3, Data: []byte("yz")}}}
	for i, args := range []*raft.AppendEntriesRequest{big, small, small, big} {
		fresh := beginFrame(kindAppend, uint64(i), "group-1", 64)
		encodeAppendRequest(fresh, args)
		want := bytes.Clone(finishFrame(fresh))
		e := beginPooledFrame(kindAppend, uint64(i), "group-1", 64)
		encodeAppendRequest(e, args)
		if got := finishFrame(e); !bytes.Equal(got, want) {
			t.Fatalf("frame %d: pooled %x, fresh %x", i, got, want)
		}
		releaseFrame(e)
	}
	huge := beginPooledFrame(kindAppend, 1, "g", pooledFrameBytesMax+1)
	releaseFrame(huge)
	if cap(huge.b) <= pooledFrameBytesMax || len(huge.b) == 0 {
		t.Fatalf("a buffer of %d bytes (bound %d) was emptied for the pool", cap(huge.b), pooledFrameBytesMax)
	}
}
