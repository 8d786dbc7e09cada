package meta

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// snapshotVersion is the format version of persisted snapshots.
const snapshotVersion = 1

// Snapshot is a frozen deep copy of the catalog, taken by FSM.Snapshot. Its
// Persist may run on another goroutine while the FSM applies later
// commands.
//
// The persisted form is a msgpack stream: a header (version, clock, last
// queue id, counts), then the nodes sorted by id, then the queues sorted by
// name. Equal catalogs persist to equal bytes.
type Snapshot struct {
	header  snapHeader
	nodes   []Node
	queues  []Queue
	removed []removedNode
}

type snapHeader struct {
	Version     int    `msgpack:"version"`
	Clock       int64  `msgpack:"clock"`
	LastQueueID uint64 `msgpack:"last_queue_id"`
	Nodes       int    `msgpack:"nodes"`
	Queues      int    `msgpack:"queues"`
	// Removed counts the removed-node tombstones that follow the queues
	// (absent in snapshots written before nodes could be removed).
	Removed int `msgpack:"removed,omitempty"`
}

// removedNode is one tombstone of a snapshot.
type removedNode struct {
	ID string `msgpack:"id"`
	At int64  `msgpack:"at"`
}

// Snapshot freezes the current catalog. It copies every node and queue, so
// later commands never show through.
func (f *FSM) Snapshot() *Snapshot {
	s := &Snapshot{
		header: snapHeader{Version: snapshotVersion, Clock: f.clock, LastQueueID: f.lastQueueID},
		nodes:  f.Nodes(),
		queues: f.Queues(),
	}
	for _, id := range f.RemovedNodes() {
		s.removed = append(s.removed, removedNode{ID: id, At: f.removed[id]})
	}
	s.header.Nodes, s.header.Queues, s.header.Removed = len(s.nodes), len(s.queues), len(s.removed)
	return s
}

// Persist writes the snapshot to w. It may be called more than once.
func (s *Snapshot) Persist(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := msgpack.NewEncoder(bw)
	enc.UseCompactInts(true)
	if err := enc.Encode(&s.header); err != nil {
		return fmt.Errorf("persist meta snapshot header: %w", err)
	}
	for i := range s.nodes {
		if err := enc.Encode(&s.nodes[i]); err != nil {
			return fmt.Errorf("persist meta snapshot: node %s: %w", s.nodes[i].ID, err)
		}
	}
	for i := range s.queues {
		if err := enc.Encode(&s.queues[i]); err != nil {
			return fmt.Errorf("persist meta snapshot: queue %s: %w", s.queues[i].Name, err)
		}
	}
	for i := range s.removed {
		if err := enc.Encode(&s.removed[i]); err != nil {
			return fmt.Errorf("persist meta snapshot: removed node %s: %w", s.removed[i].ID, err)
		}
	}
	return bw.Flush()
}

// Release ends the snapshot's use. The snapshot holds nothing but its own
// copy, so this only exists to mirror the partition snapshots; it is safe
// to call more than once.
func (s *Snapshot) Release() {}

// Restore replaces the whole catalog with the snapshot read from r, which
// must end where the snapshot ends. The snapshot is checked as a whole
// (names, configs, placement on registered nodes, unique ids) before it
// replaces anything: on error the FSM is unchanged, and the error wraps
// ErrSnapshotFormat.
func (f *FSM) Restore(r io.Reader) error {
	br := bufio.NewReader(r)
	dec := msgpack.NewDecoder(br)
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("%w: header: %w", ErrSnapshotFormat, err)
	}
	if h.Version != snapshotVersion {
		return fmt.Errorf("%w: version %d (want %d)", ErrSnapshotFormat, h.Version, snapshotVersion)
	}
	if h.Removed < 0 || h.Removed > RemovedMax {
		return fmt.Errorf("%w: %d removed nodes (limit %d)", ErrSnapshotFormat, h.Removed, RemovedMax)
	}
	if h.Nodes < 0 || h.Nodes > NodesMax || h.Queues < 0 || h.Queues > QueuesMax {
		return fmt.Errorf("%w: %d nodes and %d queues (limits %d, %d)", ErrSnapshotFormat, h.Nodes, h.Queues, NodesMax, QueuesMax)
	}
	g := New()
	g.clock, g.lastQueueID = h.Clock, h.LastQueueID
	for i := range h.Nodes {
		n := new(Node)
		if err := dec.Decode(n); err != nil {
			return fmt.Errorf("%w: node %d of %d: %w", ErrSnapshotFormat, i, h.Nodes, err)
		}
		if _, dup := g.nodes[n.ID]; dup {
			return fmt.Errorf("%w: node %q twice", ErrSnapshotFormat, n.ID)
		}
		g.nodes[n.ID] = n
	}
	for i := range h.Queues {
		q := new(Queue)
		if err := dec.Decode(q); err != nil {
			return fmt.Errorf("%w: queue %d of %d: %w", ErrSnapshotFormat, i, h.Queues, err)
		}
		if _, dup := g.queues[q.Name]; dup {
			return fmt.Errorf("%w: queue %q twice", ErrSnapshotFormat, q.Name)
		}
		g.queues[q.Name] = q
	}
	for i := range h.Removed {
		var r removedNode
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("%w: removed node %d of %d: %w", ErrSnapshotFormat, i, h.Removed, err)
		}
		if _, dup := g.removed[r.ID]; dup {
			return fmt.Errorf("%w: removed node %q twice", ErrSnapshotFormat, r.ID)
		}
		g.removed[r.ID] = r.At
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing bytes after the catalog (read error %v)", ErrSnapshotFormat, err)
	}
	g.recount()
	if err := g.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
	}
	*f = *g
	return nil
}
