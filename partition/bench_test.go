package partition

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

// BenchmarkPartition_ConcurrentSends measures confirmed single-message
// sends per second through a three-replica partition on loopback, with 1,
// 16 and 64 concurrent senders merged by Partition.Send: the raft round
// trip, group commit and fsyncs included, the client protocol excluded.
func BenchmarkPartition_ConcurrentSends(b *testing.B) {
	for _, proposers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			c := newTestCluster(&testing.T{}, 3, func(cfg *Config) { cfg.CommitTimeout = 50 * time.Millisecond })
			defer c.close()
			p := c.reps[c.leader()]
			body := make([]byte, 256)
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range proposers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						msg := fsm.NewMessage{ID: fmt.Sprintf("w%d-%d", w, i), Body: body}
						if _, err := p.Send(context.Background(), []fsm.NewMessage{msg}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
