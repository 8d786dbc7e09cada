package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Faults that strike in the middle of a replica move: a drain starts the
// moves, and once one is in flight a node that the move depends on is
// killed with SIGKILL. The move must complete or roll back, and a sampler
// running from the drain to the end of the heal checks that no partition
// ever has fewer caught-up voters than a majority of its target replica
// set (the check a move that trusted a catch-up too early would fail).
const (
	KillMetaMidMove   FaultKind = "kill-meta-mid-move"   // kill -9 the meta leader while a replica move is in flight
	KillLeaderMidMove FaultKind = "kill-leader-mid-move" // kill -9 a moving partition's leader while its move is in flight
)

// Bounds of the mid-move faults.
const (
	// moveStartWaitMax bounds the wait for a move to be in flight after
	// the drain.
	moveStartWaitMax = 20 * time.Second
	// moveSettleWaitMax bounds the wait, after the killed node is back,
	// for the drain to finish (every move completed or rolled back).
	moveSettleWaitMax = 60 * time.Second
	// sampleEvery is the sampler's period.
	sampleEvery = 200 * time.Millisecond
	// caughtUpSlack is how far (in entries) behind its leader a voter may
	// be sampled and still count as caught up: the replicas are read one
	// node after the other while the workload runs. A voter promoted
	// before it had the log lags by the whole log.
	caughtUpSlack = 2048
	// dipsListed bounds the dips a fault record keeps.
	dipsListed = 8
	// leaderWaitMax bounds the wait for a moving partition's leader to be
	// agreed on (its replicas may be electing one).
	leaderWaitMax = 3 * time.Second
)

// VUnderMajority: a sampler saw a partition with fewer caught-up voters
// than a majority of its target replica set while replicas moved.
const VUnderMajority = "under-majority-of-caught-up-voters"

// killMidMove drains a node, waits until a move is in flight, and kills
// the meta leader (KillMetaMidMove) or the leader of a moving partition
// (KillLeaderMidMove). The heal restarts the killed node, waits until the
// drain has settled, and undrains.
func (in *Injector) killMidMove(ctx context.Context, rng *rand.Rand, kind FaultKind, rec *FaultRecord) (func() error, error) {
	c := in.c
	meta := c.MetaLeader(ctx)
	var candidates []*Node
	for _, n := range c.Up() {
		if n != meta {
			candidates = append(candidates, n)
		}
	}
	drained := pickNode(rng, candidates)
	if drained == nil || meta == nil {
		return nil, fmt.Errorf("no meta leader, or no other node up")
	}
	admin, err := c.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	smp := startMajoritySampler(ctx, c, admin)
	drained.marker("drain (mid-move fault)")
	if _, err := retryAdmin(ctx, func(cc context.Context) (client.NodeStatus, error) { return admin.DrainNode(cc, drained.ID) }); err != nil {
		smp.stop()
		admin.Close()
		return nil, err
	}
	heal := func() error { return in.settleMidMove(ctx, admin, smp, drained, nil, rec) }
	moving, ok := waitMoving(ctx, admin)
	if !ok {
		rec.Targets = []string{drained.ID}
		rec.Skipped = fmt.Sprintf("no replica move started within %v of draining %s (no node to move to?)", moveStartWaitMax, drained.ID)
		return nil, heal()
	}
	victim := meta
	what := "meta leader"
	if kind == KillLeaderMidMove {
		victim = c.PartitionLeader(ctx, PartRef{moving.Queue, moving.Partition})
		for deadline := now().Add(leaderWaitMax); victim == nil && now().Before(deadline); {
			sleep(ctx, 100*time.Millisecond) // an election of that partition is settling
			victim = c.PartitionLeader(ctx, PartRef{moving.Queue, moving.Partition})
		}
		what = fmt.Sprintf("leader of %s/%d (joining %v, leaving %v)", moving.Queue, moving.Partition, moving.Joining, moving.Leaving)
	} else if m := c.MetaLeader(ctx); m != nil {
		victim = m
	}
	if victim == nil {
		rec.Targets = []string{drained.ID}
		return heal, fmt.Errorf("no %s found", what)
	}
	rec.Targets = []string{drained.ID, victim.ID}
	rec.Detail = fmt.Sprintf("%s drained; kill -9 of the %s", drained.ID, what)
	if err := c.Kill(victim); err != nil {
		return heal, err
	}
	return func() error { return in.settleMidMove(ctx, admin, smp, drained, victim, rec) }, nil
}

// settleMidMove restarts the killed node (if any), waits until the
// drained node hosts nothing or its drain is stuck with no move in
// flight, undrains it, stops the sampler and records what it saw.
func (in *Injector) settleMidMove(ctx context.Context, admin *client.Client, smp *majoritySampler, drained, killed *Node, rec *FaultRecord) error {
	defer admin.Close()
	var errs []error
	if killed != nil {
		if err := in.c.Start(killed); err != nil {
			errs = append(errs, err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, moveSettleWaitMax)
	settled := false
	for sctx.Err() == nil && !settled {
		if l, err := admin.ListNodes(sctx); err == nil {
			for _, st := range l.Nodes {
				if st.ID == drained.ID {
					settled = (st.Replicas == 0 && st.Leaving == 0) || (st.Stuck != "" && l.MovesInFlight == 0)
				}
			}
		}
		if !settled {
			sleep(sctx, 250*time.Millisecond)
		}
	}
	cancel()
	if !settled {
		errs = append(errs, fmt.Errorf("%s: moves not settled %v after the heal", drained.ID, moveSettleWaitMax))
	}
	drained.marker("undrain (mid-move fault)")
	uctx, ucancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := retryAdmin(uctx, func(cc context.Context) (client.NodeStatus, error) { return admin.UndrainNode(cc, drained.ID) })
	ucancel()
	if err != nil {
		errs = append(errs, err)
	}
	rec.MajorityDips, rec.MajoritySamples = smp.stop()
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// waitMoving waits until a partition move is in flight and returns it.
func waitMoving(ctx context.Context, admin *client.Client) (client.MovingInfo, bool) {
	wctx, cancel := context.WithTimeout(ctx, moveStartWaitMax)
	defer cancel()
	for wctx.Err() == nil {
		if l, err := admin.ListNodes(wctx); err == nil {
			for _, m := range l.Moving {
				if len(m.Joining) > 0 {
					return m, true
				}
			}
		}
		sleep(wctx, 50*time.Millisecond)
	}
	return client.MovingInfo{}, false
}

// majoritySampler checks, every sampleEvery, that each partition has at
// least a majority of the voters its leader commits against (the
// leader's latest configuration; the catalog's target replica set when
// the leader does not say) as caught-up voters among the replicas it can
// see: not abstaining, and within caughtUpSlack entries of the leader. A
// partition without an agreed leader is not judged (an election is
// settling), nor one whose answers are not of one moment (a replica
// applied past the leader: the nodes were asked at different times).
type majoritySampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	dips    []string
	samples int
}

func startMajoritySampler(ctx context.Context, c *Cluster, admin *client.Client) *majoritySampler {
	sctx, cancel := context.WithCancel(ctx)
	s := &majoritySampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for sctx.Err() == nil {
			s.sample(sctx, c, admin)
			sleep(sctx, sampleEvery)
		}
	}()
	return s
}

// stop ends sampling and returns the dips seen (at most dipsListed) and
// the number of samples taken.
func (s *majoritySampler) stop() ([]string, int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dips, s.samples
}

func (s *majoritySampler) sample(ctx context.Context, c *Cluster, admin *client.Client) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	qs, err := admin.ListQueues(qctx, "")
	cancel()
	if err != nil {
		return
	}
	v := c.View(ctx)
	if ctx.Err() != nil {
		return
	}
	var dips []string
	for _, q := range qs {
		for _, p := range q.Partitions {
			if d := v.majorityDip(PartRef{q.Name, p.Index}, p.Replicas); d != "" {
				dips = append(dips, d)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, d := range dips {
		if len(s.dips) < dipsListed {
			s.dips = append(s.dips, fmt.Sprintf("%s %s", now().Format("15:04:05.000"), d))
		}
	}
}

// majorityDip describes p when fewer than a majority of its voters are
// caught up in the view, and returns "" otherwise (or when p has no
// agreed leader, or the view is not of one moment). The voters are the
// leader's latest configuration, or target when the leader lists none.
func (v view) majorityDip(p PartRef, target []string) string {
	leader := v.leader(p)
	if leader == "" || len(target) == 0 {
		return ""
	}
	var lead uint64
	voters, fromLeader := target, false
	for _, r := range v[p] {
		if r.node == leader {
			lead = r.AppliedIndex
			if len(r.Voters) > 0 {
				voters, fromLeader = r.Voters, true
			}
		}
	}
	var caughtUp, seen []string
	for _, r := range v[p] {
		if r.AppliedIndex > lead+caughtUpSlack {
			return "" // asked after the leader, far enough to matter
		}
		seen = append(seen, fmt.Sprintf("%s:%s@%d", r.node, r.Suffrage, r.AppliedIndex))
		// A replica's own configuration may trail the leader's by the
		// entries in flight: the leader's list wins when it gives one.
		votes := slices.Contains(voters, r.node) && (fromLeader || r.Suffrage == "voter")
		if votes && !r.Abstaining && r.AppliedIndex+caughtUpSlack >= lead {
			caughtUp = append(caughtUp, r.node)
		}
	}
	if need := len(voters)/2 + 1; len(caughtUp) < need {
		sort.Strings(seen)
		return fmt.Sprintf("%s: %d caught-up voters %v, %d needed of voters %v, target %v (replicas seen %v)",
			p, len(caughtUp), caughtUp, need, voters, target, seen)
	}
	return ""
}
