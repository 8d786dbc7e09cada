// Package raftutil holds what the node's raft groups share, whichever
// package runs them: the partition replicas (package partition), the meta
// group (package node) and the raft transport (package transport).
//
// It owns three things, each defined here only:
//
//   - NewHCLogger, the adapter that lets libraries logging through hclog
//     (hashicorp/raft and its transport) write to a *slog.Logger;
//   - RaftLogger, the logger every raft group is given: raft's routine Info
//     lines demoted to Debug, its warnings and errors within one budget
//     for the whole process (LogBudget);
//   - ErrNotLeader and NotLeaderError, the "not the leader" error of any
//     group, naming the leader when it is known (partition re-exports
//     them under the same names, so errors.Is and errors.As work with
//     either).
//
// It must never import another Ferry package (partition, transport, node,
// meta, fsm, wire, ...): they import it, and an import back would make a
// cycle. It knows nothing of queues, of the wire protocol or of a
// particular group, keeps no state but the process's log budget, and
// starts no goroutine.
package raftutil
