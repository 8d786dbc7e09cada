package partition

import (
	"fmt"
	"io"
	"os"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// replicaSnapshots is the replica's raft snapshot store. Snapshots are
// written in the FSM's local form (metadata and payload locations, no
// payload bytes: see fsm.Snapshot.PersistLocal), which only this replica
// can restore. raft opens a snapshot for two reasons: to restore it at
// start-up (inside raft.NewRaft, while Partition.starting is set), when the
// local form is what is wanted; and to send it to a follower that lacks the
// log, which needs the full form. For the second, Open writes the full form
// to an unlinked temporary file (raft must announce the size before it
// streams) and returns that; the follower stores and restores the full
// form, writing the payloads as its own body records.
type replicaSnapshots struct {
	raft.SnapshotStore
	p *Partition
}

// Open opens snapshot id: as stored while the replica starts, in the full
// form otherwise.
func (s *replicaSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil || s.p.starting.Load() {
		return meta, rc, err
	}
	defer rc.Close()
	full, size, err := s.p.writeFullSnapshot(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("partition %s: snapshot %s in full form: %w", s.p.cfg.GroupID, id, err)
	}
	out := *meta
	out.Size = size
	return &out, full, nil
}

// writeFullSnapshot copies a persisted snapshot (the applied-index header,
// then the FSM's snapshot in either form) into an unlinked temporary file
// in the full form, and returns the file positioned at its start.
func (p *Partition) writeFullSnapshot(r io.Reader) (*os.File, int64, error) {
	tmp, err := os.CreateTemp(p.cfg.Dir, "snapshot-send-*")
	if err != nil {
		return nil, 0, err
	}
	os.Remove(tmp.Name()) // the open file lives until Close
	fail := func(err error) (*os.File, int64, error) {
		tmp.Close()
		return nil, 0, err
	}
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return fail(fmt.Errorf("header: %w", err))
	}
	if _, err := tmp.Write(head[:]); err != nil {
		return fail(err)
	}
	release := p.bodies.Pin()
	err = fsm.WriteFullSnapshot(r, tmp, p.bodies)
	release()
	if err != nil {
		return fail(err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return fail(err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	return tmp, size, nil
}
