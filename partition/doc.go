// Package partition runs one replica of one queue partition: a hashicorp/raft
// group whose state machine is an fsm.FSM.
//
// Where a replica keeps things: its raft entries, term and vote are in the
// node's shared raft log store (wal/raftlog, Config.Logs), one log for
// every group the node hosts. A message's payload stays inside the send
// entry that carried it (replicaBodies, bodies.go); only payloads that
// arrived in a snapshot install, or were copied out of old entries so the
// log can be reclaimed, are body records in the replica's own wal.Log
// under Config.Dir. Snapshots (metadata and payload locations only) are
// under Config.Dir too. docs/storage.md follows a body through all this.
//
// It owns the single proposal path of the partition (Propose): commands are
// stamped with the leader's clock, replicated, applied, and their FSM result
// unpacked; raft errors are mapped to this package's errors. Callers use
// the typed request methods built on it (Send, Ack, ReceiveAck, Receive,
// Extend, Nack, Reject, RedriveDead, DeleteDead, Purge), which check their
// arguments with the FSM's own exported rules (fsm.CheckBatch,
// fsm.ValidateReceive, fsm.DeadFilter.Validate, ...) first, so that a
// request the FSM would refuse takes no place in the raft log.
//
// On the leader it also proposes Tick at the FSM's next deadline, so leases
// expire and delayed messages become ready without any client activity,
// and it wakes long-poll receivers when messages become eligible.
//
// An idle replica, leader or follower, runs no goroutine or timer of its
// own and proposes nothing: the process's shared scheduler (scheduler.go)
// logs leader changes, arms the tick of a new leader with a deadline
// pending and runs every replica's periodic compaction (payloads copied
// out of old entries, body records compacted); the proposal batchers run
// while requests come, the tick's timer only while a deadline is pending
// on a leader, a snapshot by size while it is taken. Nor does an idle
// replica hold open files of its body records: every replica's wal.Log
// opens its segment files through one wal.FileCache (Config.WALFiles, by
// default the process's SharedWALFiles), which bounds how many are open
// at once across replicas and closes those of idle replicas.
//
// It must never know about the client protocol, the meta catalog or other
// partitions: the node package wires those together.
package partition
