package meta

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Digest is a hash of the whole catalog: clock, last queue id, every node
// with its addresses and every queue with its config, placement, times and
// version, visited in sorted order. Members that applied the same commands
// have equal digests.
func (f *FSM) Digest() [32]byte {
	d := digester{h: sha256.New()}
	d.ints(f.clock, int64(f.lastQueueID), int64(len(f.nodes)), int64(len(f.queues)))
	for _, n := range f.sortedNodes() {
		d.str(n.ID)
		d.str(n.RaftAddr)
		d.str(n.ClientAddr)
		d.str(n.HTTPAddr)
		d.ints(n.RegisteredAt)
	}
	for _, q := range f.sortedQueues() {
		d.queue(q)
	}
	var out [32]byte
	copy(out[:], d.h.Sum(nil))
	return out
}

type digester struct {
	h   hash.Hash
	buf [8]byte
}

func (d *digester) ints(vs ...int64) {
	for _, v := range vs {
		binary.LittleEndian.PutUint64(d.buf[:], uint64(v))
		d.h.Write(d.buf[:])
	}
}

func (d *digester) str(s string) {
	d.ints(int64(len(s)))
	d.h.Write([]byte(s))
}

func (d *digester) queue(q *Queue) {
	d.str(q.Name)
	d.ints(int64(q.ID), q.CreatedAt, q.UpdatedAt, int64(q.Version))
	c := q.Config
	pc := c.Queue
	d.ints(int64(c.Partitions), int64(c.Replicas),
		int64(pc.VisibilityTimeout), int64(pc.MaxReceives), int64(pc.BackoffBase),
		int64(pc.BackoffMax), int64(pc.DedupWindow), int64(pc.MaxMessageBytes),
		pc.MaxDepth, pc.MaxBytes, int64(pc.Retention))
	d.ints(int64(len(q.Partitions)))
	for _, p := range q.Partitions {
		d.ints(int64(p.Index), int64(len(p.Replicas)))
		for _, id := range p.Replicas {
			d.str(id)
		}
	}
}
