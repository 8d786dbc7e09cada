package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// Replicas of a group that keeps applying entries give the same digest
// for one index, each computed when it applied that entry: asked for an
// index ahead of them all while sends go on, every replica answers, and
// the answers agree. An index a replica went past fails with
// ErrDigestPassed; a request that waits too long ends with its context.
func TestPartition_DigestAtAgreesWhileEntriesKeepComing(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	li := c.leader()
	leader := c.reps[li]
	send(t, leader, "warm", 3)
	applied, _ := leader.Digest()
	at := applied + 5
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			send(t, leader, fmt.Sprintf("flow%d", i), 1)
		}
	})
	digests := make([][32]byte, len(c.reps))
	errs := make([]error, len(c.reps))
	var asks sync.WaitGroup
	for i, p := range c.reps {
		asks.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			digests[i], errs[i] = p.DigestAt(ctx, at)
		})
	}
	asks.Wait()
	close(stop)
	wg.Wait()
	for i := range c.reps {
		if errs[i] != nil {
			t.Fatalf("replica %d: DigestAt(%d): %v", i, at, errs[i])
		}
		if digests[i] != digests[0] {
			t.Fatalf("replica %d's digest at %d differs from replica 0's", i, at)
		}
	}
	if _, err := leader.DigestAt(ctxT(t), 1); !errors.Is(err, ErrDigestPassed) {
		t.Fatalf("DigestAt of an index long applied: %v, want ErrDigestPassed", err)
	}
	now, _ := leader.Digest()
	if d, err := leader.DigestAt(ctxT(t), now); err != nil || d == ([32]byte{}) {
		t.Fatalf("DigestAt of the index just applied: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := leader.DigestAt(ctx, now+1_000_000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DigestAt of a far index: %v, want the context's deadline", err)
	}
	far, stopFar := context.WithCancel(context.Background())
	var held sync.WaitGroup
	for range digestWaitsMax {
		held.Go(func() { _, _ = leader.DigestAt(far, now+1_000_000) })
	}
	testwaitDigestWaits(t, leader, digestWaitsMax)
	if _, err := leader.DigestAt(ctxT(t), now+1_000_000); !errors.Is(err, ErrDigestBusy) {
		t.Fatalf("request beyond %d waiting: %v, want ErrDigestBusy", digestWaitsMax, err)
	}
	stopFar()
	held.Wait()
	leader.mu.Lock()
	waiting := len(leader.digestWaits)
	leader.mu.Unlock()
	if waiting != 0 {
		t.Fatalf("%d requests left waiting after their contexts ended", waiting)
	}
}

// testwaitDigestWaits waits until n DigestAt requests wait on p.
func testwaitDigestWaits(t *testing.T, p *Partition, n int) {
	t.Helper()
	testwait.Until(t, 5*time.Second, fmt.Sprintf("%d digest requests waiting", n), func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.digestWaits) == n
	})
}
