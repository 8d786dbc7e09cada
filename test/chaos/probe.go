package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ReplicaStatus is one entry of GET /v1/replicas.
type ReplicaStatus struct {
	Queue        string `json:"queue"`
	Partition    int    `json:"partition"`
	Group        string `json:"group"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
	Suffrage     string `json:"suffrage"`
	Abstaining   bool   `json:"abstaining"`
	// Voters is set on the leader only: its group's latest voters.
	Voters []string `json:"voters"`
}

// PartRef names one queue partition.
type PartRef struct {
	Queue     string
	Partition int
}

func (p PartRef) String() string { return fmt.Sprintf("%s/%d", p.Queue, p.Partition) }

func (c *Cluster) getJSON(ctx context.Context, url string, v any) error {
	return getJSONWith(ctx, c.httpc, url, v)
}

// getJSONWith is getJSON through hc.
func getJSONWith(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, errorTextMax))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(text)))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// errorTextMax bounds the text of an error answer kept in an error.
const errorTextMax = 512

// Replicas returns a node's replica states.
func (c *Cluster) Replicas(ctx context.Context, n *Node) ([]ReplicaStatus, error) {
	var out []ReplicaStatus
	err := c.getJSON(ctx, c.url(n, "/v1/replicas"), &out)
	return out, err
}

// MetaLeader returns the meta leader's node as the reachable nodes see it
// (the most common answer), or nil.
func (c *Cluster) MetaLeader(ctx context.Context) *Node {
	votes := map[string]int{}
	for _, n := range c.Up() {
		var v struct {
			MetaLeader string `json:"meta_leader"`
		}
		if c.getJSON(ctx, c.url(n, "/v1/cluster"), &v) == nil && v.MetaLeader != "" {
			votes[v.MetaLeader]++
		}
	}
	best := ""
	for id, k := range votes {
		if best == "" || k > votes[best] || (k == votes[best] && id < best) {
			best = id
		}
	}
	return c.ByID(best)
}

// view is every reachable node's replicas, by partition.
type view map[PartRef][]nodeReplica

type nodeReplica struct {
	node string
	ReplicaStatus
}

// View gathers the replicas of every reachable node, asking them all at
// once so that the answers describe nearly the same moment.
func (c *Cluster) View(ctx context.Context) view {
	up := c.Up()
	answers := make([][]ReplicaStatus, len(up))
	var wg sync.WaitGroup
	for i, n := range up {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rs, err := c.Replicas(ctx, n); err == nil {
				answers[i] = rs
			}
		}()
	}
	wg.Wait()
	v := view{}
	for i, n := range up {
		for _, r := range answers[i] {
			k := PartRef{r.Queue, r.Partition}
			v[k] = append(v[k], nodeReplica{n.ID, r})
		}
	}
	return v
}

// leader returns the node that leads p by its own account and that the
// other replicas agree on, or "".
func (v view) leader(p PartRef) string {
	leader := ""
	for _, r := range v[p] {
		if r.Role == "leader" {
			if leader != "" {
				return "" // two claim it: an election is settling
			}
			leader = r.node
		}
	}
	for _, r := range v[p] {
		if r.Leader != leader {
			return ""
		}
	}
	return leader
}

// PartitionLeader returns the node leading p, or nil.
func (c *Cluster) PartitionLeader(ctx context.Context, p PartRef) *Node {
	return c.ByID(c.View(ctx).leader(p))
}

// Ready reports whether every running node answers /readyz.
func (c *Cluster) Ready(ctx context.Context) bool {
	for _, n := range c.members() {
		if !n.Running() || n.Paused() {
			return false
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url(n, "/readyz"), nil)
		resp, err := c.httpc.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// WaitHealthy waits until every node is up and ready, every partition of
// placement has all its replicas running under one agreed leader, every
// replica votes (notVoting), and
// every replica has applied at least what its leader had applied when the
// leaders were first agreed (it caught up). It returns the first problem
// still present when ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context, placement map[PartRef][]string) error {
	var target map[PartRef]uint64
	for {
		problem := c.health(ctx, placement, &target)
		if problem == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy: %s", problem)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// health returns what keeps the cluster from being healthy, or "". The
// first time all leaders are agreed it fills target with their applied
// indexes.
func (c *Cluster) health(ctx context.Context, placement map[PartRef][]string, target *map[PartRef]uint64) string {
	if !c.Ready(ctx) {
		return "a node is down or not ready"
	}
	v := c.View(ctx)
	leaders := map[PartRef]uint64{}
	for p, want := range placement {
		if len(v[p]) < len(want) {
			return fmt.Sprintf("%s: %d of %d replicas running", p, len(v[p]), len(want))
		}
		l := v.leader(p)
		if l == "" {
			return fmt.Sprintf("%s: no agreed leader", p)
		}
		for _, r := range v[p] {
			if r.node == l {
				leaders[p] = r.AppliedIndex
			}
		}
		if problem := v.notVoting(p, l, want); problem != "" {
			return problem
		}
	}
	if *target == nil {
		*target = leaders
	}
	for p, idx := range *target {
		for _, r := range v[p] {
			if r.AppliedIndex < idx {
				return fmt.Sprintf("%s: %s applied %d of %d", p, r.node, r.AppliedIndex, idx)
			}
		}
	}
	return ""
}

// notVoting names a replica of p placed on one of placed that does not vote yet (a learner being
// rebuilt or moved in, or a replica abstaining until it is recorded
// caught up), and returns "" when every replica votes. Until then the
// partition does not survive one more node loss, so the cluster has not
// recovered: the next fault would strike two nodes of one group. The
// leader's latest configuration wins over a replica's own, which may
// trail it by the entries in flight.
func (v view) notVoting(p PartRef, leader string, placed []string) string {
	var voters []string
	for _, r := range v[p] {
		if r.node == leader {
			voters = r.Voters
		}
	}
	for _, r := range v[p] {
		if !slices.Contains(placed, r.node) {
			continue // leaving: no longer in the catalog's placement
		}
		votes := r.Suffrage == "voter"
		if len(voters) > 0 {
			votes = slices.Contains(voters, r.node)
		}
		switch {
		case !votes:
			return fmt.Sprintf("%s: %s does not vote yet (its suffrage %s, the leader's voters %v)", p, r.node, r.Suffrage, voters)
		case r.Abstaining:
			return fmt.Sprintf("%s: %s abstains from elections (not yet recorded caught up)", p, r.node)
		}
	}
	return ""
}

// Converge polls the replicas until those of every partition report the
// same digest at the same applied index, or ctx ends; it returns the last
// observation.
func (c *Cluster) Converge(ctx context.Context, placement map[PartRef][]string) []Convergence {
	var best []Convergence
	for {
		out, agreed := c.convergence(ctx, placement)
		if agreed {
			return out
		}
		// A reading cut short by the deadline names no replica; report
		// the last one that saw the replicas instead.
		if ctx.Err() == nil || best == nil {
			best = out
		}
		select {
		case <-ctx.Done():
			return best
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) convergence(ctx context.Context, placement map[PartRef][]string) ([]Convergence, bool) {
	v := c.View(ctx)
	all := true
	var out []Convergence
	for p, want := range placement {
		cv := Convergence{Queue: p.Queue, Partition: p.Partition, Agreed: len(v[p]) == len(want)}
		seen := map[string]bool{}
		for _, r := range v[p] {
			cv.Group = r.Group
			state := fmt.Sprintf("%d:%.12s", r.AppliedIndex, r.Digest)
			seen[state] = true
			cv.AppliedIndex = r.AppliedIndex
			cv.Replicas = append(cv.Replicas, r.node+"@"+state)
		}
		sort.Strings(cv.Replicas)
		if cv.Agreed && len(seen) > 1 {
			// Apart at this moment, but a group that keeps applying
			// entries (ticks) always is: compare at one index instead.
			c.agreeAtIndex(ctx, v[p], &cv)
		} else {
			cv.Agreed = cv.Agreed && len(seen) == 1
		}
		if len(cv.Replicas) < len(want) {
			cv.Replicas = append(cv.Replicas, "missing: "+strings.Join(missing(want, v[p]), ","))
		}
		all = all && cv.Agreed
		out = append(out, cv)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].Partition < out[j].Partition
	})
	return out, all
}

func missing(want []string, have []nodeReplica) []string {
	got := map[string]bool{}
	for _, r := range have {
		got[r.node] = true
	}
	var out []string
	for _, id := range want {
		if !got[id] {
			out = append(out, id)
		}
	}
	return out
}

// digestAtWait is how long a replica is given to apply the entry its
// digest is asked at: its leader tells it the commit index within a
// second (raft's commit timeout) when nothing else does, and a ticking
// leader makes an entry a second.
const digestAtWait = 5 * time.Second

// agreeAtIndex compares the replicas of one group at one raft index: the
// most advanced replica's applied index (each node computes its replica's
// digest when it has applied that entry, at once for one that has). A
// group that keeps applying entries (ticks) is always apart by the entry
// in flight at any one moment, never at one index. cv.Agreed says whether
// every replica answered with the same digest, and cv.Replicas shows each
// replica's state there, or why it has none: it did not apply the entry
// within digestAtWait, or had gone past it by the time it was asked (then
// the next round asks again).
func (c *Cluster) agreeAtIndex(ctx context.Context, reps []nodeReplica, cv *Convergence) {
	at := uint64(0)
	for _, r := range reps {
		at = max(at, r.AppliedIndex)
	}
	for range digestTries {
		passed := c.digestsAt(ctx, reps, at, cv)
		if cv.Agreed || passed == 0 || ctx.Err() != nil {
			return
		}
		// A replica went past the index before it was asked (reading
		// every replica's state takes a while, and a group that keeps
		// ticking moves on meanwhile): ask again a little past where it
		// said it was a moment ago, which every replica reaches within a
		// few seconds and none has passed yet.
		at = passed + digestAheadEntries
	}
}

// digestTries bounds the tries of agreeAtIndex, each at most digestAtWait.
const digestTries = 4

// digestAheadEntries is how far past the applied index a replica gave
// when it answered 409 the next try of agreeAtIndex asks.
const digestAheadEntries = 2

// passedIndex reads the applied index from a 409 answer's text ("...
// applied M"), or 0.
var passedIndex = regexp.MustCompile(`applied (\d+)`)

// digestsAt asks every replica for its digest at index at and fills cv.
// It returns the highest applied index given by a replica that had
// passed at (409), or 0 when none had.
func (c *Cluster) digestsAt(ctx context.Context, reps []nodeReplica, at uint64, cv *Convergence) uint64 {
	hc := *c.httpc
	hc.Timeout = digestAtWait + 2*time.Second
	states := make([]string, len(reps))
	var passed atomic.Uint64
	var wg sync.WaitGroup
	for i, r := range reps {
		n := c.ByID(r.node)
		if n == nil {
			states[i] = r.node + "@gone:none"
			continue
		}
		wg.Go(func() {
			var d struct {
				Digest string `json:"digest"`
			}
			url := c.url(n, fmt.Sprintf("/v1/replicas/%s/digest?at=%d&wait=%s", r.Group, at, digestAtWait))
			if err := getJSONWith(ctx, &hc, url, &d); err != nil {
				states[i] = fmt.Sprintf("%s@%d:none (%v)", r.node, at, err)
				if m := passedIndex.FindStringSubmatch(err.Error()); m != nil {
					if v, perr := strconv.ParseUint(m[1], 10, 64); perr == nil {
						for cur := passed.Load(); v > cur && !passed.CompareAndSwap(cur, v); cur = passed.Load() {
						}
					}
				}
				return
			}
			states[i] = fmt.Sprintf("%s@%d:%.12s", r.node, at, d.Digest)
		})
	}
	wg.Wait()
	sort.Strings(states)
	cv.Replicas, cv.AppliedIndex = states, at
	digests := map[string]bool{}
	none := false
	for _, st := range states {
		_, d, _ := strings.Cut(st, ":")
		digests[d] = true
		none = none || strings.HasPrefix(d, "none")
	}
	cv.Agreed = len(digests) == 1 && !none
	return passed.Load()
}
