package meta

import "github.com/ferrymq/ferry/internal/digest"

// Digest is a hash of the whole catalog: clock, last queue id, every node
// with its addresses, incarnation and draining flag, and every queue with
// its config, placement (moves in progress included), times and version,
// visited in sorted order. Members that applied the same commands
// have equal digests.
func (f *FSM) Digest() [32]byte {
	d := digester{digest.New()}
	d.Ints(f.clock, int64(f.lastQueueID), int64(len(f.nodes)), int64(len(f.queues)))
	for _, n := range f.sortedNodes() {
		d.Str(n.ID)
		d.Str(n.RaftAddr)
		d.Str(n.ClientAddr)
		d.Str(n.HTTPAddr)
		draining := int64(0)
		if n.Draining {
			draining = 1
		}
		d.Ints(n.RegisteredAt, int64(n.Incarnation), draining)
	}
	for _, q := range f.sortedQueues() {
		d.queue(q)
	}
	return d.Sum()
}

type digester struct{ *digest.Writer }

func (d *digester) queue(q *Queue) {
	d.Str(q.Name)
	d.Ints(int64(q.ID), q.CreatedAt, q.UpdatedAt, int64(q.Version))
	c := q.Config
	pc := c.Queue
	d.Ints(int64(c.Partitions), int64(c.Replicas),
		int64(pc.VisibilityTimeout), int64(pc.MaxReceives), int64(pc.BackoffBase),
		int64(pc.BackoffMax), int64(pc.DedupWindow), int64(pc.MaxMessageBytes),
		pc.MaxDepth, pc.MaxBytes, int64(pc.Retention), pc.MaxDead, pc.MaxDeadBytes,
		int64(pc.DeadRetention), pc.DedupMaxIDs)
	d.Ints(int64(len(q.Partitions)))
	for _, p := range q.Partitions {
		d.Ints(int64(p.Index), int64(len(p.Replicas)), int64(p.MoveEpoch))
		for _, ids := range [][]string{p.Replicas, p.Joining, p.Leaving} {
			d.Ints(int64(len(ids)))
			for _, id := range ids {
				d.Str(id)
			}
		}
	}
}
