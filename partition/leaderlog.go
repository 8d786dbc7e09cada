package partition

import (
	"github.com/hashicorp/raft"
)

// leaderLogBuffer is how many leadership observations wait to be logged;
// more are dropped by raft's observer rather than block raft.
const leaderLogBuffer = 16

// startLeaderLog logs, at Info, every change of the group's leader as this
// replica learns it, with the term and the applied index: raft's own
// messages about elections and transfers are at Debug (and a leadership
// transfer logs nothing above it), so without this an operator (or a chaos
// run's logs) cannot tell who led a partition when.
func (p *Partition) startLeaderLog() {
	ch := make(chan raft.Observation, leaderLogBuffer)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	p.raft.RegisterObserver(obs)
	p.loops.Add(1)
	go func() {
		defer p.loops.Done()
		defer p.raft.DeregisterObserver(obs)
		for {
			select {
			case <-p.closing:
				return
			case o := <-ch:
				lo := o.Data.(raft.LeaderObservation)
				leader := string(lo.LeaderID)
				if leader == "" {
					leader = "(none)"
				}
				p.logger.Info("partition leader changed", "leader", leader,
					"term", p.raft.Stats()["term"], "applied_index", p.raft.AppliedIndex())
			}
		}
	}()
}
