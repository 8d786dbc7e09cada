package transport

import (
	"time"

	"github.com/hashicorp/raft"
)

// Bounds of one merged append. A follower applies what it stores right
// after the write, reading the entries back from its log store, which
// keeps the newest ones in a bounded cache (a Ferry partition's holds 256
// entries and 4 MiB): a merged append stays well inside such a cache, so
// merging never turns those reads into disk reads. A single append larger
// than the bounds is handed over alone, as before.
const (
	// maxMergedAppends bounds the queued appends handed to raft as one.
	maxMergedAppends = 16
	// maxMergedEntries bounds the entries of a merged append.
	maxMergedEntries = 128
	// maxMergedBytes bounds its request bytes (RPCBytesMax too, if lower).
	maxMergedBytes = 2 << 20
)

// Why appends are merged: raft stores a follower's appends one at a time
// on its main loop, and the transport hands it the next append only once
// the last is answered. Under pipelined load the leader sends append N+1
// while the follower is still writing N, so N+1 waited for N's fdatasync
// and then paid its own: the round the leader saw was about twice the
// follower's store. Appends that queued behind a write and continue each
// other (same leader and term, each one's previous entry the last entry
// of the one before) are handed to raft as one append with all their
// entries, stored with one write, and each is answered with its outcome.
//
// That answer is true of each part: success means raft stored every entry
// of the merged append (so each part's own entries, the only ones its
// leader counts) after checking the first part's previous entry, which
// each later part's previous entry follows from; a failure fails parts
// that were not stored. The merged append carries the last part's commit
// index and quiescence, as raft would have seen them a moment later.

// takeChainedLocked returns first and the queued appends that continue
// it, taken from the front of g.queue, in order, within the bounds above
// and RPCBytesMax request bytes (first alone may exceed them), none older
// than stale. parts is reused for the result. g.mu must be held.
func (g *GroupTransport) takeChainedLocked(first *inboundRPC, parts []*inboundRPC, stale time.Duration) []*inboundRPC {
	parts = append(parts[:0], first)
	prev, ok := first.rpc.Command.(*raft.AppendEntriesRequest)
	if !ok || len(prev.Entries) == 0 {
		return parts
	}
	size, entries := first.size, len(prev.Entries)
	maxBytes := int64(min(maxMergedBytes, g.s.cfg.RPCBytesMax))
	for len(g.queue) > 0 && len(parts) < maxMergedAppends {
		next := g.queue[0]
		req, ok := next.rpc.Command.(*raft.AppendEntriesRequest)
		if !ok || !continues(prev, req) || size+next.size > maxBytes || entries+len(req.Entries) > maxMergedEntries ||
			time.Since(next.arrived) > stale {
			break
		}
		size += next.size
		entries += len(req.Entries)
		parts = append(parts, next)
		g.queue[0] = nil
		g.queue = g.queue[1:]
		prev = req
	}
	return parts
}

// continues reports whether next appends entries right after prev's last
// one, from the same leader in the same term.
func continues(prev, next *raft.AppendEntriesRequest) bool {
	if len(next.Entries) == 0 || next.Term != prev.Term || next.ID == nil || string(next.ID) != string(prev.ID) ||
		string(next.Addr) != string(prev.Addr) {
		return false
	}
	last := prev.Entries[len(prev.Entries)-1]
	return next.PrevLogEntry == last.Index && next.PrevLogTerm == last.Term && next.Entries[0].Index == last.Index+1
}

// mergedAppend is one append with the entries of every part, which
// continue each other (takeChainedLocked).
func mergedAppend(parts []*inboundRPC) raft.RPC {
	first := parts[0].rpc.Command.(*raft.AppendEntriesRequest)
	last := parts[len(parts)-1].rpc.Command.(*raft.AppendEntriesRequest)
	n := 0
	for _, p := range parts {
		n += len(p.rpc.Command.(*raft.AppendEntriesRequest).Entries)
	}
	entries := make([]*raft.Log, 0, n)
	for _, p := range parts {
		entries = append(entries, p.rpc.Command.(*raft.AppendEntriesRequest).Entries...)
	}
	merged := *first
	merged.Entries = entries
	merged.LeaderCommitIndex = max(first.LeaderCommitIndex, last.LeaderCommitIndex)
	merged.Quiesce = last.Quiesce
	return raft.RPC{Command: &merged}
}

// deliverParts hands parts to raft as one append and answers each part
// with the outcome.
func (g *GroupTransport) deliverParts(parts []*inboundRPC, wait time.Duration) {
	if len(parts) == 1 {
		parts[0].answer(g.deliverWithin(parts[0].rpc, wait))
		return
	}
	resp, err := g.deliverWithin(mergedAppend(parts), wait)
	g.s.mergedAppends.Add(uint64(len(parts) - 1))
	for _, p := range parts {
		p.answer(resp, err)
	}
}
