package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Faults that change the cluster's shape rather than break it: the
// placement of partitions changes under the workload, and every move must
// keep every guarantee the checker checks.
const (
	DrainNode      FaultKind = "drain-node"      // drain a node (its replicas and leaderships move away), then undrain it
	RollingRestart FaultKind = "rolling-restart" // SIGTERM and restart every node in turn, each once safe-to-stop says so
)

// drainWaitMax bounds how long a drain fault waits for the node to empty;
// safeWaitMax how long a rolling restart waits for a node to be safe to
// stop, and backWaitMax for it to be back.
const (
	drainWaitMax = 40 * time.Second
	safeWaitMax  = 30 * time.Second
	backWaitMax  = 30 * time.Second
)

// adminClient dials the cluster as its admin.
func (c *Cluster) adminClient(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, c.ClientAddrs(), client.WithClientName("chaos-shape"), client.WithDialTimeout(time.Second),
		client.WithTLS(c.ClientTLS), client.WithToken(c.AdminToken))
}

// drainFault drains a random node and waits (bounded) until it hosts
// nothing; the heal undrains it, and balancing gives it a share again.
func (in *Injector) drainFault(ctx context.Context, rng *rand.Rand, rec *FaultRecord) (func() error, error) {
	n := pickNode(rng, in.c.Up())
	if n == nil {
		return nil, fmt.Errorf("no node up")
	}
	admin, err := in.c.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	rec.Targets = []string{n.ID}
	n.marker("drain")
	undrain := func() error {
		defer admin.Close()
		n.marker("undrain")
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := retryAdmin(uctx, func(c context.Context) (client.NodeStatus, error) { return admin.UndrainNode(c, n.ID) })
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, drainWaitMax)
	defer cancel()
	if _, err := retryAdmin(dctx, func(c context.Context) (client.NodeStatus, error) { return admin.DrainNode(c, n.ID) }); err != nil {
		return undrain, err
	}
	start := time.Now()
	for dctx.Err() == nil {
		if st, ok := nodeStatus(dctx, admin, n.ID); ok && st.Replicas == 0 && st.Leaving == 0 && st.Leading == 0 {
			rec.Detail = fmt.Sprintf("drained in %v", time.Since(start).Round(100*time.Millisecond))
			return undrain, nil
		} else if ok && st.Stuck != "" {
			rec.Detail = "drain cannot finish: " + st.Stuck
			return undrain, nil
		}
		sleep(dctx, 250*time.Millisecond)
	}
	rec.Detail = fmt.Sprintf("not drained after %v", drainWaitMax)
	return undrain, fmt.Errorf("%s not drained after %v", n.ID, drainWaitMax)
}

// rollingRestart restarts every node in turn: it waits until the node is
// safe to stop, stops it with SIGTERM (it hands its leaderships over),
// starts it again and waits until gossip sees it alive. The restarts are
// done when it returns; the heal does nothing.
func (in *Injector) rollingRestart(ctx context.Context, rec *FaultRecord) (func() error, error) {
	admin, err := in.c.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	start := time.Now()
	for _, n := range in.c.Nodes {
		if !n.Running() {
			continue
		}
		rec.Targets = append(rec.Targets, n.ID)
		sctx, cancel := context.WithTimeout(ctx, safeWaitMax)
		for sctx.Err() == nil {
			if ans, err := admin.SafeToStop(sctx, n.ID); err == nil && ans.Safe {
				break
			}
			sleep(sctx, 250*time.Millisecond)
		}
		safe := sctx.Err() == nil
		cancel()
		if !safe {
			return nil, fmt.Errorf("%s not safe to stop after %v", n.ID, safeWaitMax)
		}
		n.marker("rolling restart: SIGTERM")
		in.c.Stop(n, 20*time.Second)
		if err := in.c.Start(n); err != nil {
			return nil, err
		}
		bctx, cancel := context.WithTimeout(ctx, backWaitMax)
		for bctx.Err() == nil {
			if st, ok := nodeStatus(bctx, admin, n.ID); ok && st.State.String() == "alive" {
				break
			}
			sleep(bctx, 250*time.Millisecond)
		}
		back := bctx.Err() == nil
		cancel()
		if !back {
			return nil, fmt.Errorf("%s not back after %v", n.ID, backWaitMax)
		}
	}
	rec.Detail = fmt.Sprintf("%d nodes restarted one by one in %v", len(rec.Targets), time.Since(start).Round(100*time.Millisecond))
	return nil, nil
}

// nodeStatus returns one node's status from node ls.
func nodeStatus(ctx context.Context, admin *client.Client, id string) (client.NodeStatus, bool) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	l, err := admin.ListNodes(rctx)
	if err != nil {
		return client.NodeStatus{}, false
	}
	for _, st := range l.Nodes {
		if st.ID == id {
			return st, true
		}
	}
	return client.NodeStatus{}, false
}

// retryAdmin retries an admin call until it succeeds or ctx ends (a meta
// leader may be changing).
func retryAdmin[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := call(cctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		sleep(ctx, 200*time.Millisecond)
	}
}
