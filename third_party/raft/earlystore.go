package raft

import (
	"fmt"
	"runtime"
	"time"
)

// Ferry fork: a leader that sends new entries to its followers while it
// writes them to its own log (Config.ReplicateBeforeStore). See FORK.md.

// LogStager is a LogStore whose entries can be made readable before they
// are durable, so that a leader's replicators can send entries its own
// write has not finished. The leader stages a batch, wakes its
// replicators, stores the batch (StoreLogs, durable on return) and then
// unstages it, whatever StoreLogs returned. Only the leader's main loop
// stages, one batch at a time.
type LogStager interface {
	LogStore
	// StageLogs makes logs readable through GetLog until UnstageLogs.
	StageLogs(logs []*Log)
	// UnstageLogs forgets the staged batch; entries StoreLogs stored
	// stay readable from the store.
	UnstageLogs()
}

// notifyReplicators tells the replicators of new entries, waking quiesced
// followers first.
func (r *Raft) notifyReplicators(now time.Time) {
	r.lastAppendNanos.Store(now.UnixNano())
	for _, f := range r.leaderState.replState {
		r.wakeFollower(f)
		asyncNotifyCh(f.triggerCh)
	}
}

// replicateThenStore is dispatchLogs' write for ReplicateBeforeStore: the
// entries are staged and sent to the followers, then written locally. The
// leader counts itself towards their commit once the write returns; the
// main loop, which applies committed entries, waits for the write, so
// nothing is applied before the leader holds it. A failed write steps down
// with the last log put back; the followers may hold the entries and a
// new leader may commit them, so the futures get ErrLeadershipLost (an
// unknown outcome), with the store's error.
func (r *Raft) replicateThenStore(stager LogStager, applyLogs []*logFuture, logs []*Log, now time.Time) {
	prevIndex, prevTerm := r.getLastLog()
	last := logs[len(logs)-1]
	if last.Index != prevIndex+uint64(len(logs)) {
		panic(fmt.Sprintf("raft: dispatching entries up to %d after last log %d", last.Index, prevIndex))
	}
	stager.StageLogs(logs)
	r.setLastLog(last.Index, last.Term)
	r.notifyReplicators(now)
	// Let the replicators just woken send before the write: they wait on
	// this goroutine's processor, which a blocking fdatasync holds until
	// the runtime takes it back (tens of microseconds), while the
	// followers' round, not this write, is what a commit waits for.
	runtime.Gosched()

	err := r.logs.StoreLogs(logs)
	stager.UnstageLogs()
	if err != nil {
		r.logger.Error("failed to commit logs after sending them", "error", err)
		r.setLastLog(prevIndex, prevTerm)
		for _, applyLog := range applyLogs {
			applyLog.respond(fmt.Errorf("%w: the local write failed after the entries were sent: %w", ErrLeadershipLost, err))
		}
		r.setState(Follower)
		return
	}
	r.leaderState.commitment.match(r.localID, last.Index)
}

// countKnownMatches gives the commitment, after a configuration change,
// what each voter of configuration is known to hold. The commitment
// starts a server that was not a voter at 0 and learns its match only
// from its next acknowledged entries; with ReplicateBeforeStore the
// followers get the configuration entry while the leader writes it, so a
// learner being promoted can acknowledge the very entry that promotes it
// before the commitment counts it. In an idle group no further entry
// comes, the entry never commits, and every later configuration change
// waits behind it. A follower's match is a fact about its log whatever
// its suffrage was when it answered, so counting it is what the
// commitment would have counted had the answer come a moment later.
// A replicator raises the follower's match before it tells the
// commitment, so an answer is counted here or by the commitment itself:
// if the commitment ignored it (before setConfiguration), the raise came
// before this read.
func (r *Raft) countKnownMatches(configuration Configuration) {
	for _, server := range configuration.Servers {
		if server.Suffrage != Voter {
			continue
		}
		if f := r.leaderState.replState[server.ID]; f != nil {
			if m := f.match.Load(); m > 0 {
				r.leaderState.commitment.match(server.ID, m)
			}
		}
	}
}
