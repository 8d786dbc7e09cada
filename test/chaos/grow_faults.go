package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Faults that change the cluster's membership under the workload: a node
// lost for good is replaced, and nodes join and leave again. Both run the
// majority sampler of the mid-move faults, since every replica they move
// goes through the same learner-first protocol.
const (
	ReplaceNode FaultKind = "replace-node" // kill -9 a node for good, data gone: its replicas are rebuilt (or reported under-replicated), then a new node takes its place
	AddNodes    FaultKind = "add-nodes"    // two new nodes join and get their share of replicas and leaders; then they are drained and removed
)

// DeadNodeTimeout is the -dead-node-timeout of chaos runs: short, so that
// a node lost for good is replaced within the run, and longer than any
// other fault keeps a node down, so that those faults move nothing.
const DeadNodeTimeout = 15 * time.Second

// SpareSlots is the number of node slots a run lays out for the faults
// that add nodes; a fault finding none left is skipped.
const SpareSlots = 8

// Bounds of the membership faults.
const (
	// rebuildWaitMax bounds the wait for a lost node's replicas to be
	// rebuilt elsewhere (or reported with nowhere to go).
	rebuildWaitMax = DeadNodeTimeout + 60*time.Second
	// balanceWaitMax bounds the wait for joined nodes to get their share,
	// and for drained ones to empty.
	balanceWaitMax = 90 * time.Second
)

// replaceNode kills a node for good and wipes it, waits until the cluster
// has rebuilt its replicas on the live nodes (or reports the partitions it
// cannot rebuild as under-replicated, with a reason), then adds a new node
// and waits until every partition is whole and the live nodes are
// balanced; last, it removes the lost node from the catalog, as an
// operator would.
func (in *Injector) replaceNode(ctx context.Context, rng *rand.Rand, rec *FaultRecord) (func() error, error) {
	c := in.c
	if len(c.Spares) == 0 {
		rec.Skipped = "no spare node slot left"
		return nil, nil
	}
	lost := pickNode(rng, c.Up())
	if lost == nil {
		return nil, fmt.Errorf("no node up")
	}
	admin, err := c.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	smp := startMajoritySampler(ctx, c, admin)
	defer func() { rec.MajorityDips, rec.MajoritySamples = smp.stop() }()
	rec.Targets = []string{lost.ID}
	before := c.snapshotBytesSent(ctx)
	start := now()
	if err := c.Kill(lost); err != nil {
		return nil, err
	}
	if err := c.Wipe(lost); err != nil {
		return nil, err
	}
	if err := c.Retire(lost); err != nil {
		return nil, err
	}
	rebuilt, err := waitNodes(ctx, admin, rebuildWaitMax, func(l *client.NodeList) string { return rebuiltOrReported(l, lost.ID) })
	if err != nil {
		return nil, fmt.Errorf("%s lost: %w", lost.ID, err)
	}
	first := fmt.Sprintf("%s after %v", rebuilt, now().Sub(start).Round(100*time.Millisecond))
	added, err := c.AddSpare()
	if err != nil {
		return nil, err
	}
	rec.Targets = append(rec.Targets, added.ID)
	joined := now()
	live := c.memberIDs()
	if _, err := waitNodes(ctx, admin, balanceWaitMax, func(l *client.NodeList) string { return balanced(l, live) }); err != nil {
		return nil, fmt.Errorf("%s added: %w", added.ID, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = retryAdmin(rctx, func(cc context.Context) (int, error) { return admin.RemoveNode(cc, lost.ID) })
	cancel()
	if err != nil {
		return nil, fmt.Errorf("remove %s: %w", lost.ID, err)
	}
	rec.Detail = fmt.Sprintf("%s lost: %s; %s joined and the cluster was whole and balanced %v later; %s streamed in snapshots",
		lost.ID, first, added.ID, now().Sub(joined).Round(100*time.Millisecond), bytesMoved(before, c.snapshotBytesSent(ctx)))
	return nil, nil
}

// addNodes adds two spare nodes at once and waits until every node's
// replica and leader counts are within one of each other; the heal drains
// both, waits until they host nothing, stops them and removes them from
// the catalog, so the run goes on with the cluster it had.
func (in *Injector) addNodes(ctx context.Context, rec *FaultRecord) (func() error, error) {
	c := in.c
	if len(c.Spares) < 2 {
		rec.Skipped = "fewer than two spare node slots left"
		return nil, nil
	}
	admin, err := c.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	smp := startMajoritySampler(ctx, c, admin)
	before := c.snapshotBytesSent(ctx)
	start := now()
	var added []*Node
	for range 2 {
		n, err := c.AddSpare()
		if n != nil {
			added = append(added, n)
			rec.Targets = append(rec.Targets, n.ID)
		}
		if err != nil {
			return in.removeAdded(ctx, admin, smp, added, rec), err
		}
	}
	heal := func() error { return in.removeAdded(ctx, admin, smp, added, rec)() }
	live := c.memberIDs()
	if _, err := waitNodes(ctx, admin, balanceWaitMax, func(l *client.NodeList) string { return balanced(l, live) }); err != nil {
		return heal, fmt.Errorf("%s added: %w", ids(added), err)
	}
	rec.Detail = fmt.Sprintf("%s joined; replica and leader counts within one %v later; %s streamed in snapshots",
		ids(added), now().Sub(start).Round(100*time.Millisecond), bytesMoved(before, c.snapshotBytesSent(ctx)))
	return heal, nil
}

// removeAdded returns the heal of addNodes: drain the added nodes, wait
// until they host nothing, stop them, remove them and retire them.
func (in *Injector) removeAdded(ctx context.Context, admin *client.Client, smp *majoritySampler, added []*Node, rec *FaultRecord) func() error {
	return func() error {
		defer admin.Close()
		defer func() { rec.MajorityDips, rec.MajoritySamples = smp.stop() }()
		for _, n := range added {
			n.marker("drain (leaving the cluster)")
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := retryAdmin(dctx, func(cc context.Context) (client.NodeStatus, error) { return admin.DrainNode(cc, n.ID) })
			cancel()
			if err != nil {
				return fmt.Errorf("drain %s: %w", n.ID, err)
			}
		}
		start := now()
		if _, err := waitNodes(ctx, admin, balanceWaitMax, func(l *client.NodeList) string { return emptied(l, added) }); err != nil {
			return err
		}
		for _, n := range added {
			in.c.Stop(n, 20*time.Second)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := retryAdmin(rctx, func(cc context.Context) (int, error) { return admin.RemoveNode(cc, n.ID) })
			cancel()
			if err != nil {
				return fmt.Errorf("remove %s: %w", n.ID, err)
			}
			if err := in.c.Retire(n); err != nil {
				return err
			}
		}
		rec.Detail += fmt.Sprintf("; drained and removed in %v", now().Sub(start).Round(100*time.Millisecond))
		return nil
	}
}

// waitNodes polls node ls until problem returns "" (done; the last
// answer's summary is returned) or the wait ends (the last problem is the
// error).
func waitNodes(ctx context.Context, admin *client.Client, within time.Duration, problem func(*client.NodeList) string) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := "node ls never answered"
	for wctx.Err() == nil {
		qctx, qcancel := context.WithTimeout(wctx, 2*time.Second)
		l, err := admin.ListNodes(qctx)
		qcancel()
		if err == nil {
			if last = problem(l); last == "" {
				return summary(l), nil
			}
		}
		sleep(wctx, 250*time.Millisecond)
	}
	return "", fmt.Errorf("not settled after %v: %s", within, last)
}

// rebuiltOrReported returns "" once no move is in flight and the lost
// node either holds no replica (all rebuilt elsewhere) or holds only
// replicas of partitions node ls reports under-replicated because it is
// dead with nowhere to go.
func rebuiltOrReported(l *client.NodeList, lost string) string {
	if l.MovesInFlight > 0 {
		return fmt.Sprintf("%d moves in flight", l.MovesInFlight)
	}
	st, ok := statusOf(l, lost)
	if !ok || st.Replicas == 0 {
		return ""
	}
	if l.UnderReplicatedTotal == 0 || len(l.UnderReplicated) == 0 {
		return fmt.Sprintf("%s holds %d replicas, none reported under-replicated", lost, st.Replicas)
	}
	for _, u := range l.UnderReplicated {
		if !strings.Contains(u.Reason, lost+" is dead past the dead-node timeout and there is no node") {
			return fmt.Sprintf("%s/%d under-replicated: %s", u.Queue, u.Partition, u.Reason)
		}
	}
	return ""
}

// balanced returns "" once no move is in flight, no partition is
// under-replicated, and the replica and preferred-leader counts of the
// nodes in live differ by at most one.
func balanced(l *client.NodeList, live []string) string {
	if l.MovesInFlight > 0 || l.UnderReplicatedTotal > 0 {
		return fmt.Sprintf("%d moves in flight, %d partitions under-replicated", l.MovesInFlight, l.UnderReplicatedTotal)
	}
	lo, hi, llo, lhi := 1<<30, 0, 1<<30, 0
	for _, id := range live {
		st, ok := statusOf(l, id)
		if !ok {
			return id + " not registered"
		}
		lo, hi = min(lo, st.Replicas), max(hi, st.Replicas)
		llo, lhi = min(llo, st.Leaders), max(lhi, st.Leaders)
	}
	if hi-lo > 1 || lhi-llo > 1 {
		return fmt.Sprintf("replicas per node %d-%d, preferred leaders %d-%d", lo, hi, llo, lhi)
	}
	return ""
}

// emptied returns "" once every node of added hosts and leads nothing.
func emptied(l *client.NodeList, added []*Node) string {
	for _, n := range added {
		st, ok := statusOf(l, n.ID)
		if ok && (st.Replicas > 0 || st.Leaving > 0 || st.Leading > 0) {
			return fmt.Sprintf("%s: %d replicas, %d leaving, leading %d (%s)", n.ID, st.Replicas, st.Leaving, st.Leading, st.Stuck)
		}
	}
	return ""
}

// statusOf returns node id's status in l.
func statusOf(l *client.NodeList, id string) (client.NodeStatus, bool) {
	i := slices.IndexFunc(l.Nodes, func(st client.NodeStatus) bool { return st.ID == id })
	if i < 0 {
		return client.NodeStatus{}, false
	}
	return l.Nodes[i], true
}

// summary is a short line of l: replicas per node and under-replicated
// partitions.
func summary(l *client.NodeList) string {
	var parts []string
	for _, st := range l.Nodes {
		parts = append(parts, fmt.Sprintf("%s:%d", st.ID, st.Replicas))
	}
	out := "replicas " + strings.Join(parts, " ")
	if l.UnderReplicatedTotal > 0 {
		out += fmt.Sprintf(", %d under-replicated (%s)", l.UnderReplicatedTotal, l.UnderReplicated[0].Reason)
	}
	return out
}

// memberIDs returns the ids of the cluster's members.
func (c *Cluster) memberIDs() []string {
	var out []string
	for _, n := range c.members() {
		out = append(out, n.ID)
	}
	return out
}

// bytesMoved formats the snapshot bytes the nodes sent between two
// readings: each node's growth, a node absent before counting from zero
// (a node that restarted in between counts from zero too).
func bytesMoved(before, after map[string]int64) string {
	var sum int64
	for id, v := range after {
		if b := before[id]; v >= b {
			sum += v - b
		} else {
			sum += v
		}
	}
	return fmt.Sprintf("%.2f MB", float64(sum)/1e6)
}
