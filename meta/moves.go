package meta

import (
	"fmt"
	"slices"
)

// ReplicaCmd names one replica of one partition: queue Queue with id
// QueueID (a queue deleted and created again has another id, so a command
// for the old one never touches the new), partition Index, node Node.
// Incarnation, for CmdReplicaCaughtUp, is the node's incarnation the
// leader saw catching up: a node that lost its data again since must
// catch up again. MoveEpoch, for CmdReplicaCaughtUp and CmdReplicaLeft,
// is the partition's Partition.MoveEpoch the leader saw: the command
// applies only in that epoch. Zero (commands logged before epochs
// existed) skips that check.
type ReplicaCmd struct {
	Queue       string `msgpack:"queue"`
	QueueID     uint64 `msgpack:"queue_id"`
	Index       int    `msgpack:"index"`
	Node        string `msgpack:"node"`
	Incarnation uint64 `msgpack:"incarnation,omitempty"`
	MoveEpoch   uint64 `msgpack:"move_epoch,omitempty"`
}

// MoveReplicaCmd moves partition Index of queue Queue (id QueueID) from
// node From to node To: To is placed (in From's slot, or last when From
// was the preferred leader, whose role goes to the next replica) as a
// joining replica, and From becomes leaving. It applies only when the
// partition has no move in progress, From holds a replica, and To is a
// registered node that is not draining and holds none.
type MoveReplicaCmd struct {
	Queue   string `msgpack:"queue"`
	QueueID uint64 `msgpack:"queue_id"`
	Index   int    `msgpack:"index"`
	From    string `msgpack:"from"`
	To      string `msgpack:"to"`
}

// SetDrainingCmd sets whether node ID is draining.
type SetDrainingCmd struct {
	ID       string `msgpack:"id"`
	Draining bool   `msgpack:"draining"`
}

// partitionOf returns the partition a replica command names, or an error
// wrapping ErrStalePlacement when that queue is gone or was replaced.
func (f *FSM) partitionOf(queue string, queueID uint64, index int) (*Queue, *Partition, error) {
	q, ok := f.queues[queue]
	if !ok || q.ID != queueID {
		return nil, nil, fmt.Errorf("%w: queue %q (id %d) no longer exists", ErrStalePlacement, queue, queueID)
	}
	if index < 0 || index >= len(q.Partitions) {
		return nil, nil, fmt.Errorf("%w: queue %q has no partition %d", ErrInvalidArgument, queue, index)
	}
	return q, &q.Partitions[index], nil
}

// replicaCaughtUp takes a joining replica out of Joining.
func (f *FSM) replicaCaughtUp(c *ReplicaCmd) error {
	q, p, err := f.partitionOf(c.Queue, c.QueueID, c.Index)
	if err != nil {
		return err
	}
	if !slices.Contains(p.Joining, c.Node) {
		return fmt.Errorf("%w: node %s is not joining queue %q partition %d", ErrStalePlacement, c.Node, q.Name, p.Index)
	}
	if err := checkMoveEpoch(c, q, p); err != nil {
		return err
	}
	if n, ok := f.nodes[c.Node]; ok && n.Incarnation != c.Incarnation {
		return fmt.Errorf("%w: node %s is at incarnation %d, caught up at %d", ErrStalePlacement, c.Node, n.Incarnation, c.Incarnation)
	}
	p.Joining = deleteID(p.Joining, c.Node)
	f.touch(q)
	return nil
}

// checkMoveEpoch refuses a report made under another move epoch than p's
// (see Partition.MoveEpoch).
func checkMoveEpoch(c *ReplicaCmd, q *Queue, p *Partition) error {
	if c.MoveEpoch != 0 && c.MoveEpoch != p.MoveEpoch {
		return fmt.Errorf("%w: report on node %s of queue %q partition %d made in move epoch %d, the partition is at %d",
			ErrStalePlacement, c.Node, q.Name, p.Index, c.MoveEpoch, p.MoveEpoch)
	}
	return nil
}

// replicaLeft takes a leaving replica out of Leaving.
func (f *FSM) replicaLeft(c *ReplicaCmd) error {
	q, p, err := f.partitionOf(c.Queue, c.QueueID, c.Index)
	if err != nil {
		return err
	}
	if !slices.Contains(p.Leaving, c.Node) {
		return fmt.Errorf("%w: node %s is not leaving queue %q partition %d", ErrStalePlacement, c.Node, q.Name, p.Index)
	}
	if err := checkMoveEpoch(c, q, p); err != nil {
		return err
	}
	p.Leaving = deleteID(p.Leaving, c.Node)
	f.touch(q)
	return nil
}

// moveReplica starts a move (see MoveReplicaCmd).
func (f *FSM) moveReplica(c *MoveReplicaCmd) error {
	q, p, err := f.partitionOf(c.Queue, c.QueueID, c.Index)
	if err != nil {
		return err
	}
	if p.Moving() {
		return fmt.Errorf("%w: queue %q partition %d is already moving", ErrStalePlacement, q.Name, p.Index)
	}
	slot := slices.Index(p.Replicas, c.From)
	if slot < 0 {
		return fmt.Errorf("%w: node %s holds no replica of queue %q partition %d", ErrStalePlacement, c.From, q.Name, p.Index)
	}
	to, ok := f.nodes[c.To]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNodeNotFound, c.To)
	}
	if to.Draining {
		return fmt.Errorf("%w: node %s is draining", ErrInvalidArgument, c.To)
	}
	if slices.Contains(p.Replicas, c.To) {
		return fmt.Errorf("%w: node %s already holds queue %q partition %d", ErrStalePlacement, c.To, q.Name, p.Index)
	}
	f.loads[c.From].replicas--
	f.loads[c.To].replicas++
	if slot == 0 {
		f.loads[c.From].leaders--
		p.Replicas = append(slices.Delete(p.Replicas, 0, 1), c.To)
		f.loads[p.Replicas[0]].leaders++
	} else {
		p.Replicas[slot] = c.To
	}
	p.Joining = append(p.Joining, c.To)
	p.Leaving = append(p.Leaving, c.From)
	p.newMoveEpoch()
	f.touch(q)
	return nil
}

// preferLeader moves a caught-up replica to its partition's first slot,
// making it the preferred leader; the others keep their order.
func (f *FSM) preferLeader(c *ReplicaCmd) error {
	q, p, err := f.partitionOf(c.Queue, c.QueueID, c.Index)
	if err != nil {
		return err
	}
	slot := slices.Index(p.Replicas, c.Node)
	if slot < 0 || slices.Contains(p.Joining, c.Node) {
		return fmt.Errorf("%w: node %s holds no caught-up replica of queue %q partition %d", ErrStalePlacement, c.Node, q.Name, p.Index)
	}
	if slot == 0 {
		return nil
	}
	f.loads[p.Replicas[0]].leaders--
	f.loads[c.Node].leaders++
	p.Replicas = append([]string{c.Node}, slices.Delete(p.Replicas, slot, slot+1)...)
	f.touch(q)
	return nil
}

// setDraining sets a node's Draining flag.
func (f *FSM) setDraining(c *SetDrainingCmd) (Node, error) {
	n, ok := f.nodes[c.ID]
	if !ok {
		return Node{}, fmt.Errorf("%w: %q", ErrNodeNotFound, c.ID)
	}
	n.Draining = c.Draining
	return *n, nil
}

// markRejoining makes every replica on node id that has other replicas a
// joining one: the node lost its data, so it must catch up from the
// partition's leader before it votes again. A partition whose only
// replica is on id has nobody to catch up from: its replica starts again
// empty (the data of a single-replica partition on a lost disk is lost).
func (f *FSM) markRejoining(id string) {
	for _, q := range f.sortedQueues() {
		changed := false
		for i := range q.Partitions {
			p := &q.Partitions[i]
			if len(p.Replicas) < 2 || !slices.Contains(p.Replicas, id) || slices.Contains(p.Joining, id) {
				continue
			}
			p.Joining = append(p.Joining, id)
			p.newMoveEpoch()
			changed = true
		}
		if changed {
			f.touch(q)
		}
	}
}

// touch records that q's placement changed.
func (f *FSM) touch(q *Queue) {
	q.Version++
	q.UpdatedAt = f.clock
}

// deleteID returns ids without id; an emptied list is nil, as a restored
// snapshot holds it (omitempty): replicas must agree on results to the
// byte.
func deleteID(ids []string, id string) []string {
	ids = slices.DeleteFunc(ids, func(x string) bool { return x == id })
	if len(ids) == 0 {
		return nil
	}
	return ids
}
