// Package meta is the deterministic state machine of the cluster's meta Raft
// group, the group every node belongs to.
//
// It owns the cluster catalog: the registered nodes with the addresses they
// advertise, and the queues with their configuration, their meta-assigned
// ids, and the placement of each partition's replicas on nodes. From that
// catalog every node learns which partition replicas it must host
// (Assignments) and which Raft group id each one uses (GroupID).
//
// Every change arrives as a Command carrying the proposing leader's clock.
// Applying the same commands in the same order yields the same catalog and
// the same answers on every member: the state machine's clock is the largest
// time any command carried, so timestamps never run backwards, and placement
// is a pure function of the catalog (see FSM.ApplyCommand and the placement
// rule on CmdCreateQueue).
//
// The package must never read the wall clock, draw random numbers, start
// goroutines, touch the network, know about Raft, or let map iteration order
// influence a result or an encoded byte. An entry that cannot be decoded is a
// corrupted log and makes Apply panic: it is never skipped.
//
// An FSM is not safe for concurrent use; its owner serialises calls. The one
// exception is Snapshot: the returned Snapshot is a frozen deep copy that may
// be persisted on another goroutine while later commands are applied.
package meta
