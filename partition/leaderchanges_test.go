package partition

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// The replicas sharing a LeaderChanges counter count every change of
// leader they observe: a new leader moves it, and so does a leader's
// stop (its followers lose it), so that a node rebuilds its leader table
// only when the count moved.
func TestPartition_LeaderChangesCountsElections(t *testing.T) {
	var changes atomic.Uint64
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaderChanges = &changes })
	first := c.leader()
	elected := changes.Load()
	if elected == 0 {
		t.Fatal("an election moved no leader-change count")
	}
	c.stop(first)
	testwait.Until(t, 10*time.Second, "a new leader", func() bool {
		for i, p := range c.reps {
			if i != first && p != nil && p.IsLeader() {
				return true
			}
		}
		return false
	})
	if changes.Load() <= elected {
		t.Fatalf("leader-change count %d after a failover, %d before", changes.Load(), elected)
	}
}
